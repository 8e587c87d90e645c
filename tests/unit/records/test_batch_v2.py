from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiokproto.errors import CorruptRecordError, IllegalStateError
from aiokproto.records import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    ControlType,
    RecordBatch,
    RecordBatchBuilder,
    compression,
    encode_end_txn_marker,
    read_batches,
)
from tests.records.strategies import RECORDS, codecs, record, timestamps

# One record, key b"k", value b"v", header ("h", b"x"), timestamp 1000, written by hand
# from the RecordBatch v2 layout.
GOLDEN = bytes.fromhex(
    "0000000000000000"  # baseOffset
    "0000003e"  # batchLength 62 = 49 header bytes after it + 13 record bytes
    "ffffffff"  # partitionLeaderEpoch
    "02"  # magic
    "85d4936f"  # crc32c(attributes..end)
    "0000"  # attributes
    "00000000"  # lastOffsetDelta
    "00000000000003e8"  # baseTimestamp
    "00000000000003e8"  # maxTimestamp
    "ffffffffffffffff"  # producerId
    "ffff"  # producerEpoch
    "ffffffff"  # baseSequence
    "00000001"  # record count
    "18"  # record length 12
    "00" "00" "00"  # attributes, timestampDelta, offsetDelta
    "02" "6b"  # key "k"
    "02" "76"  # value "v"
    "02" "02" "68" "02" "78"  # 1 header: "h" -> "x"
)


def test_golden_bytes_crc_is_castagnoli() -> None:
    assert crc32c.crc32c(GOLDEN[21:]) == 0x85D4936F


def test_build_matches_golden() -> None:
    b = RecordBatchBuilder()
    assert b.append(1000, b"k", b"v", [("h", b"x")]) == 0
    assert b.build() == GOLDEN


def test_parse_golden() -> None:
    (batch,) = read_batches(GOLDEN)
    assert isinstance(batch, RecordBatch)
    assert (batch.base_offset, batch.last_offset, batch.record_count) == (0, 0, 1)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
    assert batch.max_timestamp == 1000 and batch.compression == 0
    (r,) = batch
    assert r == (0, 1000, CREATE_TIME, b"k", b"v", (("h", b"x"),))
    assert r.offset == 0 and r.value == b"v" and r.headers == (("h", b"x"),)


@RECORDS
@given(
    st.lists(record, min_size=1, max_size=30),
    timestamps,
    codecs,
    st.integers(0, 2**40),
    st.integers(-1, 2**40),
    st.integers(-1, 32767),
    st.integers(-1, 2**31 - 1),
    st.booleans(),
)
def test_round_trip(records: list, base_ts: int, codec: int, base_offset: int,
                    pid: int, epoch: int, seq: int, txn: bool) -> None:
    b = RecordBatchBuilder(batch_size=1 << 30, compression=codec, base_offset=base_offset,
                           producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                           transactional=txn, partition_leader_epoch=7)
    for i, (dt, key, value, headers) in enumerate(records):
        assert b.append(base_ts + dt, key, value, headers) == i
    data = b.build()
    (batch,) = read_batches(data)
    assert isinstance(batch, RecordBatch)
    assert batch.base_offset == base_offset
    assert batch.last_offset == base_offset + len(records) - 1
    assert batch.record_count == len(records)
    assert batch.compression == codec
    assert batch.is_transactional is txn and batch.is_control is False
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (pid, epoch, seq)
    assert batch.partition_leader_epoch == 7
    assert batch.max_timestamp == max(base_ts + r[0] for r in records)
    got = batch.records()
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in got] == [
        (base_offset + i, base_ts + dt, k, v, tuple(h)) for i, (dt, k, v, h) in enumerate(records)
    ]


def test_batch_size_bound_and_first_record_always_fits() -> None:
    b = RecordBatchBuilder(batch_size=200)
    assert b.append(1, None, b"x" * 1000) == 0  # oversized first record fits alone
    assert b.append(1, None, b"x") is None
    assert b.record_count == 1
    b = RecordBatchBuilder(batch_size=300)
    n = 0
    while b.append(1, b"k", b"v" * 50) is not None:
        n += 1
    assert n == b.record_count and n > 1
    assert b.estimated_size <= 300
    assert len(b.build()) == b.estimated_size


@pytest.mark.parametrize("codec", [compression.NONE, compression.ZSTD])
def test_restamp_producer_state_without_reencoding(codec: int) -> None:
    b = RecordBatchBuilder(compression=codec)
    for i in range(10):
        b.append(i, None, b"%d" % i)
    first = bytes(b.build())
    payload = b._payload
    b.set_producer_state(1234, 5, 99)
    b.set_transactional(True)
    second = b.build()
    assert b._payload is payload  # not recompressed
    assert first[61:] == second[61:]
    (batch,) = read_batches(second)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (1234, 5, 99)
    assert batch.is_transactional
    assert [r.value for r in batch] == [b"%d" % i for i in range(10)]


def test_empty_build_is_an_error() -> None:
    with pytest.raises(IllegalStateError):
        RecordBatchBuilder().build()


def test_log_append_time_uses_max_timestamp() -> None:
    b = RecordBatchBuilder(log_append_time=True)
    b.append(5, None, b"a")
    b.append(9, None, b"b")
    (batch,) = read_batches(b.build())
    assert batch.timestamp_type == LOG_APPEND_TIME
    assert [(r.timestamp, r.timestamp_type) for r in batch] == [
        (9, LOG_APPEND_TIME), (9, LOG_APPEND_TIME)]


def test_negative_and_large_timestamp_deltas() -> None:
    b = RecordBatchBuilder()
    ts = [10**12, 10**12 - 5000, 10**12 + 10**9, 0]
    for t in ts:
        b.append(t, None, None)
    (batch,) = read_batches(b.build())
    assert [r.timestamp for r in batch] == ts
    assert [r.value for r in batch] == [None] * 4


def test_many_records_multi_byte_offset_deltas() -> None:
    b = RecordBatchBuilder(batch_size=1 << 24)
    for i in range(20000):
        b.append(i * 3, b"k" if i % 2 else None, b"v" * (i % 300))
    (batch,) = read_batches(b.build())
    recs = batch.records()
    assert len(recs) == 20000
    assert recs[-1].offset == 19999 and recs[-1].timestamp == 59997
    assert recs[12345].value == b"v" * (12345 % 300) and recs[12345].key == b"k"


def test_control_batch() -> None:
    b = RecordBatchBuilder(control=True, transactional=True, producer_id=7,
                           producer_epoch=1, base_offset=42)
    key, value = encode_end_txn_marker(commit=True, coordinator_epoch=3)
    b.append(1000, key, value)
    (batch,) = read_batches(b.build())
    assert batch.is_control and batch.is_transactional
    (marker,) = batch.control_records()
    assert marker.type is ControlType.COMMIT and marker.is_commit
    assert (marker.offset, marker.coordinator_epoch, marker.version) == (42, 3, 0)
    key, value = encode_end_txn_marker(commit=False, coordinator_epoch=9)
    assert key == struct.pack(">hh", 0, 0) and value == struct.pack(">hi", 0, 9)


def test_control_records_on_data_batch_is_an_error() -> None:
    (batch,) = read_batches(GOLDEN)
    with pytest.raises(IllegalStateError):
        batch.control_records()


def test_malformed_control_record() -> None:
    b = RecordBatchBuilder(control=True)
    b.append(1, b"\x00", None)
    (batch,) = read_batches(b.build())
    with pytest.raises(CorruptRecordError):
        batch.control_records()


def test_delete_horizon_attribute() -> None:
    data = bytearray(GOLDEN)
    data[22] |= 0x40
    (batch,) = read_batches(data, check_crc=False)
    assert batch.has_delete_horizon and batch.delete_horizon_ms == 1000


def test_bad_crc_and_disabled_check() -> None:
    data = bytearray(GOLDEN)
    data[-1] ^= 1
    with pytest.raises(CorruptRecordError, match=r"offset 0.*CRC"):
        list(read_batches(data))
    (batch,) = read_batches(data, check_crc=False)
    assert batch.records()[0].headers == (("h", b"y"),)


def test_record_count_larger_than_bytes() -> None:
    data = bytearray(GOLDEN)
    struct.pack_into(">i", data, 57, 1000)
    with pytest.raises(CorruptRecordError, match="cannot fit"):
        list(read_batches(data, check_crc=False))
    b = RecordBatchBuilder(base_offset=5)
    for _ in range(3):
        b.append(1, None, b"abc")
    for count in (2, 4):  # bytes left over / records missing
        data = bytearray(b.build())
        struct.pack_into(">i", data, 57, count)
        (batch,) = read_batches(data, check_crc=False)
        with pytest.raises(CorruptRecordError, match="offset 5"):
            batch.records()


def test_compressed_record_count_mismatch() -> None:
    b = RecordBatchBuilder(compression=compression.GZIP)
    b.append(1, None, b"x")
    data = bytearray(b.build())
    struct.pack_into(">i", data, 57, 50)
    (batch,) = read_batches(data, check_crc=False)
    with pytest.raises(CorruptRecordError):
        batch.records()


def test_batch_decompression_bound() -> None:
    b = RecordBatchBuilder(compression=compression.ZSTD, batch_size=1 << 30)
    b.append(1, None, bytes(5_000_000))
    data = b.build()
    assert len(data) < 10_000
    (batch,) = read_batches(data, max_decompressed_size=1_000_000)
    with pytest.raises(CorruptRecordError, match=r"offset 0.*more than"):
        batch.records()


def test_parse_at_position_and_public_names() -> None:
    import aiokproto.records as records

    buf = b"\x00" * 5 + GOLDEN + b"junk"
    batch = RecordBatch.parse(buf, 5)
    assert batch.next_offset == 1 and batch.size_in_bytes == len(GOLDEN)
    with pytest.raises(CorruptRecordError):
        RecordBatch.parse(buf[:40], 5)
    for name in records.__all__:
        assert hasattr(records, name)


def test_varint_edges_in_records() -> None:
    b = RecordBatchBuilder(batch_size=1 << 24)
    sizes = [0, 63, 64, 8191, 8192, 4095, 4096, 70000]
    for s in sizes:
        b.append(2**40, b"k" * s, b"v" * s, [("h" * s, b"x" * s)])
    (batch,) = read_batches(b.build())
    assert [(len(r.key), len(r.value), len(r.headers[0][0])) for r in batch] == [
        (s, s, s) for s in sizes]
