"""Compression codecs of Kafka record batches and legacy message sets: gzip, snappy (raw
and xerial), lz4 (frame, and the old broken checksum), zstd; output bounded.

Codec ids are the low three attribute bits: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.
Every decompressor is bounded by ``max_size`` so a decompression bomb raises
``CorruptRecordError`` instead of exhausting memory, and every library error is
mapped to ``CorruptRecordError`` (bytes we cannot decode are corrupt from our side).
An unknown codec id raises ``UnsupportedCompressionTypeError``: the batch may be fine,
this client just cannot read it.

Wire-compatibility notes:

* snappy: Java wraps raw snappy blocks in xerial framing; librdkafka writes and reads
  both. We write xerial (what Java can read) and accept both on input.
* lz4: the LZ4 frame format with independent 64 KiB blocks. Before Kafka 0.10
  (message format v0) the frame header checksum was computed over the magic number
  too; we write that for magic 0 and repair it on input.
"""

from __future__ import annotations

import struct
import zlib
from typing import Final

from aiokproto.errors import CorruptRecordError, UnsupportedCompressionTypeError

# lz4, snappy and zstandard are imported by the functions that use them: together ~8 ms
# of every client's import, and most programs use one codec or none

NONE: Final = 0
GZIP: Final = 1
SNAPPY: Final = 2
LZ4: Final = 3
ZSTD: Final = 4

CODEC_NAMES: Final[dict[int, str]] = {
    NONE: "none",
    GZIP: "gzip",
    SNAPPY: "snappy",
    LZ4: "lz4",
    ZSTD: "zstd",
}
CODEC_IDS: Final[dict[str, int]] = {name: cid for cid, name in CODEC_NAMES.items()}

#: Default bound on one batch's decompressed size. Brokers cap batches at
#: ``message.max.bytes`` (1 MiB by default) *compressed*; 256 MiB leaves room for very
#: compressible data while keeping a forged batch from taking the process down.
DEFAULT_MAX_DECOMPRESSED: Final = 256 * 1024 * 1024

_XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER: Final = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK: Final = 32 * 1024  # Java's SnappyOutputStream default block size
_LZ4_MAGIC: Final = b"\x04\x22\x4d\x18"
_INT32 = struct.Struct(">i")


def codec_id(name_or_id: str | int | None) -> int:
    """Codec id for a ``compression_type`` config value ("gzip", 1, None, ...)."""
    if name_or_id is None:
        return NONE
    if isinstance(name_or_id, str):
        try:
            return CODEC_IDS[name_or_id.lower()]
        except KeyError:
            raise UnsupportedCompressionTypeError(
                f"unknown compression type {name_or_id!r}; use one of "
                f"{', '.join(CODEC_IDS)}"
            ) from None
    if name_or_id not in CODEC_NAMES:
        raise UnsupportedCompressionTypeError(f"unknown compression codec id {name_or_id}")
    return name_or_id


# -- compress ---------------------------------------------------------------------------


def compress(codec: int, data: bytes | bytearray | memoryview, level: int | None = None,
             *, magic: int = 2) -> bytes:
    """Compress a records section (v2) or inner message set (v0/v1)."""
    if codec == GZIP:
        # wbits=31: gzip container, which is what Java's GZIPOutputStream writes.
        c = zlib.compressobj(6 if level is None else level, zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()
    if codec == SNAPPY:
        return _xerial_compress(data)
    if codec == LZ4:
        import lz4.frame  # type: ignore[import-untyped]

        out: bytes = lz4.frame.compress(
            data,
            compression_level=0 if level is None else level,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,  # Kafka's Java reader decodes every block on its own
            content_checksum=False,
            store_size=False,
        )
        if magic == 0:
            out = _lz4_set_header_checksum(out, broken=True)
        return out
    if codec == ZSTD:
        import zstandard

        return zstandard.ZstdCompressor(level=3 if level is None else level).compress(data)
    if codec == NONE:
        return bytes(data)
    raise UnsupportedCompressionTypeError(f"unknown compression codec id {codec}")


def _xerial_compress(data: bytes | bytearray | memoryview) -> bytes:
    import snappy  # type: ignore[import-untyped]

    view = memoryview(data)
    parts = [_XERIAL_HEADER]
    pack = _INT32.pack
    for start in range(0, len(view), _XERIAL_BLOCK):
        block: bytes = snappy.compress(view[start:start + _XERIAL_BLOCK])
        parts.append(pack(len(block)))
        parts.append(block)
    return b"".join(parts)


# -- decompress -------------------------------------------------------------------------


def decompress(codec: int, data: bytes | bytearray | memoryview, *, magic: int = 2,
               max_size: int = DEFAULT_MAX_DECOMPRESSED) -> bytes:
    """Decompress, raising ``CorruptRecordError`` on bad input or output > ``max_size``."""
    try:
        if codec == GZIP:
            return _gzip_decompress(data, max_size)
        if codec == SNAPPY:
            return _snappy_decompress(data, max_size)
        if codec == LZ4:
            return _lz4_decompress(data, max_size)
        if codec == ZSTD:
            return _zstd_decompress(data, max_size)
    except CorruptRecordError:
        raise
    except Exception as exc:  # every codec library has its own error types
        raise CorruptRecordError(
            f"{CODEC_NAMES[codec]} decompression failed: {type(exc).__name__}: {exc}"
        ) from exc
    if codec == NONE:
        return bytes(data)
    raise UnsupportedCompressionTypeError(f"unknown compression codec id {codec}")


def _too_big(codec: str, max_size: int) -> CorruptRecordError:
    return CorruptRecordError(
        f"{codec} data decompresses to more than {max_size} bytes "
        "(raise max_decompressed_size if this is legitimate)"
    )


def _gzip_decompress(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    parts: list[bytes] = []
    total = 0
    rest: bytes | bytearray | memoryview = data
    while True:
        d = zlib.decompressobj(47)  # 32 + 15: accept gzip or zlib headers
        chunk = d.decompress(rest, max_size + 1 - total)
        parts.append(chunk)
        total += len(chunk)
        if total > max_size:
            raise _too_big("gzip", max_size)
        if not d.eof:
            if d.unconsumed_tail:
                raise _too_big("gzip", max_size)
            raise CorruptRecordError("gzip data is truncated")
        rest = d.unused_data
        if not rest:  # concatenated gzip members are legal; loop over them
            return parts[0] if len(parts) == 1 else b"".join(parts)


def _raw_snappy_length(data: bytes | bytearray | memoryview, pos: int, end: int) -> int:
    result = shift = 0
    while pos < end and shift < 35:
        b = data[pos]
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result
        pos += 1
        shift += 7
    raise CorruptRecordError("snappy block has a bad length preamble")


def _snappy_decompress(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    import snappy

    view = memoryview(data)
    if bytes(view[:8]) != _XERIAL_MAGIC:
        if _raw_snappy_length(view, 0, len(view)) > max_size:
            raise _too_big("snappy", max_size)
        return bytes(snappy.uncompress(view))
    # xerial: magic, version int32, compat int32, then (int32 length + raw block)*
    pos, end = 16, len(view)
    parts: list[bytes] = []
    total = 0
    while pos < end:
        if pos + 4 > end:
            raise CorruptRecordError("xerial snappy block length is truncated")
        (size,) = _INT32.unpack_from(view, pos)
        pos += 4
        if size < 0 or pos + size > end:
            raise CorruptRecordError(f"xerial snappy block length {size} is out of range")
        total += _raw_snappy_length(view, pos, pos + size)
        if total > max_size:
            raise _too_big("snappy", max_size)
        parts.append(snappy.uncompress(view[pos:pos + size]))
        pos += size
    return b"".join(parts)


# -- lz4 frame header checksum ----------------------------------------------------------

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32 (only used on the few bytes of an lz4 frame header)."""
    n = len(data)
    pos = 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while pos + 16 <= n:
            for i in range(4):
                lane = int.from_bytes(data[pos:pos + 4], "little")
                v[i] = (_rotl((v[i] + lane * _P2) & _M32, 13) * _P1) & _M32
                pos += 4
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while pos + 4 <= n:
        h = (h + int.from_bytes(data[pos:pos + 4], "little") * _P3) & _M32
        h = (_rotl(h, 17) * _P4) & _M32
        pos += 4
    while pos < n:
        h = (h + data[pos] * _P5) & _M32
        h = (_rotl(h, 11) * _P1) & _M32
        pos += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    return h ^ (h >> 16)


def _lz4_header_end(frame: bytes | bytearray | memoryview) -> int:
    """Index of the header checksum byte (HC) of an lz4 frame."""
    if len(frame) < 7 or bytes(frame[:4]) != _LZ4_MAGIC:
        raise CorruptRecordError("lz4 data does not start with an lz4 frame header")
    flg = frame[4]
    end = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    if len(frame) <= end:
        raise CorruptRecordError("lz4 frame header is truncated")
    return end


def _lz4_checksums(frame: bytes | bytearray | memoryview) -> tuple[int, int, int]:
    """(HC position, correct HC, HC as Kafka < 0.10 computed it)."""
    end = _lz4_header_end(frame)
    good = (xxh32(bytes(frame[4:end])) >> 8) & 0xFF
    broken = (xxh32(bytes(frame[:end])) >> 8) & 0xFF
    return end, good, broken


def _lz4_set_header_checksum(frame: bytes, *, broken: bool) -> bytes:
    end, good, bad = _lz4_checksums(frame)
    return frame[:end] + bytes((bad if broken else good,)) + frame[end + 1:]


def _lz4_decompress(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    import lz4.frame

    end = _lz4_header_end(data)
    if data[end] != (xxh32(bytes(data[4:end])) >> 8) & 0xFF:
        _, good, broken = _lz4_checksums(data)
        if data[end] == broken:
            # written by a pre-0.10 producer/broker: repair instead of rejecting
            fixed = bytearray(data)
            fixed[end] = good
            data = fixed
    parts: list[bytes] = []
    total = 0
    rest: bytes | bytearray | memoryview = data
    # python-lz4 allocates max_length up front, so ask for output in steps
    step = max(1 << 18, 8 * len(data))
    while rest:
        d = lz4.frame.LZ4FrameDecompressor()
        while True:
            chunk: bytes = d.decompress(rest, min(step, max_size + 1 - total))
            rest = b""
            parts.append(chunk)
            total += len(chunk)
            if total > max_size:
                raise _too_big("lz4", max_size)
            if d.eof or d.needs_input:
                break
        if not d.eof:
            raise CorruptRecordError("lz4 frame is truncated")
        rest = d.unused_data
    return parts[0] if len(parts) == 1 else b"".join(parts)


_ZSTD_MAGIC: Final = 0xFD2FB528
_ZSTD_BLOCK_MAX: Final = 128 * 1024


def _zstd_output_bound(data: bytes | bytearray | memoryview) -> int:
    """Walk zstd frame and block headers: check the frames are complete and return an
    upper bound of the output (raw and RLE blocks declare their size, a compressed
    block regenerates at most 128 KiB). This bounds memory before libzstd runs."""
    view = memoryview(data)
    end = len(view)
    pos = bound = 0
    while pos < end:
        if pos + 4 > end:
            raise CorruptRecordError("zstd frame magic is truncated")
        magic = int.from_bytes(view[pos:pos + 4], "little")
        pos += 4
        if magic & 0xFFFFFFF0 == 0x184D2A50:  # skippable frame
            if pos + 4 > end:
                raise CorruptRecordError("zstd skippable frame is truncated")
            pos += 4 + int.from_bytes(view[pos:pos + 4], "little")
            continue
        if magic != _ZSTD_MAGIC:
            raise CorruptRecordError("zstd data has a bad frame magic number")
        if pos >= end:
            raise CorruptRecordError("zstd frame header is truncated")
        fhd = view[pos]
        single_segment = fhd & 0x20
        pos += 1 + (0 if single_segment else 1) + (0, 1, 2, 4)[fhd & 3]
        pos += ((1 if single_segment else 0), 2, 4, 8)[fhd >> 6]
        while True:
            if pos + 3 > end:
                raise CorruptRecordError("zstd data is truncated")
            header = view[pos] | (view[pos + 1] << 8) | (view[pos + 2] << 16)
            pos += 3
            kind = (header >> 1) & 3
            size = header >> 3
            if kind == 0:
                pos += size
                bound += size
            elif kind == 1:
                pos += 1
                bound += size
            elif kind == 2:
                pos += size
                bound += _ZSTD_BLOCK_MAX
            else:
                raise CorruptRecordError("zstd block has the reserved block type")
            if header & 1:
                break
        if fhd & 0x04:
            pos += 4  # content checksum
        if pos > end:
            raise CorruptRecordError("zstd data is truncated")
    return bound


def _zstd_decompress(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    import zstandard

    if _zstd_output_bound(data) > max_size + _ZSTD_BLOCK_MAX:
        raise _too_big("zstd", max_size)
    # The walk above bounds the output, so one unbounded call is safe now.
    parts: list[bytes] = []
    total = 0
    rest: bytes | bytearray | memoryview = data
    while rest:
        d = zstandard.ZstdDecompressor().decompressobj()
        chunk = d.decompress(rest)
        parts.append(chunk)
        total += len(chunk)
        if not d.eof:
            raise CorruptRecordError("zstd data is truncated")
        rest = d.unused_data
    if total > max_size:
        raise _too_big("zstd", max_size)
    return parts[0] if len(parts) == 1 else b"".join(parts)
