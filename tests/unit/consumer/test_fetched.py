"""Handing out fetched data (pure): positions, control batches, aborted transactions,
compaction gaps, cut-off batches, lazy decoding, and the decoder against read_batches."""

from __future__ import annotations

import pickle
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiokproto.consumer.decode import decode_legacy, decode_v2
from aiokproto.consumer.errors import UndecodableBatchError
from aiokproto.consumer.fetched import FetchedData, first_batch_size, scan_end
from aiokproto.consumer.record import ConsumerRecord
from aiokproto.consumer.subscription import PartitionState
from aiokproto.consumer.transactions import AbortedFilter
from aiokproto.errors import CorruptRecordError, UnsupportedCompressionTypeError
from aiokproto.protocol.varint import encode_varint
from aiokproto.records import LegacyMessageSetBuilder, RecordBatchBuilder, read_batches
from aiokproto.records.batch_v2 import HEADER_SIZE, RecordBatch
from aiokproto.share.records import Acquired, acquired_records
from aiokproto.structs import TopicPartition
from tests.consumer.batches import batch, gapped_batch, marker, undecodable, with_crc
from tests.records.strategies import RECORDS, codecs, record, timestamps

TP = TopicPartition("t", 0)


def fetched(
    data: bytes, offset: int = 0, aborted: list[tuple[int, int]] | None = None, **kwargs: object
) -> FetchedData:
    flt = AbortedFilter(aborted) if aborted is not None else None
    return FetchedData(TP, PartitionState(), offset, memoryview(data), aborted=flt, **kwargs)  # type: ignore[arg-type]


def take_all(fd: FetchedData, n: int = 1000) -> list[ConsumerRecord]:
    out: list[ConsumerRecord] = []
    while chunk := fd.take(n):
        out.extend(chunk)
    return out


def test_take_in_chunks_advances_next_offset() -> None:
    fd = fetched(batch(0, [b"a", b"b", b"c"]) + batch(3, [b"d"]))
    assert [r.value for r in fd.take(2)] == [b"a", b"b"]
    assert fd.next_offset == 2 and not fd.exhausted
    assert [r.value for r in fd.take(5)] == [b"c"]  # one batch per call
    assert fd.next_offset == 3
    assert [r.value for r in fd.take(5)] == [b"d"]
    assert fd.next_offset == 4 and fd.exhausted
    assert fd.take(5) == []


def test_records_before_the_fetch_offset_are_skipped() -> None:
    fd = fetched(batch(0, [b"a", b"b", b"c", b"d"]) + batch(4, [b"e"]), offset=2)
    assert [(r.offset, r.value) for r in take_all(fd)] == [(2, b"c"), (3, b"d"), (4, b"e")]


def test_compaction_gaps_and_trailing_removed_records() -> None:
    # records at 10, 13, 14; the batch covered up to 17 (15..17 compacted away)
    fd = fetched(gapped_batch(10, [0, 3, 4], 7) + batch(18, [b"x"]), offset=10)
    got = fd.take(100)
    assert [r.offset for r in got] == [10, 13, 14]
    assert fd.next_offset == 18  # the batch's next offset, not last record + 1
    assert [r.offset for r in fd.take(100)] == [18]
    part = fetched(gapped_batch(10, [0, 3, 4], 7), offset=10)
    assert [r.offset for r in part.take(2)] == [10, 13]
    assert part.next_offset == 14
    assert [r.offset for r in part.take(2)] == [14] and part.next_offset == 18


def test_empty_batch_after_compaction_moves_position() -> None:
    fd = fetched(gapped_batch(0, [], 4) + batch(5, [b"y"]))
    assert [r.offset for r in fd.take(10)] == [5]
    fd = fetched(gapped_batch(0, [], 4))
    assert fd.take(10) == [] and fd.next_offset == 5 and fd.exhausted


def test_control_batches_are_skipped_but_counted() -> None:
    data = (
        batch(0, [b"a"], pid=7, transactional=True) + marker(1, 7, commit=True) + batch(2, [b"b"])
    )
    fd = fetched(data)
    assert [r.offset for r in take_all(fd)] == [0, 2]
    fd = fetched(batch(0, [b"a"], pid=7, transactional=True) + marker(1, 7, commit=True))
    assert [r.value for r in fd.take(10)] == [b"a"]
    assert fd.take(10) == [] and fd.next_offset == 2 and fd.exhausted


def test_read_committed_filters_aborted() -> None:
    data = (
        batch(0, [b"a0", b"a1"], pid=1, transactional=True)  # aborted
        + batch(2, [b"c0"], pid=2, transactional=True)  # committed
        + batch(3, [b"plain"])
        + marker(4, 1, commit=False)
        + marker(5, 2, commit=True)
        + batch(6, [b"a2"], pid=1, transactional=True)  # pid 1 again, new txn, aborted
        + batch(7, [b"later"], pid=1, transactional=True)  # ... and a committed one after
        + marker(8, 1, commit=False)
    )
    # aborted: pid 1 from 0, pid 1 from 6
    fd = fetched(data, aborted=[(1, 0), (1, 6)])
    assert [r.value for r in take_all(fd)] == [b"c0", b"plain"]
    assert fd.next_offset == 9
    # read_uncommitted hands out everything but markers
    fd = fetched(data)
    assert [r.value for r in take_all(fd)] == [b"a0", b"a1", b"c0", b"plain", b"a2", b"later"]


def test_aborted_filter_resets_after_marker() -> None:
    flt = AbortedFilter([(5, 0)])
    b0 = RecordBatch(memoryview(batch(0, [b"x"], pid=5, transactional=True)))
    m1 = RecordBatch(memoryview(marker(1, 5, commit=False)))
    b2 = RecordBatch(memoryview(batch(2, [b"y"], pid=5, transactional=True)))
    assert flt.skip(b0) is True
    assert flt.skip(m1, True) is True
    assert flt.skip(b2) is False  # the abort marker ended that transaction


def test_cut_off_trailing_batch_is_left_for_the_next_fetch() -> None:
    whole = batch(0, [b"a", b"b"])
    nxt = batch(2, [b"c" * 100])
    fd = fetched(whole + nxt[:40])
    assert [r.offset for r in fd.take(10)] == [0, 1]
    assert fd.exhausted and fd.next_offset == 2 and fd.error is None
    assert first_batch_size(memoryview(nxt[:40])) == len(nxt)
    assert first_batch_size(memoryview(nxt)) is None
    assert first_batch_size(memoryview(nxt[:5])) == 0


def test_decoding_is_lazy_and_corruption_is_reported_at_hand_out() -> None:
    good = batch(0, [b"a"])
    bad = bytearray(batch(1, [b"b"]))
    bad[-1] ^= 0xFF
    fd = fetched(good + bytes(bad))  # building it decodes nothing
    assert [r.value for r in fd.take(10)] == [b"a"]
    assert fd.take(10) == []
    assert isinstance(fd.error, CorruptRecordError) and fd.next_offset == 1


def test_deserializer_failure_stops_at_the_record() -> None:
    def value(b: bytes | None) -> int:
        return int(b or b"")

    fd = fetched(batch(0, [b"1", b"2", b"x", b"4"]), value_deserializer=value)
    assert [r.value for r in fd.take(10)] == [1, 2]
    assert fd.next_offset == 2
    assert fd.take(10) == [] and fd.error is not None and fd.next_offset == 2


def test_legacy_batches() -> None:
    builder = LegacyMessageSetBuilder(1)
    for i in range(3):
        builder.append(1000 + i, b"k", f"v{i}".encode())
    data = bytes(builder.build())
    got = take_all(fetched(data))
    assert [(r.offset, r.value, r.leader_epoch) for r in got] == [
        (0, b"v0", -1),
        (1, b"v1", -1),
        (2, b"v2", -1),
    ]


@RECORDS
@given(
    records=st.lists(record, min_size=1, max_size=30),
    codec=codecs,
    base=timestamps,
    base_offset=st.integers(0, 2**40),
    log_append=st.booleans(),
)
def test_decoder_equals_read_batches(
    records: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    codec: int,
    base: int,
    base_offset: int,
    log_append: bool,
) -> None:
    builder = RecordBatchBuilder(
        batch_size=1 << 22,
        compression=codec,
        base_offset=base_offset,
        partition_leader_epoch=9,
        log_append_time=log_append,
    )
    for delta, key, value, headers in records:
        assert builder.append(base + delta, key, value, headers) is not None
    data = bytes(builder.build())
    (parsed,) = list(read_batches(data))
    assert isinstance(parsed, RecordBatch)
    ours = decode_v2(parsed, memoryview(data), "t", 3)
    expected = [ConsumerRecord("t", 3, *r, 9) for r in parsed]
    assert ours == expected


def test_decode_legacy_matches_reader() -> None:
    builder = LegacyMessageSetBuilder(0)
    builder.append(0, None, b"x")
    (parsed,) = list(read_batches(bytes(builder.build())))
    assert decode_legacy(parsed, "t", 1) == [ConsumerRecord("t", 1, 0, -1, -1, None, b"x", (), -1)]  # type: ignore[arg-type]


def test_scan_end_reads_only_headers() -> None:
    data = batch(0, [b"a", b"b"], epoch=4) + gapped_batch(2, [0], 5)
    assert scan_end(memoryview(data)) == (8, 3)  # gapped_batch writes epoch 3
    cut = data + batch(8, [b"c" * 50])[:30]
    assert scan_end(memoryview(cut)) == (8, 3)
    assert scan_end(memoryview(batch(0, [b"c" * 50])[:30])) == (-1, -1)
    assert scan_end(memoryview(b"")) == (-1, -1)
    builder = LegacyMessageSetBuilder(1)
    for i in range(3):
        builder.append(1000 + i, None, b"v")
    assert scan_end(memoryview(bytes(builder.build()))) == (3, -1)
    fd = fetched(data)
    assert (fd.end_offset, fd.end_epoch) == (8, 3)


def test_a_shared_response_is_let_go_once_little_of_it_is_still_buffered() -> None:
    from aiokproto.consumer.fetched import FetchedData, SharedFrame
    from aiokproto.consumer.subscription import PartitionState

    frame_bytes = bytearray(range(256)) * 4  # a 1024-byte "response"
    view = memoryview(frame_bytes)
    members = [
        FetchedData(TopicPartition("t", i), PartitionState(), 0, view[i * 200 : i * 200 + 200])
        for i in range(4)
    ]
    frame = SharedFrame(len(frame_bytes))
    for fd in members:
        frame.join(fd)
    frame.leave(members[0])
    frame.leave(members[1])  # 400 of 1024 bytes still buffered: kept in place
    assert members[3]._view.obj is frame_bytes and members[3].frame is frame
    frame.leave(members[2])  # 200 left, under a quarter: copied out, response let go
    last = members[3]
    assert last.frame is None and last._view.obj is not frame_bytes
    assert bytes(last._view) == bytes(frame_bytes[600:800])
    assert last.unread_bytes == 200


def test_a_shared_response_is_charged_whole_and_copied_out_only_within_the_budget() -> None:
    from aiokproto.consumer.budget import FetchBudget
    from aiokproto.consumer.fetched import FetchedData, SharedFrame
    from aiokproto.consumer.subscription import PartitionState

    frame_bytes = bytearray(range(256)) * 4  # a 1024-byte "response"
    view = memoryview(frame_bytes)
    members = [
        FetchedData(TopicPartition("t", i), PartitionState(), 0, view[i * 200 : i * 200 + 200])
        for i in range(4)
    ]
    budget = FetchBudget(1250)
    frame = SharedFrame(len(frame_bytes), budget)
    for fd in members:
        frame.join(fd)
    assert budget.buffered == 1024  # the response, not the 800 bytes of its slices
    members[0].discard()
    members[1].discard()
    assert budget.buffered == 1024  # still kept alive by the other two
    budget.charge(50)  # free: 176 bytes, less than the 200 a copy-out would add
    members[2].discard()
    last = members[3]
    assert last.frame is frame and budget.buffered == 1074  # not copied: the bound holds
    budget.release(50)
    frame.settle()  # room again: copied out, the response let go
    assert last.frame is None and last._view.obj is not frame_bytes
    assert budget.buffered == 200 and last.charged == 200
    last.discard()
    assert budget.buffered == 0


def test_scan_end_refuses_impossible_offsets() -> None:
    from aiokproto.consumer.fetched import scan_end

    def batch(base: int, last_delta: int) -> memoryview:
        buf = bytearray(61)
        buf[0:8] = base.to_bytes(8, "big", signed=True)
        buf[8:12] = (61 - 12).to_bytes(4, "big")
        buf[16] = 2
        buf[23:27] = last_delta.to_bytes(4, "big", signed=True)
        return memoryview(buf)

    assert scan_end(batch(10, 4)) == (15, 0)
    # the next fetch would start past int64 (or before 0): no prefetch from there
    assert scan_end(batch((1 << 63) - 1, 0)) == (-1, -1)
    assert scan_end(batch(-5, 0)) == (-1, -1)
    assert scan_end(batch(10, -3)) == (-1, -1)


DEFECTS = ["codec5", "codec6", "codec7", "crc", "short", "record"]


@pytest.mark.parametrize("kind", DEFECTS)
def test_an_undecodable_batch_stops_hand_out_every_time(kind: str) -> None:
    # records before it are handed out; then it is reported, never stepped over
    fd = fetched(batch(0, [b"a", b"b"]) + undecodable(kind, 2, [b"c", b"d"]) + batch(4, [b"e"]))
    assert [r.value for r in fd.take(10)] == [b"a", b"b"]
    assert fd.next_offset == 2
    assert fd.take(10) == [] and fd.exhausted
    err = fd.error
    assert isinstance(err, UndecodableBatchError) and isinstance(err, CorruptRecordError)
    assert (err.tp, err.first_offset, err.last_offset, err.position) == (TP, 2, 3, 2)
    assert "t-0 offsets 2-3" in str(err) and "seek to 4" in str(err)
    if kind.startswith("codec"):
        assert isinstance(err.cause, UnsupportedCompressionTypeError)
        assert f"compression codec {kind[-1]}" in str(err) and "newer request" not in str(err)
    assert str(pickle.loads(pickle.dumps(err))) == str(err)  # args rebuild it
    for _ in range(3):  # asked again: still nothing past it, the position stays
        assert fd.take(10) == [] and fd.next_offset == 2 and fd.error is err


def test_an_undecodable_first_batch_keeps_the_fetch_offset() -> None:
    fd = fetched(undecodable("codec7", 5, [b"x"]) + batch(6, [b"y"]), offset=5)
    assert fd.take(10) == [] and fd.next_offset == 5
    assert isinstance(fd.error, UndecodableBatchError)
    assert (fd.error.first_offset, fd.error.last_offset) == (5, 5)


@pytest.mark.parametrize("field", ["magic", "length"])
def test_an_unreadable_header_after_good_batches_loses_no_record(field: str) -> None:
    bad = bytearray(batch(2, [b"c"]))
    if field == "magic":
        bad[16] = 9
    else:
        bad[8:12] = (3).to_bytes(4, "big")
    fd = fetched(batch(0, [b"a", b"b"]) + bytes(bad))
    assert [r.value for r in fd.take(10)] == [b"a", b"b"]
    # looking at what follows must not raise (the records above were handed out)
    assert not fd.exhausted
    assert fd.take(10) == [] and fd.exhausted and fd.next_offset == 2
    err = fd.error
    assert isinstance(err, UndecodableBatchError)
    assert (err.first_offset, err.last_offset, err.position) == (2, None, 2)
    assert "header unreadable" in str(err)


@pytest.mark.parametrize("delta", [-56, 2, 18])
def test_a_record_offset_outside_its_batch_stops_hand_out(delta: int) -> None:
    # a valid CRC over a record whose offset delta leaves the batch (0..1): handed
    # out, take(1) would have moved the position to 19 over records 1..4
    raw = bytearray(batch(0, [b"a", b"b"]))
    rec = HEADER_SIZE  # first record: length, attributes, timestamp delta, offset delta
    assert raw[rec + 3] == 0
    (raw[rec + 3],) = encode_varint(delta)  # one byte for these deltas, as before
    fd = fetched(with_crc(raw) + batch(2, [b"c"]))
    assert fd.take(1) == [] and fd.next_offset == 0
    assert isinstance(fd.error, UndecodableBatchError)
    assert (fd.error.first_offset, fd.error.last_offset) == (0, 1)
    assert "outside the batch" in str(fd.error)


def test_mutated_batches_never_raise_from_take_nor_move_past_an_error() -> None:
    # seeded: 2,000 buffers with 1-3 bytes changed behind the offset/length fields,
    # the CRC recomputed in most so the record code is reached
    rng = random.Random(34)
    good = [batch(0, [b"a", b"b"]), batch(2, [b"c" * 30, b"d"]), batch(4, [b"e"])]
    errors = 0
    for _ in range(2000):
        k = rng.randrange(3)
        bad = bytearray(good[k])
        for _ in range(rng.randint(1, 3)):
            bad[rng.randrange(16, len(bad))] = rng.randrange(256)
        if rng.random() < 0.7 and bad[16] == 2:
            bad = bytearray(with_crc(bad))
        data = b"".join(bytes(bad) if j == k else good[j] for j in range(3))
        fd = fetched(data)
        got = [r.offset for _ in range(8) for r in fd.take(rng.randint(1, 3))]
        if fd.error is not None:
            errors += 1
            assert isinstance(fd.error, UndecodableBatchError)
            assert all(o < fd.next_offset for o in got)
            stop = fd.next_offset
            assert fd.take(10) == [] and fd.exhausted and fd.next_offset == stop
        acquired_records(data, [Acquired(0, 4, 1)], "t", 0)  # never raises either
    assert errors > 500  # the mutations did reach the error paths
