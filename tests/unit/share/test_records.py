"""``acquired_records``: only acquired offsets become records, the rest of the acquired
ranges are gaps (no sockets)."""

from __future__ import annotations

import pytest

from aiokproto.consumer.errors import UndecodableBatchError
from aiokproto.errors import CorruptRecordError
from aiokproto.records.batch_v2 import RecordBatchBuilder
from aiokproto.share.records import Acquired, ShareRecord, acquired_records
from aiokproto.structs import TopicPartition
from tests.consumer.batches import undecodable


def batch(base: int, values: list[bytes], *, control: bool = False) -> bytes:
    b = RecordBatchBuilder(base_offset=base, control=control, partition_leader_epoch=3)
    for i, v in enumerate(values):
        assert b.append(1_000 + i, b"k%d" % (base + i), v) is not None
    return bytes(b.build())


def commit_marker(offset: int) -> bytes:
    b = RecordBatchBuilder(base_offset=offset, control=True, transactional=True)
    b.append(2_000, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")
    return bytes(b.build())


def test_acquired_records_nothing_acquired() -> None:
    data = batch(0, [b"a", b"b"])
    assert acquired_records(data, [], "t", 0) == ([], [], [])


def test_acquired_records_all_acquired_with_fields() -> None:
    data = batch(0, [b"a", b"b", b"c"])
    records, gaps, _ = acquired_records(data, [Acquired(0, 2, 1)], "t", 4)
    assert gaps == []
    assert [r.offset for r in records] == [0, 1, 2]
    r = records[1]
    assert isinstance(r, ShareRecord)
    assert (r.topic, r.partition, r.key, r.value, r.timestamp) == ("t", 4, b"k1", b"b", 1_001)
    assert r.leader_epoch == 3 and r.delivery_count == 1


def test_acquired_records_skips_records_outside_the_ranges() -> None:
    data = batch(0, [b"%d" % i for i in range(5)]) + batch(5, [b"%d" % i for i in range(5, 10)])
    records, gaps, _ = acquired_records(data, [Acquired(2, 3, 1), Acquired(7, 7, 1)], "t", 0)
    assert [r.offset for r in records] == [2, 3, 7] and gaps == []


def test_acquired_records_delivery_count_per_range() -> None:
    data = batch(10, [b"x"] * 6)
    ranges = [Acquired(10, 11, 1), Acquired(12, 12, 3), Acquired(13, 15, 2)]
    records, _, _ = acquired_records(data, ranges, "t", 0)
    assert [(r.offset, r.delivery_count) for r in records] == [
        (10, 1),
        (11, 1),
        (12, 3),
        (13, 2),
        (14, 2),
        (15, 2),
    ]


def test_acquired_records_control_batch_is_a_gap() -> None:
    data = batch(0, [b"a", b"b"]) + commit_marker(2) + batch(3, [b"c"])
    records, gaps, _ = acquired_records(data, [Acquired(0, 3, 1)], "t", 0)
    assert [r.offset for r in records] == [0, 1, 3]
    assert gaps == [2]


def test_acquired_records_offsets_with_no_data_are_gaps() -> None:
    # compacted away (offsets 3-4 missing) and acquired past the data's end
    data = batch(0, [b"a", b"b", b"c"]) + batch(5, [b"f"])
    records, gaps, _ = acquired_records(data, [Acquired(1, 7, 2)], "t", 0)
    assert [r.offset for r in records] == [1, 2, 5]
    assert gaps == [3, 4, 6, 7]
    assert {r.delivery_count for r in records} == {2}


def test_acquired_records_no_data_at_all_is_all_gaps() -> None:
    for data in (None, b""):
        assert acquired_records(data, [Acquired(4, 6, 1)], "t", 0) == ([], [4, 5, 6], [])


def test_acquired_records_batches_before_and_after_the_ranges_are_skipped() -> None:
    data = batch(0, [b"a"] * 3) + batch(3, [b"b"] * 3) + batch(6, [b"c"] * 3)
    records, gaps, _ = acquired_records(data, [Acquired(3, 5, 1)], "t", 0)
    assert [r.offset for r in records] == [3, 4, 5] and not gaps


def test_acquired_records_partial_last_batch() -> None:
    # the broker sends whole batches: records past the acquired range are not ours
    data = batch(0, [b"a"] * 10)
    records, gaps, _ = acquired_records(data, [Acquired(0, 4, 1)], "t", 0)
    assert [r.offset for r in records] == [0, 1, 2, 3, 4] and not gaps


def test_acquired_records_truncated_trailing_batch() -> None:
    # a fetch answer may end with a partial batch (max_bytes): it is not decoded
    whole = batch(0, [b"a"] * 3)
    data = whole + batch(3, [b"b"] * 3)[:20]
    records, gaps, _ = acquired_records(data, [Acquired(0, 5, 1)], "t", 0)
    assert [r.offset for r in records] == [0, 1, 2] and gaps == [3, 4, 5]


@pytest.mark.parametrize("kind", ["codec7", "crc", "short", "record"])
def test_acquired_records_an_undecodable_batch_is_to_be_rejected(kind: str) -> None:
    # the batches around it are decoded; its acquired offsets are named, not gaps
    data = batch(0, [b"a", b"b"]) + undecodable(kind, 2, [b"c", b"d"]) + batch(4, [b"e"])
    records, gaps, bad = acquired_records(data, [Acquired(1, 4, 2)], "t", 0)
    assert [r.offset for r in records] == [1, 4] and gaps == []
    ((error, offsets),) = bad
    assert offsets == [2, 3]
    assert isinstance(error, UndecodableBatchError) and isinstance(error, CorruptRecordError)
    assert (error.tp, error.first_offset, error.last_offset, error.position) == (
        TopicPartition("t", 0),
        2,
        3,
        None,
    )
    assert "t-0 offsets 2-3" in str(error) and "rejected" in str(error)


def test_acquired_records_an_unreadable_header_rejects_the_rest() -> None:
    # where the bad batch ends is unknown: every acquired offset from it on is lost
    bad = bytearray(batch(2, [b"c"]))
    bad[16] = 9  # magic
    data = batch(0, [b"a", b"b"]) + bytes(bad) + batch(3, [b"d"])
    records, gaps, undecodable_ = acquired_records(data, [Acquired(0, 3, 1)], "t", 0)
    assert [r.offset for r in records] == [0, 1] and gaps == []
    ((error, offsets),) = undecodable_
    assert offsets == [2, 3] and error.last_offset is None


def test_acquired_records_an_undecodable_batch_outside_the_ranges_is_no_error() -> None:
    data = undecodable("crc", 0, [b"a"]) + batch(1, [b"b"])
    records, gaps, bad = acquired_records(data, [Acquired(1, 1, 1)], "t", 0)
    assert [r.offset for r in records] == [1] and gaps == [] and bad == []


@pytest.mark.parametrize("base", [0, 1, 10**6])
def test_a_bad_batchs_own_offsets_are_not_trusted(base: int) -> None:
    """Its base offset is outside the CRC: what it holds is what lies between the good
    batches around it, never a record already handed out, never a gap."""
    bad = bytearray(batch(1, [b"b"]))
    bad[16] = 9  # magic: the header is unreadable
    bad[0:8] = base.to_bytes(8, "big")
    data = batch(0, [b"a"]) + bytes(bad) + batch(2, [b"c"])
    records, gaps, undecodable_ = acquired_records(data, [Acquired(0, 2, 1)], "t", 0)
    assert [r.offset for r in records] == [0] and gaps == []
    ((error, offsets),) = undecodable_
    assert offsets == [1, 2] and error.first_offset == 1


@pytest.mark.parametrize("base", [0, 10**6])
def test_a_bad_batch_with_a_readable_header_holds_what_lies_between_good_ones(
    base: int,
) -> None:
    bad = bytearray(undecodable("crc", 2, [b"c", b"d"]))
    bad[0:8] = base.to_bytes(8, "big")  # not covered by the CRC
    data = batch(0, [b"a", b"b"]) + bytes(bad) + batch(4, [b"e"])
    records, gaps, undecodable_ = acquired_records(data, [Acquired(0, 4, 1)], "t", 0)
    assert [r.offset for r in records] == [0, 1, 4] and gaps == []
    ((error, offsets),) = undecodable_
    assert offsets == [2, 3] and (error.first_offset, error.last_offset) == (2, 3)
