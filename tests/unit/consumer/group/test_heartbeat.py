"""ConsumerGroupHeartbeat requests: full when joining or after a failure, else only
what changed; leave form; timing. Pure, no sockets."""

from __future__ import annotations

from dataclasses import dataclass, field
from uuid import UUID

from hypothesis import given, settings
from hypothesis import strategies as st

from aiokproto.consumer.group.heartbeat import (
    HeartbeatBuilder,
    HeartbeatTimer,
    MemberConfig,
    Subscription,
    response_assignment,
)
from aiokproto.consumer.group.reconcile import NONE, LocalAssignment, freeze
from aiokproto.protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    ConsumerGroupHeartbeatResponseAssignment,
    ConsumerGroupHeartbeatResponseTopicPartitions,
)

A, B = UUID(int=1), UUID(int=2)
CFG = MemberConfig(group_id="g", rebalance_timeout_ms=300_000)
STATIC = MemberConfig(
    group_id="g",
    rebalance_timeout_ms=300_000,
    instance_id="i-1",
    rack_id="r1",
    server_assignor="uniform",
)
TOPICS = Subscription.to_topics(["b", "a"])


def broker_accepts(req: ConsumerGroupHeartbeatRequest, version: int = 1) -> None:
    """The group coordinator's request validation (GroupMetadataManager, 4.x)."""
    assert req.group_id, "GroupId can't be empty"
    if version >= 1 or req.member_epoch > 0 or req.member_epoch == -1:
        assert req.member_id, "MemberId can't be empty"
    assert req.instance_id != "", "InstanceId can't be empty"
    assert req.rack_id != "", "RackId can't be empty"
    if req.member_epoch == 0:
        assert req.rebalance_timeout_ms != -1, "RebalanceTimeoutMs must be provided"
        assert req.topic_partitions == [], "TopicPartitions must be empty when (re-)joining"
        assert req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None
    elif req.member_epoch == -2:
        assert req.instance_id is not None
    else:
        assert req.member_epoch >= -1


def roundtrip(req: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatRequest:
    out = bytearray()
    req._write(out, 1)
    back, pos = ConsumerGroupHeartbeatRequest._read(memoryview(bytes(out)), 0, 1)
    assert pos == len(out)
    return back


def assigned(epoch: int, parts: dict[UUID, list[int]]) -> LocalAssignment:
    return LocalAssignment(epoch, freeze(parts))


def test_joining_carries_every_field_and_no_partitions() -> None:
    b = HeartbeatBuilder(STATIC)
    req = b.build(member_id="m", epoch=0, subscription=TOPICS, assignment=NONE, joining=True)
    broker_accepts(req)
    assert req.member_epoch == 0
    assert req.instance_id == "i-1"
    assert req.rack_id == "r1"
    assert req.rebalance_timeout_ms == 300_000
    assert req.subscribed_topic_names == ["a", "b"]
    assert req.subscribed_topic_regex is None, "no regex was ever subscribed"
    assert req.server_assignor == "uniform"
    assert req.topic_partitions == []
    assert roundtrip(req) == req


def test_a_regex_member_joins_with_the_regex_and_no_names() -> None:
    b = HeartbeatBuilder(CFG)
    req = b.build(
        member_id="m",
        epoch=0,
        subscription=Subscription.to_regex("orders-.*"),
        assignment=NONE,
        joining=True,
    )
    broker_accepts(req)
    assert req.subscribed_topic_regex == "orders-.*"
    assert req.subscribed_topic_names == []


def test_nothing_changed_means_the_minimal_form() -> None:
    b = HeartbeatBuilder(STATIC)
    b.build(member_id="m", epoch=0, subscription=TOPICS, assignment=NONE, joining=True)
    req = b.build(member_id="m", epoch=3, subscription=TOPICS, assignment=NONE)
    broker_accepts(req)
    assert req == ConsumerGroupHeartbeatRequest(
        group_id="g", member_id="m", member_epoch=3, instance_id="i-1"
    )


def test_a_reconciled_assignment_is_acknowledged_once() -> None:
    b = HeartbeatBuilder(CFG)
    b.build(member_id="m", epoch=0, subscription=TOPICS, assignment=NONE, joining=True)
    current = assigned(0, {B: [2, 0], A: [1]})
    req = b.build(member_id="m", epoch=1, subscription=TOPICS, assignment=current)
    assert req.topic_partitions is not None
    assert [(t.topic_id, t.partitions) for t in req.topic_partitions] == [(A, [1]), (B, [0, 2])]
    assert req.subscribed_topic_names is None and req.rebalance_timeout_ms == -1
    again = b.build(member_id="m", epoch=1, subscription=TOPICS, assignment=current)
    assert again.topic_partitions is None
    # same partitions, newer local epoch (a target reconciled to the same partitions)
    newer = assigned(1, {B: [2, 0], A: [1]})
    req = b.build(member_id="m", epoch=2, subscription=TOPICS, assignment=newer)
    assert req.topic_partitions is not None and len(req.topic_partitions) == 2


def test_a_subscription_change_is_sent_and_a_regex_is_removed_with_an_empty_string() -> None:
    b = HeartbeatBuilder(CFG)
    b.build(member_id="m", epoch=0, subscription=TOPICS, assignment=NONE, joining=True)
    regex = Subscription.to_regex("x.*")
    req = b.build(member_id="m", epoch=1, subscription=regex, assignment=NONE)
    assert req.subscribed_topic_regex == "x.*"
    assert req.subscribed_topic_names == [], "the names are dropped"
    back = b.build(member_id="m", epoch=1, subscription=TOPICS, assignment=NONE)
    assert back.subscribed_topic_names == ["a", "b"]
    assert back.subscribed_topic_regex == "", "the regex is removed"
    assert b.build(member_id="m", epoch=1, subscription=TOPICS, assignment=NONE) == (
        ConsumerGroupHeartbeatRequest(group_id="g", member_id="m", member_epoch=1)
    )


def test_after_a_failure_the_next_heartbeat_carries_every_field() -> None:
    b = HeartbeatBuilder(STATIC)
    current = assigned(0, {A: [0]})
    b.build(member_id="m", epoch=0, subscription=TOPICS, assignment=NONE, joining=True)
    b.build(member_id="m", epoch=1, subscription=TOPICS, assignment=current)
    b.reset()
    req = b.build(member_id="m", epoch=1, subscription=TOPICS, assignment=current)
    assert req.rebalance_timeout_ms == 300_000
    assert req.subscribed_topic_names == ["a", "b"]
    assert req.server_assignor == "uniform"
    assert req.rack_id == "r1"
    assert req.topic_partitions is not None and req.topic_partitions[0].partitions == [0]


def test_the_leave_heartbeat_only_identifies_the_member() -> None:
    for cfg, epoch in ((CFG, -1), (STATIC, -2)):
        b = HeartbeatBuilder(cfg)
        req = b.build(
            member_id="m", epoch=epoch, subscription=TOPICS, assignment=NONE, leaving=True
        )
        broker_accepts(req)
        assert req == ConsumerGroupHeartbeatRequest(
            group_id="g", member_id="m", member_epoch=epoch, instance_id=cfg.instance_id
        )


def test_response_assignment() -> None:
    assert response_assignment(ConsumerGroupHeartbeatResponse()) is None
    resp = ConsumerGroupHeartbeatResponse(
        assignment=ConsumerGroupHeartbeatResponseAssignment(
            topic_partitions=[
                ConsumerGroupHeartbeatResponseTopicPartitions(topic_id=A, partitions=[0, 1]),
                ConsumerGroupHeartbeatResponseTopicPartitions(topic_id=A, partitions=[2]),
            ]
        )
    )
    assert response_assignment(resp) == {A: frozenset({0, 1, 2})}


def test_the_timer_waits_for_the_brokers_interval_but_never_for_urgent_heartbeats() -> None:
    t = HeartbeatTimer()
    assert t.due(0.0, heartbeat_now=False), "the first one at once"
    t.sent(0.0)
    assert not t.due(0.0, heartbeat_now=True), "never two in flight"
    assert t.delay_s(0.0, heartbeat_now=False) is None
    t.answered(0.1, interval_ms=5000)
    assert not t.due(4.9, heartbeat_now=False)
    assert t.due(4.9, heartbeat_now=True), "acknowledging/leaving/joining: at once"
    assert t.due(5.0, heartbeat_now=False)
    assert t.delay_s(2.0, heartbeat_now=False) == 3.0
    t.sent(5.0)
    t.failed(5.2, after_s=0.5)
    assert not t.due(5.6, heartbeat_now=False) and t.due(5.7, heartbeat_now=False)
    t.sent(6.0)
    t.abandoned()
    assert t.due(6.0, heartbeat_now=True)


# -- property: a field is sent iff joining, reset since, or changed ---------------------


@dataclass
class Model:
    """What the broker knows of the member: the last value of each field it received."""

    rebalance: int | None = None
    names: list[str] | None = None
    regex: str | None = None
    assignor: str | None = None
    rack: str | None = None
    partitions: dict[UUID, list[int]] | None = None
    acked: LocalAssignment | None = None
    fresh: set[str] = field(default_factory=set)


subscriptions = st.one_of(
    st.frozensets(st.sampled_from(["a", "b", "c"]), max_size=3).map(Subscription),
    st.sampled_from(["a.*", "b.*"]).map(Subscription.to_regex),
)
assignments = st.builds(
    assigned,
    st.integers(0, 3),
    st.dictionaries(st.sampled_from([A, B]), st.lists(st.integers(0, 3), max_size=3), max_size=2),
)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("join"), subscriptions),
        st.tuples(st.just("beat"), st.tuples(subscriptions, assignments)),
        st.tuples(st.just("reset"), st.none()),
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=300, deadline=None)
@given(ops)
def test_the_broker_always_ends_up_with_the_members_current_values(
    seq: list[tuple[str, object]],
) -> None:
    b = HeartbeatBuilder(STATIC)
    broker = Model()
    joined = False
    reset_since = True
    for kind, arg in seq:
        if kind == "reset":
            b.reset()
            reset_since = True
            continue
        if kind == "join":
            sub, current, epoch = arg, NONE, 0
            joined = True
        else:
            if not joined:
                continue
            sub, current = arg  # type: ignore[misc]
            epoch = 5
        assert isinstance(sub, Subscription) and isinstance(current, LocalAssignment)
        req = roundtrip(
            b.build(
                member_id="m", epoch=epoch, subscription=sub, assignment=current, joining=epoch == 0
            )
        )
        broker_accepts(req)
        if epoch != 0 and not reset_since:
            # minimal: what the broker already has is not sent again
            if broker.names == sub.names:
                assert req.subscribed_topic_names is None
            if broker.regex == sub.regex and broker.regex is not None:
                assert req.subscribed_topic_regex is None
            if broker.acked == current:
                assert req.topic_partitions is None
            assert req.rebalance_timeout_ms == -1
            assert req.server_assignor is None and req.rack_id is None
        reset_since = False
        if req.topic_partitions is not None:
            broker.acked = current
        # the broker applies what was sent
        if req.rebalance_timeout_ms != -1:
            broker.rebalance = req.rebalance_timeout_ms
        if req.subscribed_topic_names is not None:
            broker.names = req.subscribed_topic_names
        if req.subscribed_topic_regex is not None:
            broker.regex = req.subscribed_topic_regex or None
        if req.server_assignor is not None:
            broker.assignor = req.server_assignor
        if req.rack_id is not None:
            broker.rack = req.rack_id
        if req.topic_partitions is not None:
            broker.partitions = {t.topic_id: t.partitions for t in req.topic_partitions}
        # ... and then knows exactly the member's values
        assert broker.rebalance == STATIC.rebalance_timeout_ms
        assert broker.names == sub.names
        assert broker.regex == sub.regex
        assert broker.assignor == "uniform" and broker.rack == "r1"
        expected = {t: sorted(ps) for t, ps in current.partitions.items()}
        assert broker.partitions == ({} if epoch == 0 else expected)


def test_a_regex_dropped_after_a_failed_heartbeat_is_still_removed_on_the_broker() -> None:
    b = HeartbeatBuilder(CFG)
    regex = Subscription.to_regex("x.*")
    b.build(member_id="m", epoch=0, subscription=regex, assignment=NONE, joining=True)
    b.reset()  # the heartbeat failed; the broker may well have the regex
    req = b.build(member_id="m", epoch=1, subscription=TOPICS, assignment=NONE)
    assert req.subscribed_topic_names == ["a", "b"]
    assert req.subscribed_topic_regex == "", "removed explicitly"
    later = b.build(member_id="m", epoch=1, subscription=TOPICS, assignment=NONE)
    assert later.subscribed_topic_regex is None
