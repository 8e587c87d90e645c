"""The v2 records section decoder: one Python reference (for ``_accel.decode_records``,
same signature), used by ``RecordBatch``, the consumer and the share consumer;
decompression with typed errors, LogAppendTime.

``decode_records`` has the signature of ``aiokproto._accel.decode_records`` and returns
what it returns (tests/unit/records/test_decode.py and tests/unit/test_accel.py compare
the two): each record becomes ``cls(*prefix, offset, timestamp, CREATE_TIME, key, value, headers,
*suffix)``, so ``RecordBatch`` gets ``Record`` tuples and the consumer gets
``ConsumerRecord`` tuples with topic, partition and leader epoch in one allocation.
``decode_batch`` runs the whole step for one batch: decompress, the compiled decoder
when it is loaded (else the reference), LogAppendTime.
"""

from __future__ import annotations

import gc
from typing import Any, Final

from aiokproto.accel import native as _native
from aiokproto.errors import (
    CorruptRecordError,
    KafkaProtocolError,
    UnsupportedCompressionTypeError,
)
from aiokproto.protocol.varint import decode_varint, decode_varlong
from aiokproto.records import compression as _compression
from aiokproto.records.record import CREATE_TIME, LOG_APPEND_TIME, Header, Headers

#: bytes of the smallest record: length, attributes, ts, offset, key len, value len,
#: header count
MIN_RECORD: Final = 7
_CODEC_MASK: Final = 0x07
_TIMESTAMP_TYPE_MASK: Final = 0x08
# Decoded values of one-byte zig-zag varints ...
_ZZ1: Final[list[int]] = [(b >> 1) ^ -(b & 1) for b in range(128)]
# ... and of two-byte ones, indexed by (second byte << 7 | first byte & 127).
_ZZ2: Final[list[int]] = [(raw >> 1) ^ -(raw & 1) for raw in range(1 << 14)]


def records_payload(
    body: memoryview, codec: int, base_offset: int, record_count: int, max_size: int
) -> bytes:
    """The records section of a batch (``body``: its bytes after the header), decompressed.

    An unknown codec raises ``UnsupportedCompressionTypeError`` naming the codec and the
    batch (the bytes may be fine, this client cannot read them); bad compressed bytes
    raise ``CorruptRecordError``.
    """
    if not codec:
        return bytes(body)
    try:
        out = _compression.decompress(codec, body, max_size=max_size)
    except UnsupportedCompressionTypeError as exc:
        raise UnsupportedCompressionTypeError(
            f"record batch at offset {base_offset} uses compression codec {codec}, "
            "which this client does not support"
        ) from exc
    except KafkaProtocolError as exc:
        raise CorruptRecordError(f"record batch at offset {base_offset}: {exc}") from exc
    if record_count * MIN_RECORD > len(out):
        raise CorruptRecordError(
            f"record batch at offset {base_offset}: {record_count} records "
            f"cannot fit in {len(out)} decompressed bytes"
        )
    return out


def decode_batch(
    body: memoryview,
    attributes: int,
    record_count: int,
    base_offset: int,
    base_ts: int,
    max_ts: int,
    max_size: int,
    cls: type[Any],
    prefix: tuple[Any, ...],
    suffix: tuple[Any, ...],
) -> list[Any]:
    """Every record of a v2 data batch (header fields given) as ``cls`` tuples."""
    buf = records_payload(body, attributes & _CODEC_MASK, base_offset, record_count, max_size)
    out: list[Any]
    if _native is not None:
        try:
            out = _native.decode_records(buf, record_count, base_offset, base_ts, cls,
                                         prefix, suffix)
        except ValueError as exc:  # UnicodeDecodeError too
            raise CorruptRecordError(f"record batch at offset {base_offset}: {exc}") from None
    else:
        out = decode_records(buf, record_count, base_offset, base_ts, cls, prefix, suffix)
    if attributes & _TIMESTAMP_TYPE_MASK:
        # LogAppendTime: the broker's time (the batch max timestamp) for every record
        k = len(prefix) + 1
        new = tuple.__new__
        out = [new(cls, (*r[:k], max_ts, LOG_APPEND_TIME, *r[k + 2 :])) for r in out]
    return out


def _headers(buf: bytes, pos: int) -> tuple[Headers, int]:
    count, pos = decode_varint(buf, pos)
    if count < 0 or count * 2 > len(buf) - pos:
        raise CorruptRecordError(f"impossible header count {count}")
    out: list[Header] = []
    for _ in range(count):
        kl, pos = decode_varint(buf, pos)
        if kl < 0:
            raise CorruptRecordError(f"negative header key length {kl}")
        hkey = buf[pos : pos + kl].decode()
        pos += kl
        vl, pos = decode_varint(buf, pos)
        if vl < 0:
            if vl != -1:
                raise CorruptRecordError(f"negative header value length {vl}")
            out.append((hkey, None))
        else:
            out.append((hkey, buf[pos : pos + vl]))
            pos += vl
    return tuple(out), pos


def decode_records(
    buf: bytes,
    count: int,
    base_offset: int,
    base_ts: int,
    cls: type[Any],
    prefix: tuple[Any, ...],
    suffix: tuple[Any, ...],
) -> list[Any]:
    """The records section of a batch, decoded in Python: the reference for
    ``aiokproto._accel.decode_records``, and what runs without it.

    1- and 2-byte varints are decoded inline by table. Length fields are not
    range-checked one by one: every record must end exactly where its length says, and
    indexing past the buffer raises IndexError, so any inconsistency surfaces as
    CorruptRecordError without extra comparisons.
    """
    if not 0 <= count <= len(buf):  # as the compiled loop: a record takes a byte at least
        raise CorruptRecordError(f"record batch at offset {base_offset}: impossible record "
                                 f"count {count} for {len(buf)} bytes")
    out: list[Any] = []
    append = out.append
    new = tuple.__new__
    zz1 = _ZZ1
    zz2 = _ZZ2
    ct = CREATE_TIME
    # the two shapes in use get a tuple display of locals (no unpacking per record)
    shape = (len(prefix), len(suffix))
    consumer = shape == (2, 1)
    bare = shape == (0, 0)
    if consumer:
        p0, p1 = prefix
        (s0,) = suffix
    pos = 0
    i = 0
    key: bytes | None
    value: bytes | None
    headers: Headers
    # The cyclic GC would run every ~700 new records here and walk every record tuple
    # still alive (named tuples stay tracked); they cannot be garbage yet, so the loop
    # runs with the collector paused (20-25% faster) and it sees them once afterwards.
    gc_enabled = gc.isenabled()
    if gc_enabled:
        gc.disable()
    try:
        for i in range(count):
            # record length
            b = buf[pos]
            if b < 128:
                rend = pos + 1 + zz1[b]
                pos += 1
            else:
                b2 = buf[pos + 1]
                if b2 < 128:
                    rend = pos + 2 + zz2[b2 << 7 | b & 127]
                    pos += 2
                else:
                    length, pos = decode_varint(buf, pos)
                    rend = pos + length
            # attributes byte (unused), then the timestamp delta
            b = buf[pos + 1]
            if b < 128:
                td = zz1[b]
                pos += 2
            else:
                b2 = buf[pos + 2]
                if b2 < 128:
                    td = zz2[b2 << 7 | b & 127]
                    pos += 3
                else:
                    td, pos = decode_varlong(buf, pos + 1)
            # offset delta
            b = buf[pos]
            if b < 128:
                od = zz1[b]
                pos += 1
            else:
                b2 = buf[pos + 1]
                if b2 < 128:
                    od = zz2[b2 << 7 | b & 127]
                    pos += 2
                else:
                    od, pos = decode_varint(buf, pos)
            # key (null, the common case, is the one-byte varint -1)
            b = buf[pos]
            if b == 1:
                key = None
                pos += 1
            else:
                if b < 128:
                    n = zz1[b]
                    pos += 1
                else:
                    n, pos = decode_varint(buf, pos)
                if n < 0:
                    raise CorruptRecordError(f"record {i} has key length {n}")
                key = buf[pos : pos + n]
                pos += n
            # value
            b = buf[pos]
            if b == 1:
                value = None
                pos += 1
            else:
                if b < 128:
                    n = zz1[b]
                    pos += 1
                else:
                    b2 = buf[pos + 1]
                    if b2 < 128:
                        n = zz2[b2 << 7 | b & 127]
                        pos += 2
                    else:
                        n, pos = decode_varint(buf, pos)
                if n < 0:
                    raise CorruptRecordError(f"record {i} has value length {n}")
                value = buf[pos : pos + n]
                pos += n
            # headers
            if buf[pos] == 0:
                headers = ()
                pos += 1
            else:
                headers, pos = _headers(buf, pos)
            if pos != rend:
                raise CorruptRecordError(f"record {i} does not end where its length says")
            if consumer:
                append(new(cls, (p0, p1, base_offset + od, base_ts + td, ct,
                                 key, value, headers, s0)))
            elif bare:
                append(new(cls, (base_offset + od, base_ts + td, ct, key, value, headers)))
            else:
                append(new(cls, (*prefix, base_offset + od, base_ts + td, ct,
                                 key, value, headers, *suffix)))
    except CorruptRecordError as exc:
        raise CorruptRecordError(f"record batch at offset {base_offset}: {exc}") from None
    except (IndexError, KafkaProtocolError, UnicodeDecodeError) as exc:
        raise CorruptRecordError(
            f"record batch at offset {base_offset}: record {i} is truncated or malformed ({exc})"
        ) from None
    finally:
        if gc_enabled:
            gc.enable()
    if pos != len(buf):
        raise CorruptRecordError(
            f"record batch at offset {base_offset}: {len(buf) - pos} bytes left after its "
            f"{count} records"
        )
    return out
