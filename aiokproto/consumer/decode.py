"""The consumer's record decoder: one fetched batch straight into ``ConsumerRecord`` tuples.

``aiokproto.records`` decodes a batch into ``Record`` tuples; the consumer would then
build a second tuple per record to add topic, partition and leader epoch. This module
decodes v2 records directly into the final tuple (one allocation per record) with the
topic, partition and epoch bound as locals. Legacy (v0/v1) batches are rare and go
through ``aiokproto.records`` and a conversion.

Equality with ``aiokproto.records.read_batches`` output is tested with Hypothesis.
"""

from __future__ import annotations

import gc
from typing import Final

from aiokproto.accel import native as _native
from aiokproto.consumer.record import ConsumerRecord
from aiokproto.errors import CorruptRecordError, KafkaProtocolError
from aiokproto.protocol.varint import decode_varint, decode_varlong
from aiokproto.records import compression as _compression
from aiokproto.records.batch_v2 import (
    CODEC_MASK,
    HEADER_SIZE,
    TIMESTAMP_TYPE_MASK,
    RecordBatch,
)
from aiokproto.records.legacy import LegacyBatch
from aiokproto.records.record import CREATE_TIME, LOG_APPEND_TIME, Header, Headers

_MIN_RECORD: Final = 7
# zig-zag value of a one-byte varint, and of a two-byte one indexed by (b2 << 7 | b1 & 127)
_ZZ1: Final[list[int]] = [(b >> 1) ^ -(b & 1) for b in range(128)]
_ZZ2: Final[list[int]] = [(raw >> 1) ^ -(raw & 1) for raw in range(1 << 14)]


def batch_payload(batch: RecordBatch, raw: memoryview, max_decompressed: int) -> bytes:
    """The records section of ``batch`` (whose bytes are ``raw``), decompressed."""
    body = raw[HEADER_SIZE:]
    codec = batch.attributes & CODEC_MASK
    if not codec:
        return bytes(body)
    try:
        out = _compression.decompress(codec, body, max_size=max_decompressed)
    except KafkaProtocolError as exc:
        raise CorruptRecordError(f"record batch at offset {batch.base_offset}: {exc}") from exc
    if batch.record_count * _MIN_RECORD > len(out):
        raise CorruptRecordError(
            f"record batch at offset {batch.base_offset}: {batch.record_count} records "
            f"cannot fit in {len(out)} decompressed bytes"
        )
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


def decode_v2(
    batch: RecordBatch,
    raw: memoryview,
    topic: str,
    partition: int,
    *,
    max_decompressed: int = _compression.DEFAULT_MAX_DECOMPRESSED,
) -> list[ConsumerRecord]:
    """Every record of a v2 data batch as ``ConsumerRecord`` (CorruptRecordError if bad)."""
    buf = batch_payload(batch, raw, max_decompressed)
    base_offset = batch.base_offset
    epoch = batch.partition_leader_epoch
    if _native is not None:
        try:
            out: list[ConsumerRecord] = _native.decode_records(
                buf,
                batch.record_count,
                base_offset,
                batch.base_timestamp,
                ConsumerRecord,
                (topic, partition),
                (epoch,),
            )
        except ValueError as exc:  # UnicodeDecodeError too
            raise CorruptRecordError(f"record batch at offset {base_offset}: {exc}") from None
    else:
        out = decode_v2_python(
            buf, batch.record_count, base_offset, batch.base_timestamp, topic, partition, epoch
        )
    if batch.attributes & TIMESTAMP_TYPE_MASK:
        # LogAppendTime: the broker's time (the batch max timestamp) for every record
        ts = batch.max_timestamp
        new = tuple.__new__
        out = [new(ConsumerRecord, (*r[:3], ts, LOG_APPEND_TIME, *r[5:])) for r in out]
    return out


def decode_v2_python(
    buf: bytes,
    count: int,
    base_offset: int,
    base_ts: int,
    topic: str,
    partition: int,
    epoch: int,
) -> list[ConsumerRecord]:
    """The records section of a batch, decoded in Python: the reference for
    ``aiokproto._accel.decode_records``, and what runs without it."""
    out: list[ConsumerRecord] = []
    append = out.append
    new = tuple.__new__
    cls = ConsumerRecord
    zz1 = _ZZ1
    zz2 = _ZZ2
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
            # key
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
            append(
                new(
                    cls,
                    (
                        topic,
                        partition,
                        base_offset + od,
                        base_ts + td,
                        CREATE_TIME,
                        key,
                        value,
                        headers,
                        epoch,
                    ),
                )
            )
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


def decode_legacy(batch: LegacyBatch, topic: str, partition: int) -> list[ConsumerRecord]:
    """Records of a MessageSet v0/v1 entry (or compressed wrapper)."""
    new = tuple.__new__
    cls = ConsumerRecord
    return [new(cls, (topic, partition, *r, -1)) for r in batch]
