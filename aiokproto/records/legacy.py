"""Legacy message sets: message format v0 (magic 0) and v1 (magic 1), built and parsed,
compressed wrappers included.

Message layout (big-endian; CRC-32 (zlib, not C) covers magic..end)::

    offset int64 | messageSize int32 | crc uint32 | magic int8 | attributes int8
    [timestamp int64 (v1 only)] | keyLength int32 | key | valueLength int32 | value

Compression wraps a whole inner message set into the value of one wrapper message
(codec in attribute bits 0-2). In v1 the inner offsets are relative (0, 1, ...) and
the wrapper carries the absolute offset of the *last* inner message; in v0 inner
offsets are absolute. A v1 wrapper with the LogAppendTime bit (3) overrides the inner
timestamps with its own.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator, Sequence
from typing import Final

from aiokproto.errors import (
    CorruptRecordError,
    KafkaConfigError,
    UnsupportedCompressionTypeError,
)
from aiokproto.records import compression as _compression
from aiokproto.records.record import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    NO_TIMESTAMP_TYPE,
    Header,
    Record,
)

LOG_OVERHEAD: Final = 12  # offset + messageSize
_PREFIX = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_V1_TIMESTAMP = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_HEADER_V0 = struct.Struct(">qiIbbi")  # ... + key length
_HEADER_V1 = struct.Struct(">qiIbbqi")
#: smallest messageSize: crc, magic, attributes, [timestamp], key len, value len
MIN_SIZE: Final = {0: 14, 1: 22}

CODEC_MASK: Final = 0x07
TIMESTAMP_TYPE_MASK: Final = 0x08


def _encode_message(offset: int, magic: int, attributes: int, timestamp: int,
                    key: bytes | None, value: bytes | bytearray | None) -> bytes:
    parts: list[bytes | bytearray] = []
    if key is None:
        parts.append(b"\xff\xff\xff\xff")
    else:
        parts.append(_INT32.pack(len(key)))
        parts.append(key)
    if value is None:
        parts.append(b"\xff\xff\xff\xff")
    else:
        parts.append(_INT32.pack(len(value)))
        parts.append(value)
    body = b"".join(parts)
    head = bytes((magic, attributes & 0xFF))
    if magic == 1:
        head += _V1_TIMESTAMP.pack(timestamp)
    crc = zlib.crc32(body, zlib.crc32(head))
    size = 4 + len(head) + len(body)
    return b"".join((struct.pack(">qiI", offset, size, crc), head, body))


class LegacyMessageSetBuilder:
    """Builds a v0/v1 message set (one compressed wrapper if a codec is set).

    Same shape as ``RecordBatchBuilder``; used for tests and old-format topics.
    """

    __slots__ = ("_base_offset", "_codec", "_count", "_level", "_limit",
                 "_log_append_time", "_magic", "_messages", "_size")

    def __init__(self, magic: int, *, batch_size: int = 16384,
                 compression: int = _compression.NONE, compression_level: int | None = None,
                 base_offset: int = 0, log_append_time: bool = False) -> None:
        if magic not in (0, 1):
            raise KafkaConfigError(f"legacy message format magic must be 0 or 1, not {magic}")
        if compression not in _compression.CODEC_NAMES or (compression == _compression.ZSTD):
            raise UnsupportedCompressionTypeError(
                f"compression codec {compression} is not available for message format v{magic}"
            )
        self._magic = magic
        self._codec = compression
        self._level = compression_level
        self._limit = batch_size
        self._base_offset = base_offset
        self._log_append_time = log_append_time
        self._messages: list[tuple[int, bytes | None, bytes | None]] = []
        self._count = 0
        self._size = 0

    def append(self, timestamp_ms: int, key: bytes | None, value: bytes | None,
               headers: Sequence[Header] | None = None) -> int | None:
        """Append a message; return its offset delta, or None if the set is full."""
        if headers:
            raise KafkaConfigError("record headers need message format v2 (magic 2)")
        size = LOG_OVERHEAD + MIN_SIZE[self._magic] + len(key or b"") + len(value or b"")
        if self._count and self._size + size > self._limit:
            return None
        self._messages.append((timestamp_ms, key, value))
        self._size += size
        self._count += 1
        return self._count - 1

    @property
    def record_count(self) -> int:
        return self._count

    @property
    def estimated_size(self) -> int:
        extra = LOG_OVERHEAD + MIN_SIZE[self._magic] if self._codec else 0
        return self._size + extra

    def build(self) -> bytes:
        magic = self._magic
        ts_attr = TIMESTAMP_TYPE_MASK if self._log_append_time and magic == 1 else 0
        if not self._codec:
            return b"".join(
                _encode_message(self._base_offset + i, magic, ts_attr, ts, k, v)
                for i, (ts, k, v) in enumerate(self._messages)
            )
        # inner offsets: relative in v1, absolute in v0
        first = 0 if magic == 1 else self._base_offset
        inner = b"".join(
            _encode_message(first + i, magic, 0, ts, k, v)
            for i, (ts, k, v) in enumerate(self._messages)
        )
        wrapped = _compression.compress(self._codec, inner, self._level, magic=magic)
        max_ts = max((ts for ts, _, _ in self._messages), default=-1)
        last = self._base_offset + len(self._messages) - 1
        return _encode_message(last, magic, self._codec | ts_attr, max_ts, None, wrapped)


class LegacyBatch:
    """One top-level v0/v1 message: a plain message or a compressed wrapper.

    Exposes the same fields as ``RecordBatch`` so a consumer can treat both alike;
    the v2-only fields hold their "none" values (-1, False).
    """

    __slots__ = ("_data", "_key", "_max_decompressed", "_value", "attributes", "crc",
                 "magic", "offset", "timestamp")

    is_transactional: Final = False
    is_control: Final = False
    producer_id: Final = -1
    producer_epoch: Final = -1
    base_sequence: Final = -1
    partition_leader_epoch: Final = -1

    offset: int
    crc: int
    magic: int
    attributes: int
    timestamp: int

    def __init__(self, data: memoryview, *, check_crc: bool = True,
                 max_decompressed_size: int = _compression.DEFAULT_MAX_DECOMPRESSED) -> None:
        """``data`` is exactly one whole message, offset and size included."""
        self._max_decompressed = max_decompressed_size
        self._data = data
        self.offset, self.crc, self.magic, self.attributes, self.timestamp, self._key, \
            self._value = _parse_message(data, check_crc)
        # a fetch continues at next_offset, an int64: it must exist
        if not 0 <= self.offset < 2**63 - 1:
            raise CorruptRecordError(f"message with impossible offset {self.offset}")

    def __repr__(self) -> str:
        return (f"LegacyBatch(magic={self.magic}, last_offset={self.offset}, "
                f"compression={self.compression})")

    @property
    def compression(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def timestamp_type(self) -> int:
        if self.magic == 0:
            return NO_TIMESTAMP_TYPE
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def last_offset(self) -> int:
        return self.offset

    @property
    def next_offset(self) -> int:
        return self.offset + 1

    @property
    def base_offset(self) -> int:
        """First offset (decompresses a wrapper to find it)."""
        if not self.compression:
            return self.offset
        records = self.records()
        return records[0].offset if records else self.offset

    @property
    def max_timestamp(self) -> int:
        return self.timestamp

    @property
    def record_count(self) -> int:
        return len(self.records()) if self.compression else 1

    @property
    def size_in_bytes(self) -> int:
        return len(self._data)

    def records(self) -> list[Record]:
        ts_type = self.timestamp_type
        if not self.compression:
            return [Record(self.offset, self.timestamp, ts_type, self._key, self._value, ())]
        where = f"message at offset {self.offset}"
        if self._value is None:
            raise CorruptRecordError(f"{where}: compressed wrapper has a null value")
        try:
            inner = _compression.decompress(self.compression, self._value, magic=self.magic,
                                             max_size=self._max_decompressed)
        except CorruptRecordError as exc:
            raise CorruptRecordError(f"{where}: {exc}") from exc
        messages = []
        view = memoryview(inner)
        pos, end = 0, len(view)
        while pos < end:
            size = _message_size(view, pos, end, where)
            if size is None:
                raise CorruptRecordError(f"{where}: inner message set is truncated")
            messages.append(_parse_message(view[pos:pos + size], True))
            pos += size
        if not messages:
            raise CorruptRecordError(f"{where}: compressed wrapper holds no messages")
        shift = 0
        if self.magic == 1:
            shift = self.offset - messages[-1][0]
        out = []
        lat = ts_type == LOG_APPEND_TIME
        for offset, _crc, magic, attributes, timestamp, key, value in messages:
            if attributes & CODEC_MASK:
                raise CorruptRecordError(f"{where}: nested compressed message")
            if lat:
                timestamp = self.timestamp
            itype = ts_type if magic else NO_TIMESTAMP_TYPE
            out.append(Record(offset + shift, timestamp, itype, key, value, ()))
        return out

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())


def _message_size(view: memoryview, pos: int, end: int, where: str) -> int | None:
    """Whole size of the message at ``pos`` or None if the buffer ends inside it."""
    if end - pos < LOG_OVERHEAD:
        return None
    size: int = _INT32.unpack_from(view, pos + 8)[0]
    if size < MIN_SIZE[0]:
        raise CorruptRecordError(f"{where}: message size {size} is impossible")
    if pos + LOG_OVERHEAD + size > end:
        return None
    return LOG_OVERHEAD + size


def _parse_message(data: memoryview, check_crc: bool) -> tuple[
        int, int, int, int, int, bytes | None, bytes | None]:
    """(offset, crc, magic, attributes, timestamp, key, value) of one whole message."""
    n = len(data)
    if n < LOG_OVERHEAD + MIN_SIZE[0]:
        raise CorruptRecordError(f"message of {n} bytes is too short")
    offset, size, crc, magic, attributes = _PREFIX.unpack_from(data)
    where = f"message at offset {offset}"
    if size + LOG_OVERHEAD != n:
        raise CorruptRecordError(f"{where}: size {size} does not match {n - LOG_OVERHEAD}")
    if magic not in (0, 1):
        raise CorruptRecordError(f"{where}: unknown magic {magic}")
    if size < MIN_SIZE[magic]:
        raise CorruptRecordError(f"{where}: size {size} is too small for magic {magic}")
    if check_crc and zlib.crc32(data[16:]) != crc:
        raise CorruptRecordError(f"{where}: CRC-32 mismatch")
    pos = 18
    timestamp = -1
    if magic == 1:
        (timestamp,) = _V1_TIMESTAMP.unpack_from(data, pos)
        pos += 8
    key, pos = _read_bytes(data, pos, where, "key")
    value, pos = _read_bytes(data, pos, where, "value")
    if pos != n:
        raise CorruptRecordError(f"{where}: {n - pos} bytes after the value")
    return offset, crc, magic, attributes, timestamp, key, value


def _read_bytes(data: memoryview, pos: int, where: str, what: str) -> tuple[bytes | None, int]:
    if pos + 4 > len(data):
        raise CorruptRecordError(f"{where}: {what} length is truncated")
    (length,) = _INT32.unpack_from(data, pos)
    pos += 4
    if length < 0:
        if length != -1:
            raise CorruptRecordError(f"{where}: negative {what} length {length}")
        return None, pos
    if pos + length > len(data):
        raise CorruptRecordError(f"{where}: {what} length {length} overruns the message")
    return bytes(data[pos:pos + length]), pos + length
