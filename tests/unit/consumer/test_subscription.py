"""SubscriptionState: pure rules, no broker."""

from __future__ import annotations

import re

import pytest

from aiokproto.consumer.listener import ConsumerRebalanceListener
from aiokproto.consumer.subscription import SubscriptionState
from aiokproto.errors import IllegalStateError, KafkaConfigError
from aiokproto.structs import OffsetAndMetadata, TopicPartition

A0 = TopicPartition("a", 0)
A1 = TopicPartition("a", 1)
B0 = TopicPartition("b", 0)


def test_starts_empty() -> None:
    s = SubscriptionState()
    assert s.kind == "none"
    assert s.topics == frozenset()
    assert s.assigned() == frozenset()
    assert s.missing_positions() == []
    assert s.all_consumed() == {}


def test_subscribe_topics_bumps_version_once() -> None:
    s = SubscriptionState()
    s.subscribe(["a", "b"])
    assert s.kind == "topics"
    assert s.topics == {"a", "b"}
    assert s.version == 1
    s.subscribe(["b", "a"])  # same set: no change
    assert s.version == 1
    s.subscribe(["a"])
    assert s.version == 2
    assert s.assignment_version == 0  # the group assigns, not subscribe()


def test_subscribe_single_string_is_one_topic() -> None:
    s = SubscriptionState()
    s.subscribe("events")
    assert s.topics == {"events"}


def test_subscribe_pattern_and_matches() -> None:
    s = SubscriptionState()
    listener = ConsumerRebalanceListener()
    s.subscribe(pattern="ev-.*", listener=listener)
    assert s.kind == "pattern"
    assert s.pattern == re.compile("ev-.*")
    assert s.listener is listener
    assert s.topics == frozenset()
    v = s.version
    assert s.set_matched_topics(["ev-1", "ev-2"]) is True
    assert s.topics == {"ev-1", "ev-2"}
    assert s.version == v + 1
    assert s.set_matched_topics(["ev-2", "ev-1"]) is False
    assert s.version == v + 1


def test_set_matched_topics_ignored_without_pattern() -> None:
    s = SubscriptionState()
    s.subscribe(["a"])
    assert s.set_matched_topics(["x"]) is False
    assert s.topics == {"a"}


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.subscribe(["a"], pattern="a.*"),
        lambda s: s.subscribe([""]),
        lambda s: s.subscribe([3]),
        lambda s: s.subscribe(pattern="(unclosed"),
        lambda s: s.subscribe(["a"], listener=object()),
        lambda s: s.assign([("a", -1)]),
        lambda s: s.assign([("a",)]),
        lambda s: s.assign(["a"]),
    ],
)
def test_bad_input_is_config_error(call) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(KafkaConfigError):
        call(SubscriptionState())


def test_assign_and_subscribe_exclude_each_other() -> None:
    s = SubscriptionState()
    s.assign([A0])
    with pytest.raises(IllegalStateError, match="unsubscribe"):
        s.subscribe(["a"])
    s.unsubscribe()
    s.subscribe(["a"])
    with pytest.raises(IllegalStateError, match="unsubscribe"):
        s.assign([A0])


def test_assign_keeps_positions_of_kept_partitions() -> None:
    s = SubscriptionState()
    s.assign([A0, A1])
    assert s.kind == "assigned"
    assert s.assignment_version == 1
    s.seek(A0, 10)
    kept = s.state_of(A0)
    dropped = s.state_of(A1)
    s.assign([A0, B0])
    assert s.assignment_version == 2
    assert s.state_of(A0) is kept
    assert s.position(A0) == 10
    assert s.position(B0) is None
    assert s.state_of(A1) is None
    # a partition that comes back gets a fresh state: old prefetched data is stale
    s.assign([A0, A1])
    assert s.state_of(A1) is not dropped
    assert s.position(A1) is None


def test_assign_same_set_does_not_bump() -> None:
    s = SubscriptionState()
    s.assign([A0])
    s.assign([TopicPartition("a", 0)])
    assert s.assignment_version == 1


def test_empty_assign_unsubscribes() -> None:
    s = SubscriptionState()
    s.assign([A0])
    s.assign([])
    assert s.kind == "none"
    assert s.assigned() == frozenset()


def test_unsubscribe_clears_all_and_bumps_version() -> None:
    s = SubscriptionState()
    s.subscribe(["a"])
    s.set_group_assignment([A0])
    s.seek(A0, 3)
    v = s.version
    s.unsubscribe()
    assert s.version == v + 1
    assert s.kind == "none"
    assert s.topics == frozenset()
    assert s.assigned() == frozenset()
    assert s.all_consumed() == {}
    assert s.listener is None


def test_group_assignment_only_when_subscribed() -> None:
    s = SubscriptionState()
    s.set_group_assignment([A0])  # late answer after unsubscribe: ignored
    assert s.assigned() == frozenset()
    s.assign([B0])
    s.set_group_assignment([A0])
    assert s.assigned() == {B0}
    s.unsubscribe()
    s.subscribe(["a"])
    s.set_group_assignment([A0, A1])
    assert s.assigned() == {A0, A1}
    assert s.version == 1  # assignment changes do not move the subscription version


def test_positions_and_missing() -> None:
    s = SubscriptionState()
    s.assign([A0, A1, B0])
    assert sorted(s.missing_positions()) == sorted([A0, A1, B0])
    s.seek(A0, 5)
    s.request_reset(A1, "earliest")
    assert s.missing_positions() == [B0]
    assert s.pending_resets() == {A1: "earliest"}
    assert s.finish_reset(A1, "latest", 9) is False  # superseded strategy
    assert s.finish_reset(A1, "earliest", 2) is True
    assert s.position(A1) == 2
    assert s.pending_resets() == {}
    assert s.all_consumed() == {A0: OffsetAndMetadata(5), A1: OffsetAndMetadata(2)}


def test_finish_reset_after_seek_or_unassign_is_dropped() -> None:
    s = SubscriptionState()
    s.assign([A0])
    s.request_reset(A0, "latest")
    s.seek(A0, 7)  # the user's seek wins over a ListOffsets answer in flight
    assert s.finish_reset(A0, "latest", 100) is False
    assert s.position(A0) == 7
    s.request_reset(A0, "latest")
    s.assign([B0])
    assert s.finish_reset(A0, "latest", 100) is False


def test_seek_with_epoch_needs_validation() -> None:
    s = SubscriptionState()
    s.assign([A0])
    s.seek(A0, 4, leader_epoch=3)
    assert s.leader_epoch(A0) == 3
    assert s.needs_validation() == [A0]
    state = s.state_of(A0)
    assert state is not None and not state.fetchable
    assert s.all_consumed() == {A0: OffsetAndMetadata(4, "", 3)}
    s.seek(A0, 4)
    assert s.needs_validation() == []
    assert state.fetchable


@pytest.mark.parametrize("offset", [-1, 1.5, True, "3"])
def test_seek_rejects_bad_offsets(offset: object) -> None:
    s = SubscriptionState()
    s.assign([A0])
    with pytest.raises(KafkaConfigError):
        s.seek(A0, offset)  # type: ignore[arg-type]


def test_unassigned_partition_operations_raise() -> None:
    s = SubscriptionState()
    s.assign([A0])
    for op in (
        lambda: s.seek(B0, 1),
        lambda: s.position(B0),
        lambda: s.pause(B0),
        lambda: s.resume(B0),
        lambda: s.request_reset(B0, "earliest"),
    ):
        with pytest.raises(IllegalStateError, match="not assigned"):
            op()


def test_pause_resume_survives_reassignment_of_kept() -> None:
    s = SubscriptionState()
    s.assign([A0, A1])
    s.seek(A0, 0)
    s.pause(A0, A1)
    assert s.paused() == {A0, A1}
    state = s.state_of(A0)
    assert state is not None and not state.fetchable
    s.assign([A0, B0])
    assert s.paused() == {A0}
    s.resume(A0)
    assert s.paused() == frozenset()
    assert state.fetchable


def test_topics_given_as_a_list_to_the_constructor_say_how_to_pass_them() -> None:
    # Consumer(["a", "b"]) hands subscribe() the tuple (["a", "b"],)
    with pytest.raises(KafkaConfigError, match=r"separate arguments: Consumer\('a', 'b'\)"):
        SubscriptionState().subscribe((["a", "b"],))


def test_two_topic_names_to_subscribe_say_to_pass_one_list() -> None:
    # subscribe("a", "b") makes "b" the pattern
    with pytest.raises(KafkaConfigError, match=r"pass one list: subscribe\(\['a', 'b'\]\)"):
        SubscriptionState().subscribe("a", pattern="b")
    with pytest.raises(KafkaConfigError, match=r"not both$"):  # a real pattern: no hint
        SubscriptionState().subscribe(["a"], pattern="b.*")
