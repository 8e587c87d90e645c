"""``ShareMember``: share group heartbeats, fencing and the assignment, without sockets."""

from __future__ import annotations

import uuid

from aiokproto.share.member import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    Answer,
    ShareMember,
    classify,
)
from aiokproto.structs import TopicPartition


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
