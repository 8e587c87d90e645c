"""Share consumer building blocks without sockets: acknowledgements, share sessions,
membership and acquired records."""

from __future__ import annotations

import uuid

import pytest

from aiokproto.consumer.errors import UndecodableBatchError
from aiokproto.errors import CorruptRecordError, KafkaConfigError
from aiokproto.records.batch_v2 import RecordBatchBuilder
from aiokproto.share.acks import (
    AckBatch,
    AckBook,
    AcknowledgeType,
    ack_type,
    to_batches,
)
from aiokproto.share.member import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    Answer,
    ShareMember,
    classify,
)
from aiokproto.share.records import Acquired, ShareRecord, acquired_records
from aiokproto.share.session import CLOSE_EPOCH, ShareSession
from aiokproto.structs import TopicPartition
from tests.consumer.batches import undecodable

A, R, J, N, G = (
    AcknowledgeType.ACCEPT,
    AcknowledgeType.RELEASE,
    AcknowledgeType.REJECT,
    AcknowledgeType.RENEW,
    AcknowledgeType.GAP,
)
TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)

# -- acks.py -------------------------------------------------------------------------


def test_to_batches_empty() -> None:
    assert to_batches({}) == []


def test_to_batches_one_run_of_one_type() -> None:
    assert to_batches({5: A, 6: A, 7: A}) == [AckBatch(5, 7, (1,))]


def test_to_batches_splits_on_type_changes() -> None:
    acks = {0: A, 1: A, 2: R, 3: J, 4: J, 5: G, 6: N}
    assert to_batches(acks) == [
        AckBatch(0, 1, (1,)),
        AckBatch(2, 2, (2,)),
        AckBatch(3, 4, (3,)),
        AckBatch(5, 5, (0,)),
        AckBatch(6, 6, (4,)),
    ]


def test_to_batches_splits_on_offset_gaps_and_sorts() -> None:
    # offsets not in the map are not acknowledged: a hole ends the batch
    acks = {12: A, 10: A, 11: A, 14: A, 15: A, 20: R}
    assert to_batches(acks) == [
        AckBatch(10, 12, (1,)),
        AckBatch(14, 15, (1,)),
        AckBatch(20, 20, (2,)),
    ]


def test_to_batches_gap_type_at_offset_zero_is_kept() -> None:
    # GAP is 0: the "no run yet" sentinel must not swallow it
    assert to_batches({0: G, 1: G}) == [AckBatch(0, 1, (0,))]
    assert to_batches({0: G}) == [AckBatch(0, 0, (0,))]


def test_to_batches_covers_every_offset_exactly_once() -> None:
    kinds = [A, R, J, G, N]
    acks = {o: kinds[(o * 7 // 3) % 5] for o in range(0, 300) if o % 11}
    seen: dict[int, int] = {}
    for b in to_batches(acks):
        assert b.first <= b.last and len(b.types) == 1
        for o in range(b.first, b.last + 1):
            assert o not in seen
            seen[o] = b.types[0]
    assert seen == {o: int(t) for o, t in acks.items()}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("accept", A),
        ("ACCEPT", A),
        ("Release", R),
        ("reject", J),
        ("renew", N),
        (AcknowledgeType.ACCEPT, A),
        (AcknowledgeType.RENEW, N),
    ],
)
def test_ack_type_parses_names_and_members(value: object, expected: AcknowledgeType) -> None:
    assert ack_type(value) is expected


@pytest.mark.parametrize("value", ["gap", AcknowledgeType.GAP, "maybe", "", 1, None, b"accept"])
def test_ack_type_refuses_others(value: object) -> None:
    with pytest.raises(KafkaConfigError, match="acknowledgement type"):
        ack_type(value)


def test_ackbook_acquire_acknowledge_and_take_pending() -> None:
    book = AckBook()
    book.acquired(TP0, 1, range(10, 15))
    book.acquired(TP1, 2, [3])
    assert book.holds(TP0, 12) and not book.holds(TP0, 15) and not book.holds(TP1, 4)
    assert book.node_of(TP0) == 1 and book.node_of(TP1) == 2
    assert book.node_of(TopicPartition("x", 0)) is None
    book.acknowledge(TP0, 10, A)
    book.acknowledge(TP0, 11, R)
    book.acknowledge(TP0, 12, N)  # renew keeps it acquired
    assert not book.holds(TP0, 10) and not book.holds(TP0, 11) and book.holds(TP0, 12)
    assert book.held() == {TP0: frozenset({12, 13, 14}), TP1: frozenset({3})}
    assert book.has_pending() and book.has_pending(1) and not book.has_pending(2)
    assert book.nodes_with_pending() == {1}
    assert book.pending_for(2) == {}
    assert book.pending_for(1) == {TP0: {10: A, 11: R, 12: N}}
    # taken: in flight now, not again
    assert book.pending_for(1) == {} and not book.has_pending()
    book.acknowledge(TP0, 12, A)  # accepted after the renewal
    assert book.pending_for(1) == {TP0: {12: A}}


def test_ackbook_refuses_offsets_it_does_not_hold() -> None:
    book = AckBook()
    with pytest.raises(KafkaConfigError, match="not a record this consumer holds"):
        book.acknowledge(TP0, 0, A)
    book.acquired(TP0, 1, [0])
    book.acknowledge(TP0, 0, A)
    with pytest.raises(KafkaConfigError):
        book.acknowledge(TP0, 0, A)  # twice
    with pytest.raises(KafkaConfigError):
        book.acknowledge(TP0, 1, A)


def test_ackbook_new_leader_starts_the_partition_afresh() -> None:
    book = AckBook()
    book.acquired(TP0, 1, [0, 1])
    book.acquired(TP0, 2, [5])  # acquired from another leader: the old ones are gone
    assert book.node_of(TP0) == 2 and book.held() == {TP0: frozenset({5})}


def test_ackbook_forget_node_returns_pending_and_drops_acquired() -> None:
    book = AckBook()
    book.acquired(TP0, 1, range(5))
    book.acquired(TP1, 1, range(3))
    other = TopicPartition("u", 0)
    book.acquired(other, 2, [7])
    book.acknowledge(TP0, 0, A)
    book.acknowledge(other, 7, R)
    lost = book.forget_node(1)
    assert lost == {TP0: {0: A}}  # TP1 had nothing pending
    assert book.node_of(TP0) is None and book.node_of(TP1) is None
    assert not book.holds(TP0, 1)
    assert book.held() == {}
    assert book.pending_for(2) == {other: {7: R}}
    assert book.forget_node(1) == {}


def test_ackbook_drop() -> None:
    book = AckBook()
    book.acquired(TP0, 1, [1])
    part = book.drop(TP0)
    assert part is not None and part.acquired == {1}
    assert book.drop(TP0) is None


# -- session.py ----------------------------------------------------------------------


def test_session_first_request_opens_with_every_partition() -> None:
    s = ShareSession()
    assert not s.is_open
    step = s.plan(frozenset({TP0, TP1}), frozenset())
    assert (step.epoch, step.add, step.forget) == (0, {TP0, TP1}, frozenset())
    s.succeeded(step)
    assert s.is_open and s.epoch == 1 and s.partitions == {TP0, TP1}


def test_session_later_requests_name_only_changes_and_acks() -> None:
    s = ShareSession()
    s.succeeded(s.plan(frozenset({TP0, TP1}), frozenset()))
    step = s.plan(frozenset({TP0, TP1}), frozenset())
    assert (step.epoch, step.add, step.forget) == (1, frozenset(), frozenset())
    step = s.plan(frozenset({TP0, TP1}), frozenset({TP1}))
    assert step.add == {TP1} and not step.forget
    s.succeeded(step)
    assert s.epoch == 2 and s.partitions == {TP0, TP1}
    tp2 = TopicPartition("t", 2)
    step = s.plan(frozenset({TP0, tp2}), frozenset())
    assert step.add == {tp2} and step.forget == {TP1}
    s.succeeded(step)
    assert s.partitions == {TP0, tp2} and s.epoch == 3


def test_session_forgets_a_partition_only_after_its_acks_are_out() -> None:
    s = ShareSession()
    s.succeeded(s.plan(frozenset({TP0, TP1}), frozenset()))
    # TP1 is no longer assigned but has acknowledgements to carry: kept this time
    step = s.plan(frozenset({TP0}), frozenset({TP1}))
    assert TP1 in step.add and TP1 not in step.forget
    s.succeeded(step)
    assert TP1 in s.partitions
    # no more acknowledgements: forgotten now
    step = s.plan(frozenset({TP0}), frozenset())
    assert step.forget == {TP1} and not step.add
    s.succeeded(step)
    assert s.partitions == {TP0}


def test_session_acks_for_a_partition_never_in_it_are_not_added() -> None:
    s = ShareSession()
    s.succeeded(s.plan(frozenset({TP0}), frozenset()))
    step = s.plan(frozenset({TP0}), frozenset({TP1}))
    assert TP1 not in step.add


def test_session_acknowledged_moves_only_the_epoch() -> None:
    s = ShareSession()
    s.succeeded(s.plan(frozenset({TP0}), frozenset()))
    s.acknowledged()
    assert s.epoch == 2 and s.partitions == {TP0}


def test_session_reset() -> None:
    s = ShareSession()
    s.succeeded(s.plan(frozenset({TP0}), frozenset()))
    s.reset()
    assert s.epoch == 0 and not s.is_open and s.partitions == frozenset()
    step = s.plan(frozenset({TP1}), frozenset({TP0}))
    assert step.epoch == 0 and step.add == {TP1} and not step.forget


def test_session_epoch_wraps_to_one_not_zero() -> None:
    s = ShareSession()
    s.succeeded(s.plan(frozenset({TP0}), frozenset()))
    s.epoch = 2**31 - 1
    s.succeeded(s.plan(frozenset({TP0}), frozenset()))
    assert s.epoch == 1
    s.epoch = 2**31 - 1
    s.acknowledged()
    assert s.epoch == 1 and s.is_open
    assert CLOSE_EPOCH == -1


# -- member.py -----------------------------------------------------------------------


def test_member_join_sends_everything() -> None:
    m = ShareMember("m1", rack="r1")
    m.subscribe(["b", "a"])
    f = m.next_heartbeat()
    assert (f.member_epoch, f.rack_id, f.subscribed_topic_names) == (JOIN_EPOCH, "r1", ["a", "b"])
    m.sent(f)
    m.answered(3, 500, {})
    assert m.joined and m.epoch == 3 and m.interval_ms == 500


def test_member_minimal_heartbeat_then_changes_only() -> None:
    m = ShareMember("m1", rack="r1")
    m.subscribe(["a"])
    m.sent(m.next_heartbeat())
    m.answered(1, 500, None)
    f = m.next_heartbeat()
    assert (f.member_epoch, f.rack_id, f.subscribed_topic_names) == (1, None, None)
    m.sent(f)
    m.answered(1, 0, None)
    assert m.interval_ms == 500  # 0 keeps the last interval
    m.subscribe(["a", "c"])
    f = m.next_heartbeat()
    assert f.subscribed_topic_names == ["a", "c"] and f.rack_id is None
    m.sent(f)
    m.answered(2, 500, None)
    assert m.next_heartbeat().subscribed_topic_names is None


def test_member_full_heartbeat_after_a_failure() -> None:
    m = ShareMember("m1", rack="r1")
    m.subscribe(["a"])
    m.sent(m.next_heartbeat())
    m.answered(1, 500, None)
    m.failed()
    f = m.next_heartbeat()
    assert (f.member_epoch, f.rack_id, f.subscribed_topic_names) == (1, "r1", ["a"])


def test_member_leave_then_rejoin() -> None:
    m = ShareMember("m1")
    m.subscribe(["a"])
    m.sent(m.next_heartbeat())
    m.answered(4, 500, {uuid.UUID(int=1): [0]})
    m.leaving = True
    assert not m.joined
    f = m.next_heartbeat()
    assert (f.member_epoch, f.rack_id, f.subscribed_topic_names) == (LEAVE_EPOCH, None, None)
    m.sent(f)
    m.answered(LEAVE_EPOCH, 0, None)
    assert m.left and m.epoch == JOIN_EPOCH and m.target == {}


def test_member_subscribing_again_while_the_leave_is_in_flight_joins_again() -> None:
    # unsubscribe() then subscribe() before the leave heartbeat is answered: the answer
    # (epoch -1) must not become the member's epoch, or it leaves on every heartbeat
    m = ShareMember("m1")
    m.subscribe(["a"])
    m.sent(m.next_heartbeat())
    m.answered(4, 500, {uuid.UUID(int=1): [0]})
    m.leaving = True
    f = m.next_heartbeat()
    m.sent(f)
    m.subscribe(["a"])
    m.leaving = False  # what ShareConsumer.subscribe() does
    m.answered(LEAVE_EPOCH, 0, None)
    assert m.epoch == JOIN_EPOCH and m.target == {}
    f = m.next_heartbeat()
    assert f.member_epoch == JOIN_EPOCH and f.subscribed_topic_names == ["a"]


def test_member_fenced_joins_afresh() -> None:
    m = ShareMember("m1", rack="r")
    m.subscribe(["a"])
    m.sent(m.next_heartbeat())
    m.answered(7, 500, {uuid.UUID(int=1): [0, 1]})
    m.fenced()
    assert m.epoch == JOIN_EPOCH and m.target == {} and not m.joined
    f = m.next_heartbeat()
    assert (f.member_epoch, f.rack_id, f.subscribed_topic_names) == (0, "r", ["a"])


def test_member_assignment_and_resolve() -> None:
    known, unknown = uuid.UUID(int=1), uuid.UUID(int=2)
    m = ShareMember("m1")
    m.subscribe(["a"])
    m.answered(1, 500, {known: [0, 2], unknown: [1], uuid.UUID(int=3): []})
    assert m.target == {known: {0, 2}, unknown: {1}}  # empty lists dropped
    parts, missing = m.resolve({known: "a"})
    assert parts == {TopicPartition("a", 0), TopicPartition("a", 2)} and missing
    parts, missing = m.resolve({known: "a", unknown: "b"})
    assert TopicPartition("b", 1) in parts and not missing
    m.answered(2, 500, None)  # no assignment in the answer: unchanged
    assert m.target == {known: {0, 2}, unknown: {1}}


def test_classify_heartbeat_errors() -> None:
    from aiokproto.errors import (
        CoordinatorLoadInProgressError,
        FencedMemberEpochError,
        GroupAuthorizationFailedError,
        NotCoordinatorError,
        UnknownMemberIdError,
    )

    assert classify(0) is Answer.OK
    assert classify(FencedMemberEpochError.errno) is Answer.FENCED
    assert classify(UnknownMemberIdError.errno) is Answer.FENCED
    assert classify(NotCoordinatorError.errno) is Answer.COORDINATOR
    assert classify(CoordinatorLoadInProgressError.errno) is Answer.RETRY
    assert classify(GroupAuthorizationFailedError.errno) is Answer.FATAL


# -- records.py ----------------------------------------------------------------------


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
