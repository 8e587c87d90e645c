"""RecordBatch v2 (magic 2): the producer's builder (``RecordBatchBuilder``) and the
consumer's lazily parsed batch (``RecordBatch``).

Layout (big-endian; the CRC-32C covers attributes..end)::

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8
    crc uint32 | attributes int16 | lastOffsetDelta int32 | baseTimestamp int64
    maxTimestamp int64 | producerId int64 | producerEpoch int16 | baseSequence int32
    recordCount int32 | records...

    record: length varint | attributes int8 | timestampDelta varlong
            offsetDelta varint | keyLength varint | key | valueLength varint | value
            headerCount varint | (headerKeyLength varint | key utf-8 |
                                  headerValueLength varint | value)*
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Final

from aiokproto.accel import native as _native
from aiokproto.errors import (
    CorruptRecordError,
    IllegalStateError,
    UnsupportedCompressionTypeError,
)
from aiokproto.protocol.varint import (
    encode_varint,
    encode_varlong,
)
from aiokproto.records import compression as _compression
from aiokproto.records.control import ControlRecord, decode_control_record
from aiokproto.records.crc import crc32c
from aiokproto.records.decode import MIN_RECORD, decode_batch
from aiokproto.records.record import CREATE_TIME, LOG_APPEND_TIME, Header, Record

MAGIC: Final = 2
HEADER: Final = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE: Final = HEADER.size  # 61
#: bytes counted by batchLength start after baseOffset and batchLength
LOG_OVERHEAD: Final = 12
_CRC_START: Final = 21  # attributes..end
_CRC = struct.Struct(">I")
_MAX_OFFSET: Final = 2**63 - 1

CODEC_MASK: Final = 0x07
TIMESTAMP_TYPE_MASK: Final = 0x08
TRANSACTIONAL_MASK: Final = 0x10
CONTROL_MASK: Final = 0x20
DELETE_HORIZON_MASK: Final = 0x40

NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
NO_SEQUENCE: Final = -1
NO_PARTITION_LEADER_EPOCH: Final = -1

# Zig-zag varint bytes for 0..N-1, the common values of lengths and deltas.
_TABLE_SIZE: Final = 1 << 12
_VARINT: Final[list[bytes]] = [encode_varint(i) for i in range(_TABLE_SIZE)]
_NULL_LENGTH: Final = b"\x01"  # varint(-1)
_NO_HEADERS: Final = b"\x00"


#: a batch holds at most this many records (recordCount and lastOffsetDelta are int32)
_MAX_COUNT: Final = 2**31 - 1


def _bytes_of(obj: object, what: str) -> bytes:
    """A key or value (or header value) that is neither bytes nor bytearray, as its
    bytes: any C-contiguous buffer counts as its bytes (``memoryview.nbytes``: an
    ``array('I')`` or a ``memoryview.cast('I')`` is 4 bytes an item, not 1), as the
    compiled ``append`` reads it with ``PyObject_GetBuffer``; anything else is a
    TypeError. (Review: ``len()`` counted items, and wrote a corrupt batch.)"""
    try:
        view = memoryview(obj)  # type: ignore[arg-type]
    except TypeError:
        view = None
    if view is None or not view.c_contiguous:
        raise TypeError(f"record {what} must be bytes, a contiguous bytes-like object "
                        f"or None, not {type(obj).__name__}")
    with view:
        return view.tobytes()


def _check_count(n: int) -> None:
    """Refuse a record count no batch holds (the field is writable): the same
    IllegalStateError as the compiled builder's."""
    if not 0 <= n <= _MAX_COUNT:
        raise IllegalStateError(f"record batch builder holds an impossible record count "
                                f"{n} (a batch holds 0 to 2**31-1 records)")


def _encode_headers(headers: Sequence[Header]) -> bytes:
    table = _VARINT
    parts = [encode_varint(len(headers))]
    for hkey, hvalue in headers:
        if not isinstance(hkey, str):
            raise TypeError(f"header key must be a str, not {type(hkey).__name__}")
        kb = hkey.encode()
        parts.append(table[len(kb)] if len(kb) < _TABLE_SIZE else encode_varint(len(kb)))
        parts.append(kb)
        if hvalue is None:
            parts.append(_NULL_LENGTH)
        else:
            if not isinstance(hvalue, (bytes, bytearray)):
                hvalue = _bytes_of(hvalue, "header value")
            n = len(hvalue)
            parts.append(table[n] if n < _TABLE_SIZE else encode_varint(n))
            parts.append(hvalue)
    return b"".join(parts)


# what append() changes: C members when compiled, these slots in Python
_APPEND_STATE: Final = ("_base_ts", "_buf", "_count", "_limit", "_max_ts", "_payload")

if TYPE_CHECKING or _native is None:

    class _AppendState:
        """What ``RecordBatchBuilder.append`` changes: compiled, the C type
        ``aiokproto._accel.RecordsBuilder`` (whose ``append`` is one C call) holds it."""

        __slots__ = _APPEND_STATE
        _buf: bytearray
        _payload: bytes | None  # compressed records, kept for rebuilds
        _count: int
        _base_ts: int
        _max_ts: int
        _limit: int

else:
    _AppendState = _native.RecordsBuilder


class RecordBatchBuilder(_AppendState):
    """Builds one v2 batch for one partition, record by record.

    Records are encoded as they are appended; the 61-byte header (and compression) is
    done by ``build()``. The encoded (and compressed) records are kept, so after an
    epoch bump the idempotent producer can call ``set_producer_state()`` and
    ``build()`` again for the cost of a CRC, without re-encoding records.

    ``batch_size`` bounds ``estimated_size`` (uncompressed bytes, header included; an
    upper bound for compressed batches). The first record always fits: one oversized
    record gets a batch of its own, and the producer decides whether it is too large.
    """

    __slots__ = (
        "_base_offset",
        "_base_sequence",
        "_codec",
        "_control",
        "_level",
        "_log_append_time",
        "_partition_leader_epoch",
        "_producer_epoch",
        "_producer_id",
        "_transactional",
    )

    def __init__(
        self,
        *,
        batch_size: int = 16384,
        compression: int = _compression.NONE,
        compression_level: int | None = None,
        base_offset: int = 0,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        transactional: bool = False,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
        control: bool = False,
        log_append_time: bool = False,
    ) -> None:
        if compression not in _compression.CODEC_NAMES:
            raise UnsupportedCompressionTypeError(
                f"unknown compression codec id {compression}"
            )
        self._codec = compression
        self._level = compression_level
        self._limit = batch_size
        self._base_offset = base_offset
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._transactional = transactional
        self._partition_leader_epoch = partition_leader_epoch
        self._control = control  # brokers write control batches; tests need them too
        self._log_append_time = log_append_time
        # header space up front: an uncompressed batch is built in place, no copy
        self._buf = bytearray(HEADER_SIZE)
        self._count = 0
        self._base_ts = 0
        self._max_ts = -1
        self._payload = None

    def append_many(
        self,
        timestamp_ms: int,
        keys: Sequence[bytes | None] | None,
        values: Sequence[bytes | None],
        start: int,
        stop: int,
        headers: Sequence[Header] | None = None,
    ) -> int:
        """Append ``values[start:stop]`` (with ``keys[i]``; all with the same timestamp
        and headers) while they fit; return how many went in. Their offset deltas are
        ``record_count`` (before the call) onwards.

        Keys and values are bytes, bytearray or None. All or what fitted: a record
        refused midway (a TypeError) takes back the records of the call."""
        if start < 0 or stop > len(values) or (keys is not None and stop > len(keys)):
            raise IndexError(f"append_many: range {start}:{stop} outside the lists")
        if stop <= start:
            return 0
        if timestamp_ms.__class__ is not int and not isinstance(timestamp_ms, int):
            raise TypeError(f"record timestamp must be an int, not "
                            f"{type(timestamp_ms).__name__}")
        n = self._count
        _check_count(n)
        if not -_MAX_OFFSET - 1 <= timestamp_ms <= _MAX_OFFSET:
            # as append: a batch of its own, which refuses it
            if n:
                return 0
            raise OverflowError("record timestamp outside the int64 range")
        if _native is None:
            return self._append_many_python(timestamp_ms, keys, values, start, stop, headers)
        if values.__class__ is not list:
            values = list(values)
        if keys is not None and keys.__class__ is not list:
            keys = list(keys)
        # the builder's fields change only once the records are in
        done: int = _native.append_records(
            self._buf, n, timestamp_ms - self._base_ts if n else 0, keys, values, start,
            stop, _encode_headers(headers) if headers else None, self._limit,
        )
        if done:
            self._count = n + done
            if not n:
                self._base_ts = self._max_ts = timestamp_ms
            elif timestamp_ms > self._max_ts:
                self._max_ts = timestamp_ms
            self._payload = None
        return done

    def _append_many_python(
        self,
        timestamp_ms: int,
        keys: Sequence[bytes | None] | None,
        values: Sequence[bytes | None],
        start: int,
        stop: int,
        headers: Sequence[Header] | None,
    ) -> int:
        """``append_many`` record by record: the reference for
        ``aiokproto._accel.append_records``, with the same types taken and the same
        roll back of a call refused midway."""
        if headers:
            _encode_headers(headers)  # bad headers refused first, as the compiled path
        n = self._count
        if n == _MAX_COUNT or (n and not -_MAX_OFFSET - 1 <= timestamp_ms - self._base_ts
                               <= _MAX_OFFSET):
            # as the compiled loop, before any record's types are looked at: the records
            # start a batch of their own (no offset delta left, or no varlong holds the
            # timestamp delta)
            return 0
        buf = self._buf
        size = len(buf)
        state = (self._count, self._base_ts, self._max_ts, self._payload)
        try:
            for i in range(start, stop):
                key = None if keys is None else keys[i]
                value = values[i]
                # what the compiled loop reads in place, without running Python code
                if key is not None and key.__class__ is not bytes and \
                        not isinstance(key, (bytes, bytearray)):
                    raise TypeError(f"record key must be bytes, bytearray or None, not "
                                    f"{type(key).__name__}")
                if value is not None and value.__class__ is not bytes and \
                        not isinstance(value, (bytes, bytearray)):
                    raise TypeError(f"record value must be bytes, bytearray or None, not "
                                    f"{type(value).__name__}")
                if self._append_python(timestamp_ms, key, value, headers) is None:
                    return i - start
        except BaseException:
            if self._buf is buf:
                del buf[size:]
            self._count, self._base_ts, self._max_ts, self._payload = state
            raise
        return stop - start

    def _append_python(
        self,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] | None = None,
    ) -> int | None:
        """``append`` in Python: the reference for ``aiokproto._accel.RecordsBuilder``'s:
        the record's offset delta, or None if the batch is full."""
        if timestamp_ms.__class__ is not int and not isinstance(timestamp_ms, int):
            # not a float (struct.error at build) nor an __index__ object, as in C
            raise TypeError(f"record timestamp must be an int, not "
                            f"{type(timestamp_ms).__name__}")
        if not -_MAX_OFFSET - 1 <= timestamp_ms <= _MAX_OFFSET:
            # the batch header holds int64 timestamps: a batch of its own, which refuses it
            if self._count:
                return None
            raise OverflowError("record timestamp outside the int64 range")
        # before the fields are read: encoding runs the headers' code, which may append,
        # and so may a key's or value's buffer export (3.12+ __buffer__) in _bytes_of
        hb = _encode_headers(headers) if headers else _NO_HEADERS
        table = _VARINT
        if key is None:
            kb = _NULL_LENGTH
            key = b""
        else:
            if key.__class__ is not bytes and not isinstance(key, bytearray):
                key = _bytes_of(key, "key")
            kl = len(key)
            kb = table[kl] if kl < _TABLE_SIZE else encode_varint(kl)
        if value is None:
            vb = _NULL_LENGTH
            value = b""
        else:
            if value.__class__ is not bytes and not isinstance(value, bytearray):
                value = _bytes_of(value, "value")
            vl = len(value)
            vb = table[vl] if vl < _TABLE_SIZE else encode_varint(vl)
        n = self._count
        if n:
            if not 0 < n < _MAX_COUNT:
                if n == _MAX_COUNT:
                    return None  # full: no int32 offset delta left
                _check_count(n)
            td = timestamp_ms - self._base_ts
            if 0 <= td < _TABLE_SIZE:
                tdb = table[td]
            elif -_MAX_OFFSET - 1 <= td <= _MAX_OFFSET:
                tdb = encode_varlong(td)
            else:  # no varlong holds it: the record starts a batch of its own
                return None
            odb = table[n] if n < _TABLE_SIZE else encode_varint(n)
        else:
            tdb = odb = b"\x00"
        rec = b"".join((b"\x00", tdb, odb, kb, key, vb, value, hb))
        rl = len(rec)
        lb = table[rl] if rl < _TABLE_SIZE else encode_varint(rl)
        buf = self._buf
        if n and len(buf) + len(lb) + rl > self._limit:
            return None
        buf += lb
        buf += rec
        self._count = n + 1
        if not n:
            self._base_ts = self._max_ts = timestamp_ms
        elif timestamp_ms > self._max_ts:
            self._max_ts = timestamp_ms
        self._payload = None
        return n

    if _native is None:
        append = _append_python
    else:
        # RecordsBuilder.append calls this for records with headers
        _encode_headers = staticmethod(_encode_headers)

    def __getstate__(self) -> tuple[None, dict[str, object]]:
        # compiled, the appended state is in C members object's default copy/pickle
        # cannot read: the state names every field, as Python's __slots__ state does
        names = (*_APPEND_STATE, *RecordBatchBuilder.__slots__)
        return None, {name: getattr(self, name) for name in names if hasattr(self, name)}

    @property
    def record_count(self) -> int:
        return self._count

    @property
    def estimated_size(self) -> int:
        """Batch size in bytes if built uncompressed (an upper bound if compressed)."""
        return len(self._buf)

    @property
    def batch_size(self) -> int:
        return self._limit

    @property
    def compression(self) -> int:
        return self._codec

    @property
    def producer_id(self) -> int:
        return self._producer_id

    @property
    def producer_epoch(self) -> int:
        return self._producer_epoch

    @property
    def base_sequence(self) -> int:
        return self._base_sequence

    @property
    def is_transactional(self) -> bool:
        return self._transactional

    @property
    def max_timestamp(self) -> int:
        return self._max_ts

    def set_producer_state(self, producer_id: int, producer_epoch: int,
                           base_sequence: int) -> None:
        """Stamp idempotence fields (cheap: only the header changes)."""
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence

    def set_transactional(self, transactional: bool) -> None:
        self._transactional = transactional

    def set_base_offset(self, base_offset: int) -> None:
        self._base_offset = base_offset

    def _attributes(self) -> int:
        attrs = self._codec
        if self._log_append_time:
            attrs |= TIMESTAMP_TYPE_MASK
        if self._transactional:
            attrs |= TRANSACTIONAL_MASK
        if self._control:
            attrs |= CONTROL_MASK
        return attrs

    def build(self) -> bytes | bytearray:
        """The complete batch, compressed as configured. May be called again after
        ``set_producer_state()``; records are neither re-encoded nor re-compressed.

        An uncompressed batch is returned as the builder's own buffer (no copy): it
        reflects later ``set_*()``/``build()`` calls, so build again only once the
        previous result is no longer in use (e.g. when re-sending after an epoch bump).
        """
        n = self._count
        if not n:
            raise IllegalStateError("cannot build a record batch with no records")
        out: bytearray
        if self._codec:
            payload = self._payload
            if payload is None:
                payload = _compression.compress(
                    self._codec, memoryview(self._buf)[HEADER_SIZE:], self._level
                )
                self._payload = payload
            out = bytearray(HEADER_SIZE)
            out += payload
        else:
            out = self._buf
        HEADER.pack_into(
            out,
            0,
            self._base_offset,
            len(out) - LOG_OVERHEAD,
            self._partition_leader_epoch,
            MAGIC,
            0,
            self._attributes(),
            n - 1,
            self._base_ts,
            self._max_ts,
            self._producer_id,
            self._producer_epoch,
            self._base_sequence,
            n,
        )
        with memoryview(out) as view:
            _CRC.pack_into(out, _CRC_START - 4, crc32c(view[_CRC_START:]))
        return out


# -- parsing ----------------------------------------------------------------------------


class RecordBatch:
    """A parsed v2 batch: header fields decoded, records decoded only on iteration.

    Construct with ``RecordBatch.parse(buffer, pos)`` or get them from
    ``aiokproto.records.read_batches``.
    """

    __slots__ = (
        "_data",
        "_max_decompressed",
        "attributes",
        "base_offset",
        "base_sequence",
        "base_timestamp",
        "batch_length",
        "crc",
        "last_offset_delta",
        "max_timestamp",
        "partition_leader_epoch",
        "producer_epoch",
        "producer_id",
        "record_count",
    )

    magic: Final = MAGIC

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    def __init__(self, data: memoryview, *, check_crc: bool = True,
                 max_decompressed_size: int = _compression.DEFAULT_MAX_DECOMPRESSED) -> None:
        """``data`` is exactly one whole batch (see ``parse`` for a larger buffer)."""
        if len(data) < HEADER_SIZE:
            raise CorruptRecordError(f"record batch of {len(data)} bytes is shorter than "
                                     f"the {HEADER_SIZE}-byte v2 header")
        (
            self.base_offset,
            self.batch_length,
            self.partition_leader_epoch,
            magic,
            self.crc,
            self.attributes,
            self.last_offset_delta,
            self.base_timestamp,
            self.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self.record_count,
        ) = HEADER.unpack_from(data)
        self._data = data
        self._max_decompressed = max_decompressed_size
        if magic != MAGIC:
            raise self._corrupt(f"magic {magic} is not 2")
        if self.batch_length + LOG_OVERHEAD != len(data):
            raise self._corrupt(f"batch length {self.batch_length} does not match the "
                                f"{len(data) - LOG_OVERHEAD} bytes given")
        if self.record_count < 0:
            raise self._corrupt(f"negative record count {self.record_count}")
        # Offsets are int64 and a fetch continues at next_offset: a batch whose last
        # offset is negative or leaves no next offset cannot come from a broker.
        if self.base_offset < 0 or self.last_offset_delta < 0 or \
                self.base_offset + self.last_offset_delta >= _MAX_OFFSET:
            raise self._corrupt(f"impossible offsets: base {self.base_offset}, last offset "
                                f"delta {self.last_offset_delta}")
        if self.record_count * MIN_RECORD > max(len(data) - HEADER_SIZE, 0) and \
                not self.attributes & CODEC_MASK:
            raise self._corrupt(f"{self.record_count} records cannot fit in "
                                f"{len(data) - HEADER_SIZE} bytes")
        if check_crc and not self.validate_crc():
            raise self._corrupt(f"CRC-32C mismatch: batch says {self.crc:#010x}, bytes "
                                f"give {self.computed_crc():#010x}")

    @classmethod
    def parse(cls, buf: bytes | bytearray | memoryview, pos: int = 0, *,
              check_crc: bool = True) -> RecordBatch:
        """Parse the batch starting at ``pos`` of ``buf`` (must be complete)."""
        view = memoryview(buf)
        if len(view) - pos < LOG_OVERHEAD:
            raise CorruptRecordError(f"record batch at byte {pos} is truncated")
        length = int.from_bytes(view[pos + 8:pos + 12], "big", signed=True)
        if length < HEADER_SIZE - LOG_OVERHEAD or pos + LOG_OVERHEAD + length > len(view):
            raise CorruptRecordError(f"record batch at byte {pos} has bad length {length}")
        return cls(view[pos:pos + LOG_OVERHEAD + length], check_crc=check_crc)

    def _corrupt(self, what: str) -> CorruptRecordError:
        return CorruptRecordError(f"record batch at offset {self.base_offset}: {what}")

    def __repr__(self) -> str:
        return (f"RecordBatch(base_offset={self.base_offset}, "
                f"last_offset={self.last_offset}, records={self.record_count}, "
                f"compression={self.compression}, transactional={self.is_transactional}, "
                f"control={self.is_control})")

    # header-derived properties

    @property
    def compression(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def timestamp_type(self) -> int:
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        """With the delete-horizon bit, compaction stored the horizon as base timestamp."""
        return self.base_timestamp if self.attributes & DELETE_HORIZON_MASK else None

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def size_in_bytes(self) -> int:
        return len(self._data)

    def computed_crc(self) -> int:
        return crc32c(self._data[_CRC_START:])

    def validate_crc(self) -> bool:
        return self.computed_crc() == self.crc

    # records

    def records(self) -> list[Record]:
        """Decode (and decompress) all records; raises CorruptRecordError if malformed."""
        return decode_batch(self._data[HEADER_SIZE:], self.attributes, self.record_count,
                            self.base_offset, self.base_timestamp, self.max_timestamp,
                            self._max_decompressed, Record, (), ())

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())

    def __len__(self) -> int:
        return self.record_count

    def control_records(self) -> list[ControlRecord]:
        """Decode the records of a control batch as commit/abort markers."""
        if not self.attributes & CONTROL_MASK:
            raise IllegalStateError(f"record batch at offset {self.base_offset} is not a "
                                    "control batch")
        return [decode_control_record(r.offset, r.timestamp, r.key, r.value)
                for r in self.records()]
