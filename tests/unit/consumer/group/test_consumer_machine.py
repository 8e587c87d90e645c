"""KIP-848 member state machine: every (state, input) cell, directed scenarios, and
random event sequences checked against what the listener, the consumer and the broker
were told. No sockets."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from uuid import UUID

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiokproto.consumer.group.consumer_machine import (
    HEARTBEAT_NOW,
    HEARTBEATING,
    LEAVE_EPOCH,
    LEAVE_STATIC_EPOCH,
    TABLE,
    Effect,
    EffectKind,
    Event,
    Input,
    MemberMachine,
    State,
    Transition,
    heartbeat_event,
    is_ignored,
)
from aiokproto.consumer.group.heartbeat import HeartbeatBuilder, MemberConfig, Subscription
from aiokproto.errors import (
    BrokerResponseError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    FencedMemberEpochError,
    GroupAuthorizationFailedError,
    GroupMaxSizeReachedError,
    InvalidRegularExpressionError,
    NotCoordinatorError,
    StaleMemberEpochError,
    TopicAuthorizationFailedError,
    UnknownMemberIdError,
    UnreleasedInstanceIdError,
    UnsupportedAssignorError,
)
from aiokproto.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from aiokproto.structs import TopicPartition as TP
from tests.unit.consumer.group.test_heartbeat import broker_accepts

A, B, C = (UUID(int=i + 1) for i in range(3))
NAMES = {A: "a", B: "b", C: "c"}
SUB = Subscription.to_topics(["a", "b", "c"])


@dataclass
class Harness:
    """A machine plus a model of the world that performs its effects faithfully and
    checks, after every feed, what the listener, the consumer and the broker saw."""

    static: bool = False
    metadata: dict[UUID, str] = field(default_factory=lambda: dict(NAMES))
    held: frozenset[TP] = frozenset()  # what the consumer holds (set by ASSIGN_STEP)
    live: int | None = None  # token of the reconciliation the driver is running
    revoked_done: bool = False  # its revoke step was fed back
    releasing: bool = False  # a LOSE/REVOKE effect awaits RELEASED
    failed: bool = False
    left: int = 0  # LEAVE_DONE effects
    sent: list[ConsumerGroupHeartbeatRequest] = field(default_factory=list)
    machine: MemberMachine = field(init=False)
    builder: HeartbeatBuilder = field(init=False)

    def __post_init__(self) -> None:
        instance = "i-1" if self.static else None
        self.machine = MemberMachine(
            member_id="m-1", resolver=self.metadata.get, instance_id=instance
        )
        self.builder = HeartbeatBuilder(
            MemberConfig(group_id="g", rebalance_timeout_ms=1000, instance_id=instance)
        )

    @property
    def state(self) -> State:
        return self.machine.state

    def feed(
        self,
        event: Event,
        *,
        epoch: int | None = None,
        assignment: Mapping[UUID, Iterable[int]] | None = None,
        token: int | None = None,
    ) -> list[Effect]:
        m = self.machine
        before = m.state
        if event is Event.HEARTBEAT_SENT:
            assert m.sends_heartbeats, "a heartbeat in a state that sends none"
            self.heartbeat()
        effects = m.feed(event, epoch=epoch, assignment=assignment, token=token)
        if before is State.FATAL:
            if event is Event.SUBSCRIBE:
                self.failed = False  # a fresh join
            else:
                assert m.state is State.FATAL, "FATAL ends only with a new subscription"
        for e in effects:
            self.perform(e)
        self.check()
        return effects

    def heartbeat(self) -> None:
        m = self.machine
        req = self.builder.build(
            member_id=m.member_id,
            epoch=m.epoch,
            subscription=SUB,
            assignment=m.current,
            joining=m.joining,
            leaving=m.leaving,
        )
        broker_accepts(req)
        if m.joining:
            assert req.topic_partitions == [], "joining: owns nothing"
        if m.leaving:
            assert req.member_epoch == (LEAVE_STATIC_EPOCH if self.static else LEAVE_EPOCH)
        else:
            assert req.member_epoch >= 0
        self.sent.append(req)

    def perform(self, e: Effect) -> None:
        if e.kind is EffectKind.REVOKE_STEP:
            assert self.live is None or not self.machine.reconciler.is_live(self.live), (
                "two reconciliations at once"
            )
            assert e.partitions <= self.held, "revoking what is not held"
            self.live, self.revoked_done = e.token, False
        elif e.kind is EffectKind.ASSIGN_STEP:
            assert e.token == self.live and self.revoked_done, "assign before its revoke"
            assert e.added == e.partitions - self.held
            self.held = e.partitions
        elif e.kind in (EffectKind.LOSE, EffectKind.REVOKE):
            assert e.partitions and e.partitions == self.held, "release exactly what is held"
            if e.kind is EffectKind.REVOKE:
                assert e.epoch > 0, "revoke (with a commit) only as a member"
            self.held = frozenset()
            self.releasing = True
        elif e.kind is EffectKind.FAIL:
            self.failed = True
        elif e.kind is EffectKind.LEAVE_DONE:
            self.left += 1
        elif e.kind is EffectKind.RESET_HEARTBEAT:
            self.builder.reset()

    def check(self) -> None:
        m = self.machine
        assert self.held == m.owned
        assert m.sends_heartbeats == (m.state in HEARTBEATING)
        assert m.heartbeat_now == (m.state in HEARTBEAT_NOW)
        if m.state is State.JOINING:
            # epoch 0 until an answer gives one (Java stays JOINING until an assignment)
            assert m.epoch >= 0 and not m.owned
        if m.state is State.LEAVING:
            assert m.epoch in (LEAVE_EPOCH, LEAVE_STATIC_EPOCH)
        if m.state is State.STABLE:
            assert m.reconciler.reconciled
        if m.state in (State.UNSUBSCRIBED, State.FENCED, State.STALE):
            assert not m.owned
        if m.state is not State.RECONCILING:
            assert m.reconciler.in_progress is None

    # -- driver steps ---------------------------------------------------------------

    def revoked(self) -> list[Effect]:
        self.revoked_done = True
        return self.feed(Event.REVOKED, token=self.live)

    def reconciled(self) -> list[Effect]:
        return self.feed(Event.RECONCILED, token=self.live)

    def released(self) -> list[Effect]:
        self.releasing = False
        return self.feed(Event.RELEASED)

    def answer(self, epoch: int, assignment: Mapping[UUID, Iterable[int]] | None) -> None:
        self.feed(Event.HEARTBEAT_OK, epoch=epoch, assignment=assignment)


def kinds(effects: list[Effect]) -> list[EffectKind]:
    return [e.kind for e in effects]


def stable(h: Harness | None = None, assignment: dict[UUID, list[int]] | None = None) -> Harness:
    """A member in STABLE owning ``assignment`` (a-0, a-1 by default)."""
    h = h or Harness()
    h.feed(Event.SUBSCRIBE)
    h.feed(Event.HEARTBEAT_SENT)
    h.answer(1, assignment if assignment is not None else {A: [0, 1]})
    h.revoked()
    h.reconciled()
    assert h.state is State.ACKNOWLEDGING
    h.feed(Event.HEARTBEAT_SENT)
    assert h.state is State.STABLE
    return h


# -- the table --------------------------------------------------------------------------


def test_every_state_input_pair_is_defined_or_explicitly_ignored() -> None:
    for state in State:
        for inp in Input:
            transition = TABLE[(state, inp)]
            if is_ignored(state, inp):
                assert transition == Transition(state), (state, inp)
    assert len(TABLE) == len(State) * len(Input)


def test_fatal_only_answers_a_leave_and_a_new_subscription() -> None:
    for inp in Input:
        t = TABLE[(State.FATAL, inp)]
        assert t.next is (State.JOINING if inp is Input.SUBSCRIBE else State.FATAL)
        assert is_ignored(State.FATAL, inp) == (inp not in (Input.LEAVE, Input.SUBSCRIBE))


def test_states_out_of_the_group_ignore_heartbeat_answers() -> None:
    answers = (Input.HB_EPOCH, Input.HB_SAME, Input.HB_NEW, Input.HB_LEFT)
    for state in (State.UNSUBSCRIBED, State.FENCED, State.STALE, State.FATAL, State.LEAVING):
        for inp in answers:
            assert is_ignored(state, inp), (state, inp)


def test_every_event_classifies_in_every_state() -> None:
    for state in State:
        for event in Event:
            h = reach(state)
            inp = h.machine.classify(event, **event_data(h, event))
            assert isinstance(inp, Input)


def reach(state: State, static: bool = False) -> Harness:
    """A harness in ``state``, owning partitions wherever the state allows it."""
    h = Harness(static=static)
    if state is State.UNSUBSCRIBED:
        return h
    h.feed(Event.SUBSCRIBE)
    if state is State.JOINING:
        return h
    h.feed(Event.HEARTBEAT_SENT)
    h.answer(1, {A: [0, 1]})
    if state is State.RECONCILING:
        return h
    h.revoked()
    h.reconciled()
    if state is State.ACKNOWLEDGING:
        return h
    h.feed(Event.HEARTBEAT_SENT)
    if state is State.STABLE:
        return h
    if state is State.FENCED:
        h.feed(Event.FENCED)
    elif state is State.PREPARE_LEAVING:
        h.feed(Event.LEAVE)
    elif state is State.LEAVING:
        h.feed(Event.LEAVE)
        h.released()
    elif state is State.STALE:
        h.feed(Event.POLL_TIMEOUT)
        h.feed(Event.HEARTBEAT_SENT)
    elif state is State.FATAL:
        h.feed(Event.FATAL)
    assert h.state is state
    return h


def event_data(h: Harness, event: Event) -> dict[str, object]:
    if event is Event.HEARTBEAT_OK:
        return {"epoch": 2, "assignment": {A: [1], B: [0]}}
    if event in (Event.REVOKED, Event.RECONCILED, Event.RECONCILE_FAILED):
        return {"token": h.live if h.live is not None else 999}
    return {}


@pytest.mark.parametrize("state", list(State))
@pytest.mark.parametrize("event", list(Event))
def test_each_event_in_each_state_follows_the_table(state: State, event: Event) -> None:
    h = reach(state)
    data = event_data(h, event)
    if event is Event.REVOKED:
        h.revoked_done = True
    inp = h.machine.classify(event, **data)  # type: ignore[arg-type]
    expected = TABLE[(state, inp)]
    if event is Event.HEARTBEAT_SENT and not h.machine.sends_heartbeats:
        h.machine.feed(event)  # the harness refuses to build one; the machine ignores it
        assert h.state is state
        return
    h.feed(event, **data)  # type: ignore[arg-type]
    first = h.machine.history[-1 - _followups(h, state, inp)]
    assert first == (state, inp, expected.next)


def _followups(h: Harness, state: State, inp: Input) -> int:
    """How many history entries the machine's own queued events added after ``inp``."""
    entries = h.machine.history
    for back in range(len(entries)):
        if entries[-1 - back][:2] == (state, inp):
            return back
    raise AssertionError((state, inp))


# -- scenarios ------------------------------------------------------------------------


def test_join_reconcile_acknowledge() -> None:
    h = Harness()
    h.feed(Event.SUBSCRIBE)
    assert h.state is State.JOINING and h.machine.heartbeat_now and h.machine.epoch == 0
    h.feed(Event.HEARTBEAT_SENT)
    join = h.sent[-1]
    assert join.member_epoch == 0 and join.subscribed_topic_names == ["a", "b", "c"]
    h.answer(5, {A: [0], B: [1]})
    assert h.state is State.RECONCILING and h.machine.epoch == 5
    assert h.live is not None
    effects = h.revoked()
    (assign,) = effects
    assert assign.kind is EffectKind.ASSIGN_STEP
    assert assign.partitions == assign.added == {TP("a", 0), TP("b", 1)}
    h.reconciled()
    assert h.state is State.ACKNOWLEDGING and h.machine.heartbeat_now
    h.feed(Event.HEARTBEAT_SENT)
    ack = h.sent[-1]
    assert ack.member_epoch == 5
    assert sorted((t.topic_id, t.partitions) for t in ack.topic_partitions) == [
        (A, [0]),
        (B, [1]),
    ]
    assert h.state is State.STABLE and not h.machine.heartbeat_now
    h.feed(Event.HEARTBEAT_SENT)
    assert h.sent[-1].topic_partitions is None, "minimal once acknowledged"


def test_an_empty_first_assignment_is_reconciled_and_acknowledged() -> None:
    h = Harness()
    h.feed(Event.SUBSCRIBE)
    h.answer(1, {})
    assert h.state is State.RECONCILING
    h.revoked()
    h.reconciled()
    h.feed(Event.HEARTBEAT_SENT)
    assert h.sent[-1].topic_partitions == []
    assert h.state is State.STABLE


def test_a_revocation_comes_before_the_assignment() -> None:
    h = stable()
    h.answer(2, {A: [1], B: [0]})
    assert h.state is State.RECONCILING
    assert h.machine.owned == {TP("a", 0), TP("a", 1)}
    (assign,) = h.revoked()
    assert assign.partitions == {TP("a", 1), TP("b", 0)} and assign.added == {TP("b", 0)}


@pytest.mark.parametrize("code", [FencedMemberEpochError.errno, UnknownMemberIdError.errno])
def test_fencing_loses_partitions_and_rejoins_at_epoch_0(code: int) -> None:
    h = stable()
    effects = h.feed(heartbeat_event(code))
    assert h.state is State.FENCED
    assert kinds(effects) == [EffectKind.RESET_HEARTBEAT, EffectKind.LOSE]
    assert effects[1].partitions == {TP("a", 0), TP("a", 1)}
    assert h.machine.epoch == 0 and not h.machine.sends_heartbeats
    h.released()
    assert h.state is State.JOINING and h.machine.epoch == 0
    h.feed(Event.HEARTBEAT_SENT)
    rejoin = h.sent[-1]
    assert rejoin.rebalance_timeout_ms == 1000 and rejoin.topic_partitions == []


def test_fencing_with_nothing_owned_rejoins_at_once() -> None:
    h = stable(assignment={})
    h.feed(Event.FENCED)
    assert h.state is State.JOINING


def test_fencing_mid_reconciliation_abandons_it() -> None:
    h = stable()
    h.answer(2, {B: [0]})
    token = h.live
    assert token is not None and h.machine.is_live(token)
    h.feed(Event.FENCED)
    assert not h.machine.is_live(token)
    h.released()
    h.revoked_done = True
    assert h.feed(Event.REVOKED, token=token) == [], "a late result changes nothing"
    assert h.state is State.JOINING and h.machine.history[-1][1] is Input.STALE_RESULT


def test_a_newer_target_while_reconciling_is_handled_after() -> None:
    h = stable()
    h.answer(2, {A: [0, 1], B: [0]})
    first = h.live
    h.answer(3, {C: [0]})  # arrives mid-reconciliation
    assert h.live == first, "no second reconciliation started"
    h.revoked()
    h.reconciled()
    assert h.state is State.ACKNOWLEDGING
    h.feed(Event.HEARTBEAT_SENT)  # acknowledges the first; the second waits
    assert h.state is State.RECONCILING and h.live != first
    (assign,) = h.revoked()
    assert assign.partitions == {TP("c", 0)}


def test_unknown_topic_ids_wait_for_metadata() -> None:
    h = stable()
    del h.metadata[B]
    effects = h.feed(Event.HEARTBEAT_OK, epoch=2, assignment={A: [0, 1], B: [0]})
    assert kinds(effects) == [EffectKind.REFRESH_METADATA]
    assert h.state is State.ACKNOWLEDGING, "the resolvable part is owned: acknowledged"
    h.feed(Event.HEARTBEAT_SENT)
    assert h.state is State.RECONCILING
    h.metadata[B] = "b"
    effects = h.feed(Event.METADATA_UPDATED)
    assert kinds(effects) == [EffectKind.REVOKE_STEP]
    (assign,) = h.revoked()
    assert assign.added == {TP("b", 0)}


def test_a_failed_listener_leaves_the_reconciliation_to_the_next_poll() -> None:
    h = stable()
    h.answer(2, {B: [0]})
    token = h.live
    h.feed(Event.RECONCILE_FAILED, token=token)
    assert h.state is State.RECONCILING and not h.machine.is_live(token or 0)
    effects = h.feed(Event.POLL)
    assert kinds(effects) == [EffectKind.REVOKE_STEP]


@pytest.mark.parametrize("static", [False, True])
def test_leave_revokes_then_sends_epoch_minus_1_or_minus_2(static: bool) -> None:
    h = stable(Harness(static=static))
    effects = h.feed(Event.LEAVE)
    assert h.state is State.PREPARE_LEAVING
    assert kinds(effects) == [EffectKind.REVOKE] and effects[0].epoch == 1
    assert h.machine.sends_heartbeats, "heartbeats go on while the listener runs"
    h.released()
    assert h.state is State.LEAVING and h.machine.heartbeat_now
    effects = h.feed(Event.HEARTBEAT_SENT)
    assert h.sent[-1].member_epoch == (-2 if static else -1)
    assert h.state is State.UNSUBSCRIBED and kinds(effects) == [EffectKind.LEAVE_DONE]


def test_leave_while_joining_sends_the_leave_at_once() -> None:
    h = Harness()
    h.feed(Event.SUBSCRIBE)
    h.feed(Event.HEARTBEAT_SENT)
    h.feed(Event.LEAVE)
    assert h.state is State.LEAVING


def test_leave_without_a_coordinator_still_ends() -> None:
    h = stable()
    h.feed(Event.LEAVE)
    h.released()
    effects = h.feed(Event.HEARTBEAT_SKIPPED)
    assert h.state is State.UNSUBSCRIBED and kinds(effects) == [EffectKind.LEAVE_DONE]


def test_subscribing_while_leaving_rejoins_once_left() -> None:
    h = stable()
    h.feed(Event.LEAVE)
    h.feed(Event.SUBSCRIBE)
    h.released()
    effects = h.feed(Event.HEARTBEAT_SENT)
    assert EffectKind.LEAVE_DONE in kinds(effects)
    assert h.state is State.JOINING and h.machine.epoch == 0


@pytest.mark.parametrize("poll_first", [False, True])
def test_poll_timeout_leaves_loses_and_rejoins_on_the_next_poll(poll_first: bool) -> None:
    h = stable()
    h.feed(Event.POLL_TIMEOUT)
    assert h.state is State.LEAVING and h.machine.epoch == -1
    effects = h.feed(Event.HEARTBEAT_SENT)
    assert h.sent[-1].member_epoch == -1
    assert h.state is State.STALE and kinds(effects) == [EffectKind.LOSE]
    assert not h.machine.sends_heartbeats
    if poll_first:
        h.feed(Event.POLL)
        assert h.state is State.STALE, "waits for on_partitions_lost to return"
        h.released()
    else:
        h.released()
        assert h.state is State.STALE, "waits for the application to poll"
        h.feed(Event.POLL)
    assert h.state is State.JOINING and h.machine.epoch == 0


def test_a_leave_while_leaving_for_the_poll_timeout_is_a_plain_leave() -> None:
    h = stable()
    h.feed(Event.POLL_TIMEOUT)
    effects = h.feed(Event.LEAVE)
    assert kinds(effects) == [EffectKind.LOSE]
    effects = h.feed(Event.HEARTBEAT_SENT)
    assert h.state is State.UNSUBSCRIBED and kinds(effects) == [EffectKind.LEAVE_DONE]


@pytest.mark.parametrize(
    "error",
    [
        UnreleasedInstanceIdError,
        FencedInstanceIdError,
        GroupMaxSizeReachedError,
        GroupAuthorizationFailedError,
        UnsupportedAssignorError,
        InvalidRegularExpressionError,
        StaleMemberEpochError,  # not a heartbeat error: unexpected, so fatal (as in Java)
    ],
)
def test_fatal_heartbeat_errors_lose_partitions_and_fail(error: type[BrokerResponseError]) -> None:
    h = stable()
    effects = h.feed(heartbeat_event(error.errno))
    assert h.state is State.FATAL
    assert kinds(effects) == [EffectKind.LOSE, EffectKind.FAIL]
    h.feed(Event.POLL)
    assert h.state is State.FATAL
    assert kinds(h.feed(Event.LEAVE)) == [EffectKind.LEAVE_DONE]
    # subscribing again joins afresh: epoch 0, nothing owned
    h.feed(Event.SUBSCRIBE)
    assert h.state is State.JOINING
    assert h.machine.epoch == 0
    assert not h.machine.owned


def test_fatal_while_leaving_ends_the_leave() -> None:
    h = stable()
    h.feed(Event.LEAVE)
    effects = h.feed(Event.FATAL)
    assert kinds(effects) == [EffectKind.LEAVE_DONE, EffectKind.FAIL]


def test_fatal_while_leaving_drops_a_subscribe_made_during_the_leave() -> None:
    # Found by the random-sequence test in CI: the queued join ran after FAIL, so the
    # member was joining while every poll raised the error.
    h = Harness(static=False)
    h.feed(Event.SUBSCRIBE)
    h.feed(Event.LEAVE)
    h.feed(Event.SUBSCRIBE)  # unsubscribe(); subscribe() while the leave is in flight
    effects = h.feed(Event.FATAL)
    assert kinds(effects) == [EffectKind.LEAVE_DONE, EffectKind.FAIL]
    assert h.state is State.FATAL
    h.feed(Event.SUBSCRIBE)  # the application's next subscribe() joins afresh
    assert h.state is State.JOINING


def test_fatal_while_leaving_for_the_poll_timeout_loses_the_partitions() -> None:
    # Found by the random-sequence test in CI: a poll-timeout leave keeps its
    # partitions until the leave is answered; a fatal answer kept them too, and the
    # next subscribe() joined at epoch 0 still owning (and fetching) them.
    h = stable()
    owned = h.machine.owned
    assert owned
    h.feed(Event.POLL_TIMEOUT)
    assert h.state is State.LEAVING and h.machine.owned == owned
    effects = h.feed(Event.FATAL)
    assert kinds(effects) == [EffectKind.LOSE, EffectKind.LEAVE_DONE, EffectKind.FAIL]
    assert effects[0].partitions == owned
    assert h.state is State.FATAL and not h.machine.owned
    h.feed(Event.SUBSCRIBE)
    assert h.state is State.JOINING and h.machine.epoch == 0 and not h.machine.owned


@pytest.mark.parametrize(
    ("error", "effect"),
    [
        (NotCoordinatorError, EffectKind.FIND_COORDINATOR),
        (CoordinatorNotAvailableError, EffectKind.FIND_COORDINATOR),
        (CoordinatorLoadInProgressError, EffectKind.BACKOFF),
    ],
)
def test_coordinator_errors_retry_with_a_full_heartbeat(
    error: type[BrokerResponseError], effect: EffectKind
) -> None:
    h = stable()
    effects = h.feed(heartbeat_event(error.errno))
    assert h.state is State.STABLE
    assert kinds(effects) == [EffectKind.RESET_HEARTBEAT, effect]
    h.feed(Event.HEARTBEAT_SENT)
    full = h.sent[-1]
    assert full.subscribed_topic_names is not None and full.topic_partitions is not None


def test_topic_authorization_is_reported_and_the_member_stays() -> None:
    h = stable()
    effects = h.feed(heartbeat_event(TopicAuthorizationFailedError.errno))
    assert h.state is State.STABLE and EffectKind.REPORT_ERROR in kinds(effects)


def test_a_v0_broker_may_give_the_member_id() -> None:
    h = Harness()
    h.feed(Event.SUBSCRIBE)
    h.machine.feed(Event.HEARTBEAT_OK, epoch=1, member_id="from-broker", assignment=None)
    assert h.machine.member_id == "from-broker" and h.state is State.JOINING


def test_heartbeat_ok_needs_an_epoch_and_results_need_a_token() -> None:
    m = MemberMachine(member_id="m", resolver=NAMES.get)
    with pytest.raises(ValueError):
        m.feed(Event.HEARTBEAT_OK)
    with pytest.raises(ValueError):
        m.feed(Event.RECONCILED)


# -- random sequences ---------------------------------------------------------------

assignments = st.dictionaries(
    st.sampled_from([A, B, C]), st.lists(st.integers(0, 2), max_size=3), max_size=3
)
steps = st.lists(
    st.one_of(
        st.sampled_from(
            [
                "subscribe",
                "leave",
                "poll",
                "poll_timeout",
                "sent",
                "skipped",
                "fenced",
                "fatal",
                "retriable",
                "coordinator_lost",
                "revoked",
                "reconciled",
                "reconcile_failed",
                "released",
                "stale_result",
                "forget_b",
                "learn_b",
                "nonfatal",
            ]
        ),
        # the driver doing its next job: weighted so that sequences get somewhere
        st.just("progress"),
        st.just("progress"),
        st.tuples(st.integers(-1, 6), st.none() | assignments),
    ),
    max_size=80,
)

_PLAIN = {
    "subscribe": Event.SUBSCRIBE,
    "leave": Event.LEAVE,
    "poll": Event.POLL,
    "poll_timeout": Event.POLL_TIMEOUT,
    "skipped": Event.HEARTBEAT_SKIPPED,
    "fenced": Event.FENCED,
    "fatal": Event.FATAL,
    "retriable": Event.RETRIABLE,
    "coordinator_lost": Event.COORDINATOR_LOST,
    "nonfatal": Event.NONFATAL_ERROR,
}


def progress(h: Harness) -> None:
    """The driver's next job: finish a step of the reconciliation or a release, else
    send the heartbeat that is due."""
    m = h.machine
    if h.live is not None and m.is_live(h.live):
        if h.revoked_done:
            h.reconciled()
        else:
            h.revoked()
    elif h.releasing:
        h.released()
    elif m.sends_heartbeats:
        h.feed(Event.HEARTBEAT_SENT)
    elif m.state is State.UNSUBSCRIBED:
        h.feed(Event.SUBSCRIBE)
    else:
        h.feed(Event.POLL)


@settings(max_examples=400, deadline=None)
@given(st.booleans(), steps)
def test_random_event_sequences_keep_every_guarantee(static: bool, seq: list[object]) -> None:
    h = Harness(static=static)
    for step in seq:
        m = h.machine
        if isinstance(step, tuple):
            epoch, assignment = step
            if m.sends_heartbeats:  # answers only come to heartbeats
                h.answer(epoch, assignment)
        elif step == "progress":
            progress(h)
        elif step in _PLAIN:
            h.feed(_PLAIN[step])
        elif step == "sent":
            if m.sends_heartbeats:
                h.feed(Event.HEARTBEAT_SENT)
        elif step == "revoked":
            if h.live is not None and m.is_live(h.live) and not h.revoked_done:
                h.revoked()
        elif step == "reconciled":
            if h.live is not None and m.is_live(h.live) and h.revoked_done:
                h.reconciled()
        elif step == "reconcile_failed":
            if h.live is not None and m.is_live(h.live):
                h.feed(Event.RECONCILE_FAILED, token=h.live)
        elif step == "stale_result":
            before = m.state
            assert h.feed(Event.RECONCILED, token=-5) == []
            assert m.state is before
        elif step == "released":
            if h.releasing:
                h.released()
        elif step == "forget_b":
            h.metadata.pop(B, None)
        elif step == "learn_b":
            h.metadata[B] = "b"
            h.feed(Event.METADATA_UPDATED)
        if h.failed:
            assert h.state is State.FATAL
