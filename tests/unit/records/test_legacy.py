from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiokproto.errors import CorruptRecordError, KafkaConfigError
from aiokproto.records import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    NO_TIMESTAMP_TYPE,
    LegacyBatch,
    LegacyMessageSetBuilder,
    compression,
    read_batches,
)
from tests.records.strategies import RECORDS, legacy_codecs, maybe_bytes

# v0: offset 0, null key, value "abc" -- by hand from the MessageSet layout
GOLDEN_V0 = bytes.fromhex(
    "0000000000000000" "00000011"  # offset, message size 17
    "43dc3faf"  # crc32(magic..end)
    "00" "00"  # magic 0, attributes
    "ffffffff"  # key: null
    "00000003" "616263"  # value "abc"
)
# v1: offset 7, timestamp 2000, key "k", value "v"
GOLDEN_V1 = bytes.fromhex(
    "0000000000000007" "00000018"  # offset 7, size 24
    "754cb09a"
    "01" "00" "00000000000007d0"  # magic 1, attributes, timestamp 2000
    "00000001" "6b" "00000001" "76"
)


def test_golden_crcs() -> None:
    assert zlib.crc32(GOLDEN_V0[16:]) == 0x43DC3FAF
    assert zlib.crc32(GOLDEN_V1[16:]) == 0x754CB09A


def test_golden_v0() -> None:
    b = LegacyMessageSetBuilder(0)
    b.append(123, None, b"abc")
    assert b.build() == GOLDEN_V0
    (batch,) = read_batches(GOLDEN_V0)
    assert isinstance(batch, LegacyBatch) and batch.magic == 0
    assert list(batch) == [(0, -1, NO_TIMESTAMP_TYPE, None, b"abc", ())]


def test_golden_v1() -> None:
    b = LegacyMessageSetBuilder(1, base_offset=7)
    b.append(2000, b"k", b"v")
    assert b.build() == GOLDEN_V1
    (batch,) = read_batches(GOLDEN_V1)
    (r,) = batch
    assert (r.offset, r.timestamp, r.timestamp_type, r.key, r.value, r.headers) == (
        7, 2000, CREATE_TIME, b"k", b"v", ())


@RECORDS
@given(st.sampled_from([0, 1]), legacy_codecs, st.integers(0, 2**40),
       st.lists(st.tuples(st.integers(0, 2**41), maybe_bytes, maybe_bytes),
                min_size=1, max_size=20))
def test_round_trip(magic: int, codec: int, base: int, msgs: list) -> None:
    b = LegacyMessageSetBuilder(magic, compression=codec, base_offset=base,
                                batch_size=1 << 30)
    for ts, k, v in msgs:
        b.append(ts, k, v)
    batches = list(read_batches(b.build()))
    assert len(batches) == (1 if codec else len(msgs))
    got = [r for batch in batches for r in batch]
    assert [r.offset for r in got] == [base + i for i in range(len(msgs))]
    assert [(r.key, r.value) for r in got] == [(k, v) for _, k, v in msgs]
    want_ts = [ts if magic else -1 for ts, _, _ in msgs]
    assert [r.timestamp for r in got] == want_ts
    assert batches[-1].last_offset == base + len(msgs) - 1
    assert batches[0].base_offset == base


def test_v1_relative_inner_offsets_use_wrapper_last_offset() -> None:
    # a compacted wrapper: inner relative offsets 0, 2, 5; wrapper says last is 105
    from aiokproto.records.legacy import _encode_message
    inner = b"".join(_encode_message(rel, 1, 0, 10 + rel, None, b"%d" % rel)
                     for rel in (0, 2, 5))
    wrapper = _encode_message(105, 1, compression.GZIP, 99,
                              None, compression.compress(compression.GZIP, inner))
    (batch,) = read_batches(wrapper)
    assert [r.offset for r in batch] == [100, 102, 105]
    assert [r.timestamp for r in batch] == [10, 12, 15]
    assert batch.base_offset == 100 and batch.last_offset == 105


def test_v1_log_append_time_wrapper_overrides_inner_timestamps() -> None:
    b = LegacyMessageSetBuilder(1, compression=compression.SNAPPY, log_append_time=True)
    b.append(1, None, b"a")
    b.append(2, None, b"b")
    (batch,) = read_batches(b.build())
    assert batch.timestamp_type == LOG_APPEND_TIME
    assert [(r.timestamp, r.timestamp_type) for r in batch] == [
        (2, LOG_APPEND_TIME), (2, LOG_APPEND_TIME)]


def test_v0_lz4_wrapper_uses_broken_checksum_and_parses() -> None:
    b = LegacyMessageSetBuilder(0, compression=compression.LZ4)
    b.append(0, b"k", b"v" * 100)
    data = b.build()
    (batch,) = read_batches(data)
    assert [r.value for r in batch] == [b"v" * 100]


def test_headers_need_v2() -> None:
    with pytest.raises(KafkaConfigError):
        LegacyMessageSetBuilder(1).append(0, None, b"x", [("h", b"v")])


def test_bad_crc() -> None:
    data = bytearray(GOLDEN_V1)
    data[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match=r"offset 7.*CRC"):
        list(read_batches(data))
    (batch,) = read_batches(data, check_crc=False)
    assert batch.records()[0].value == bytes([0x76 ^ 0xFF])


def test_nested_compression_is_corrupt() -> None:
    b = LegacyMessageSetBuilder(1, compression=compression.GZIP)
    b.append(0, None, b"x")
    inner_wrapper = b.build()
    from aiokproto.records.legacy import _encode_message
    outer = _encode_message(0, 1, compression.GZIP, 0, None,
                            compression.compress(compression.GZIP, inner_wrapper))
    (batch,) = read_batches(outer)
    with pytest.raises(CorruptRecordError, match="nested"):
        batch.records()


def test_bad_key_length() -> None:
    data = bytearray(GOLDEN_V1)
    struct.pack_into(">i", data, 26, 1000)
    with pytest.raises(CorruptRecordError, match="key length"):
        list(read_batches(data, check_crc=False))
