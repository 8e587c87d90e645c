"""The membership state machine: every (state, input) cell, and random input sequences."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiokproto.consumer.group.classic_machine import (
    JOIN_ANSWERS,
    SYNC_ANSWERS,
    TABLE,
    Action,
    Effect,
    EffectKind,
    GroupMachine,
    Input,
    State,
)
from aiokproto.consumer.group.outcomes import join_input, member_input, sync_input
from aiokproto.structs import TopicPartition as TP

P0, P1, P2, P3 = (TP("t", i) for i in range(4))
TERMINAL = (State.CLOSED,)


@dataclass
class Observer:
    """What the outside world (listener, consumer, broker) has been told."""

    reported: set[TP] = field(default_factory=set)
    join_in_flight: bool = False
    last_set: frozenset[TP] | None = None

    def feed(self, m: GroupMachine, inp: Input, **data: object) -> list[Effect]:
        before = m.state
        effects = m.feed(inp, **data)  # type: ignore[arg-type]
        if before is State.JOINING and inp in JOIN_ANSWERS:
            self.join_in_flight = False
        elif before is State.JOINING and m.state is not State.JOINING:
            self.join_in_flight = False  # abandoned by leaving/closing/failing
        released: set[TP] = set()
        for e in effects:
            if e.kind in (EffectKind.REVOKE, EffectKind.LOSE):
                assert e.partitions, "empty revoke/lose is never reported"
                assert e.partitions <= self.reported, "released what was not owned"
                self.reported -= e.partitions
                released |= e.partitions
                if e.kind is EffectKind.REVOKE:
                    assert e.generation >= 0 and e.member_id, (
                        "revoke needs a generation to commit in"
                    )
            elif e.kind is EffectKind.SET_ASSIGNMENT:
                assert not e.partitions & released, "a revoked partition reported assigned"
                self.last_set = e.partitions
            elif e.kind is EffectKind.ASSIGNED:
                assert not e.partitions & self.reported, "assigned twice"
                self.reported |= e.partitions
            elif e.kind is EffectKind.SEND_JOIN:
                assert not self.join_in_flight, "two JoinGroups in flight"
                self.join_in_flight = True
                if not m.cooperative:
                    assert not self.reported, "an eager member joins owning nothing"
            elif e.kind is EffectKind.SEND_LEAVE:
                assert e.member_id
        check(m, self)
        return effects


def check(m: GroupMachine, obs: Observer) -> None:
    assert obs.reported == set(m.owned)
    if obs.last_set is not None:
        assert obs.last_set == m.owned
    assert m.heartbeat_allowed == (m.state in (State.STABLE, State.PREPARING))
    if m.state in (State.STABLE, State.PREPARING):
        assert m.generation_valid
    if m.state in (State.UNJOINED, State.FAILED, State.CLOSED):
        assert not m.owned
    if m.state is State.JOINING:
        assert obs.join_in_flight


def feed_data(inp: Input) -> dict[str, object]:
    if inp is Input.JOINED:
        return {"member_id": "m-2", "generation": 2}
    if inp is Input.MEMBER_ID_REQUIRED:
        return {"member_id": "m-2"}
    if inp in (Input.SYNCED, Input.SYNCED_REJOIN):
        return {"assignment": (P1, P2)}
    return {}


def reach(state: State, cooperative: bool) -> tuple[GroupMachine, Observer]:
    """A machine in ``state``, owning P0/P1 where that state allows ownership."""
    m, obs = GroupMachine(cooperative=cooperative), Observer()
    paths: dict[State, list[tuple[Input, dict[str, object]]]] = {
        State.UNJOINED: [],
        State.JOINING: [(Input.JOIN_NEEDED, {})],
        State.SYNCING: [
            (Input.JOIN_NEEDED, {}),
            (Input.JOINED, {"member_id": "m", "generation": 1}),
        ],
        State.STABLE: [
            (Input.JOIN_NEEDED, {}),
            (Input.JOINED, {"member_id": "m", "generation": 1}),
            (Input.SYNCED, {"assignment": (P0, P1)}),
        ],
        State.PREPARING: [
            (Input.JOIN_NEEDED, {}),
            (Input.JOINED, {"member_id": "m", "generation": 1}),
            (Input.SYNCED, {"assignment": (P0, P1)}),
            (Input.REBALANCING, {}),
        ],
        State.FAILED: [(Input.FATAL, {})],
        State.CLOSED: [(Input.CLOSE, {})],
    }
    for inp, data in paths[state]:
        obs.feed(m, inp, **data)
    if state is State.JOINING and cooperative:
        # a cooperative member rejoining keeps its partitions while it joins
        obs.feed(m, Input.JOINED, member_id="m", generation=1)
        obs.feed(m, Input.SYNCED, assignment=(P0, P1))
        obs.feed(m, Input.REBALANCING)
        obs.feed(m, Input.PREPARED)
        assert m.owned == {P0, P1}
    assert m.state is state
    return m, obs


def test_table_is_complete() -> None:
    assert set(TABLE) == {(s, i) for s in State for i in Input}


@pytest.mark.parametrize("cooperative", [False, True], ids=["eager", "cooperative"])
@pytest.mark.parametrize("inp", list(Input), ids=lambda i: i.value)
@pytest.mark.parametrize("state", list(State), ids=lambda s: s.value)
def test_every_cell(state: State, inp: Input, cooperative: bool) -> None:
    m, obs = reach(state, cooperative)
    transition = m.transition_for(inp, feed_data(inp).get("assignment"))  # type: ignore[arg-type]
    owned_before, member_before = m.owned, m.member_id
    effects = obs.feed(m, inp, **feed_data(inp))
    assert m.state is transition.next
    kinds = [e.kind for e in effects]
    acts = transition.actions
    # requests only where the table says, and at most one per input
    assert kinds.count(EffectKind.SEND_JOIN) == (Action.SEND_JOIN in acts)
    assert kinds.count(EffectKind.SEND_SYNC) == (Action.SEND_SYNC in acts)
    if Action.SEND_JOIN in acts:
        assert m.state is State.JOINING and (state is not State.JOINING or inp in JOIN_ANSWERS)
        assert kinds[-1] is EffectKind.SEND_JOIN, "the join is the last thing done"
    if Action.SEND_SYNC in acts:
        assert (state, inp, m.state) == (State.JOINING, Input.JOINED, State.SYNCING)
    # stale answers change nothing
    if (inp in JOIN_ANSWERS and state is not State.JOINING) or (
        inp in SYNC_ANSWERS and state is not State.SYNCING
    ):
        assert (m.state, effects) == (state, [])
    if inp is Input.HEARTBEAT_OK:
        assert (m.state, effects) == (state, [])
    if state is State.CLOSED:
        assert (m.state, effects) == (State.CLOSED, [])
    elif inp is Input.CLOSE:
        assert m.state is State.CLOSED and not m.owned
    elif inp is Input.FATAL and state is not State.FAILED:
        assert m.state is State.FAILED and EffectKind.FAIL in kinds
    if (
        inp in (Input.UNKNOWN_MEMBER, Input.JOIN_UNKNOWN_MEMBER, Input.SYNC_UNKNOWN_MEMBER)
        and effects
    ):
        assert m.member_id == "" and EffectKind.SEND_JOIN in kinds
        if owned_before:
            assert EffectKind.LOSE in kinds  # owned partitions are lost, not revoked
            assert EffectKind.REVOKE not in kinds
    if inp is Input.POLL_TIMEOUT and state in (State.JOINING, State.SYNCING, State.STABLE):
        assert m.state is State.UNJOINED and not m.member_id
        assert (EffectKind.SEND_LEAVE in kinds) == bool(member_before)
        assert EffectKind.REVOKE not in kinds


def test_eager_rebalance_revokes_everything_before_joining() -> None:
    m, obs = reach(State.STABLE, cooperative=False)
    effects = obs.feed(m, Input.REBALANCING)
    assert [e.kind for e in effects] == [
        EffectKind.REVOKE,
        EffectKind.SET_ASSIGNMENT,
        EffectKind.PREPARED,
    ]
    assert effects[0].partitions == {P0, P1} and effects[0].generation == 1
    # while the revocation runs the generation is valid: heartbeats and commits go on
    assert m.state is State.PREPARING and m.heartbeat_allowed and m.generation_valid
    effects = obs.feed(m, Input.PREPARED)
    assert [e.kind for e in effects] == [EffectKind.SEND_JOIN]
    assert m.state is State.JOINING and not m.heartbeat_allowed


def test_cooperative_revokes_only_moved_and_rejoins() -> None:
    m, obs = reach(State.STABLE, cooperative=True)
    assert [e.kind for e in obs.feed(m, Input.REBALANCING)] == [EffectKind.PREPARED]
    obs.feed(m, Input.PREPARED)
    obs.feed(m, Input.JOINED, member_id="m", generation=2)
    effects = obs.feed(m, Input.SYNCED, assignment=(P1, P2))
    assert [(e.kind, e.partitions) for e in effects] == [
        (EffectKind.REVOKE, frozenset({P0})),
        (EffectKind.SET_ASSIGNMENT, frozenset({P1, P2})),
        (EffectKind.ASSIGNED, frozenset({P2})),
        (EffectKind.PREPARED, frozenset()),
    ]
    assert m.state is State.PREPARING and m.heartbeat_allowed
    assert [e.kind for e in obs.feed(m, Input.PREPARED)] == [EffectKind.SEND_JOIN]
    assert m.state is State.JOINING
    obs.feed(m, Input.JOINED, member_id="m", generation=3)
    effects = obs.feed(m, Input.SYNCED, assignment=(P1, P2, P3))
    assert [e.kind for e in effects] == [EffectKind.SET_ASSIGNMENT, EffectKind.ASSIGNED]
    assert m.heartbeat_allowed  # stable again


def test_member_id_required_then_join() -> None:
    m, obs = reach(State.JOINING, cooperative=False)
    effects = obs.feed(m, Input.MEMBER_ID_REQUIRED, member_id="given")
    assert [e.kind for e in effects] == [EffectKind.SEND_JOIN] and m.member_id == "given"


def test_rejoin_requested_during_rebalance_happens_after_it() -> None:
    m, obs = reach(State.SYNCING, cooperative=True)
    assert obs.feed(m, Input.JOIN_NEEDED) == []
    effects = obs.feed(m, Input.SYNCED, assignment=(P0,))
    assert effects[-1].kind is EffectKind.PREPARED and m.state is State.PREPARING
    assert obs.feed(m, Input.PREPARED)[-1].kind is EffectKind.SEND_JOIN


def test_illegal_generation_keeps_member_id() -> None:
    m, obs = reach(State.STABLE, cooperative=True)
    effects = obs.feed(m, Input.ILLEGAL_GENERATION)
    assert m.member_id == "m" and m.generation == -1
    assert effects[0].kind is EffectKind.LOSE and m.loss_count[P0] == 1


def test_leave_carries_member_id_before_forgetting_it() -> None:
    m, obs = reach(State.STABLE, cooperative=False)
    effects = obs.feed(m, Input.UNSUBSCRIBED)
    leave = [e for e in effects if e.kind is EffectKind.SEND_LEAVE]
    assert leave[0].member_id == "m" and m.member_id == ""
    assert effects[0].kind is EffectKind.REVOKE


def test_failed_member_can_start_over() -> None:
    m, obs = reach(State.FAILED, cooperative=False)
    effects = obs.feed(m, Input.JOIN_NEEDED)
    assert effects[-1].kind is EffectKind.SEND_JOIN and m.state is State.JOINING


def test_data_carrying_inputs_need_their_data() -> None:
    m, _ = reach(State.JOINING, cooperative=False)
    with pytest.raises(ValueError):
        m.feed(Input.JOINED)
    with pytest.raises(ValueError):
        m.feed(Input.MEMBER_ID_REQUIRED)
    assert m.state is State.JOINING  # bad input changed nothing


inputs = st.sampled_from([i for i in Input if i is not Input.SYNCED_REJOIN])
assignments = st.lists(st.sampled_from([P0, P1, P2, P3]), unique=True).map(tuple)


@given(
    st.booleans(),
    st.lists(st.tuples(inputs, st.integers(0, 5), assignments), max_size=60),
)
@settings(max_examples=400, deadline=None)
def test_random_sequences_keep_invariants(
    cooperative: bool, steps: list[tuple[Input, int, tuple[TP, ...]]]
) -> None:
    m, obs = GroupMachine(cooperative=cooperative), Observer()
    for inp, gen, assignment in steps:
        obs.feed(
            m,
            inp,
            member_id=f"m{gen}",
            generation=gen,
            assignment=assignment,
        )


def test_error_codes_map_to_inputs() -> None:
    assert join_input(0) is Input.JOINED
    assert join_input(79) is Input.MEMBER_ID_REQUIRED
    assert join_input(25) is Input.JOIN_UNKNOWN_MEMBER
    assert join_input(16) is Input.JOIN_COORDINATOR_LOST
    assert join_input(27) is Input.JOIN_RETRY
    assert join_input(82) is Input.FATAL  # FENCED_INSTANCE_ID
    assert join_input(30) is Input.FATAL  # GROUP_AUTHORIZATION_FAILED
    assert sync_input(0) is Input.SYNCED
    assert sync_input(22) is Input.SYNC_ILLEGAL_GENERATION
    assert sync_input(27) is Input.SYNC_REJOIN
    assert sync_input(15) is Input.SYNC_COORDINATOR_LOST
    assert member_input(0) is Input.HEARTBEAT_OK
    assert member_input(27) is Input.REBALANCING
    assert member_input(14) is Input.COORDINATOR_LOST
    assert member_input(7) is None  # REQUEST_TIMED_OUT: just retry
    assert member_input(82) is Input.FATAL
