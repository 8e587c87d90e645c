from __future__ import annotations

import os
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiokproto.errors import CorruptRecordError, UnsupportedCompressionTypeError
from aiokproto.records import (
    LegacyMessageSetBuilder,
    RecordBatchBuilder,
    compression,
    read_batches,
)
from tests.records.strategies import RECORDS


def _v2(base: int, n: int, codec: int = 0) -> bytes:
    b = RecordBatchBuilder(base_offset=base, compression=codec)
    for i in range(n):
        b.append(1000 + i, b"k%d" % i, b"value-%d" % i, [("h", b"%d" % i)] if i % 2 else [])
    return b.build()


def _multi() -> tuple[bytes, list[int]]:
    parts = [_v2(0, 3), _v2(3, 5, compression.LZ4), _v2(8, 1), _v2(9, 4, compression.GZIP)]
    legacy = LegacyMessageSetBuilder(1, base_offset=13)
    legacy.append(5, None, b"old")
    parts.append(legacy.build())
    ends = []
    pos = 0
    for p in parts:
        pos += len(p)
        ends.append(pos)
    return b"".join(parts), ends


def test_mixed_batches() -> None:
    data, _ = _multi()
    reader = read_batches(data)
    batches = list(reader)
    assert [b.magic for b in batches] == [2, 2, 2, 2, 1]
    assert [r.offset for b in batches for r in b] == list(range(14))
    assert reader.consumed == len(data) and reader.partial_bytes == 0
    assert not reader.truncated


def test_cut_at_every_byte() -> None:
    data, ends = _multi()
    for cut in range(len(data) + 1):
        reader = read_batches(memoryview(data)[:cut])
        batches = list(reader)
        whole = [e for e in ends if e <= cut]
        assert len(batches) == len(whole)
        assert reader.consumed == (whole[-1] if whole else 0)
        assert reader.partial_bytes == cut - reader.consumed
        assert reader.truncated == (reader.partial_bytes > 0)
        for b in batches:
            b.records()


def test_unknown_magic_and_bad_length() -> None:
    data = bytearray(_v2(0, 1))
    data[16] = 3
    with pytest.raises(CorruptRecordError, match="magic 3"):
        list(read_batches(data))
    data = bytearray(_v2(0, 1))
    data[8:12] = (-5).to_bytes(4, "big", signed=True)
    with pytest.raises(CorruptRecordError, match="length"):
        list(read_batches(data))


def test_unknown_codec() -> None:
    data = bytearray(_v2(0, 1))
    data[22] = 6
    (batch,) = read_batches(data, check_crc=False)
    with pytest.raises(UnsupportedCompressionTypeError):
        batch.records()


def _check_only_corrupt(data: bytes) -> None:
    try:
        for batch in read_batches(data, check_crc=False, max_decompressed_size=1 << 20):
            try:
                for _ in batch:
                    pass
                if batch.is_control:
                    batch.control_records()
            except UnsupportedCompressionTypeError:
                pass
    except CorruptRecordError:
        pass


@RECORDS
@given(st.binary(max_size=300))
def test_fuzz_random_bytes(data: bytes) -> None:
    _check_only_corrupt(data)


@pytest.mark.parametrize("seed", range(4))
def test_fuzz_mutated_batches(seed: int) -> None:
    rng = random.Random(seed)
    data, _ = _multi()
    for _ in range(1500):
        buf = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            pos = rng.randrange(len(buf))
            buf[pos] = rng.randrange(256)
        _check_only_corrupt(bytes(buf))


@RECORDS
@given(st.data())
def test_fuzz_mutated_record_sections(draw: st.DataObject) -> None:
    codec = draw.draw(st.sampled_from([0, 1, 2, 3, 4]))
    data = bytearray(_v2(0, 6, codec))
    for _ in range(draw.draw(st.integers(1, 5))):
        pos = draw.draw(st.integers(61, len(data) - 1))
        data[pos] = draw.draw(st.integers(0, 255))
    _check_only_corrupt(bytes(data))


def test_memoryview_of_larger_buffer() -> None:
    data, _ = _multi()
    buf = bytearray(os.urandom(10)) + data
    batches = list(read_batches(memoryview(buf)[10:]))
    assert len(batches) == 5
