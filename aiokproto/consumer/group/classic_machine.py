"""The group membership state machine (classic protocol), sans-I/O: one ``TABLE`` of
(state, input) to (next state, actions); ``GroupMachine`` turns actions into effects.

``TABLE`` maps every (state, input) pair to (next state, actions); that one table is
the whole behaviour. ``GroupMachine`` keeps the member's data (member id, generation,
owned partitions) and turns the table's actions into ``Effect`` objects that the
coordinator task (``classic_driver.py``) performs in order: send a request, call the
rebalance listener, hand the assignment to the consumer. Results come back as inputs.

Inputs are split by origin so a late answer cannot be mistaken for a current one:
``JOIN_*`` and ``SYNC_*`` are answers to the one JoinGroup/SyncGroup the task is
awaiting; ``HEARTBEAT_OK``, ``REBALANCING``, ``UNKNOWN_MEMBER``,
``ILLEGAL_GENERATION`` and ``COORDINATOR_LOST`` come from heartbeats and commits of
the current generation (the task drops those of older generations before feeding).

A member that must give partitions back before joining (eager protocol, or a
cooperative member that lost some) goes through PREPARING: its generation is still
valid there, so heartbeats go on and a commit from the rebalance listener is accepted;
the task feeds PREPARED once the revocation is done, and only then is the JoinGroup
sent.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from aiokproto.consumer.group.table import Transition, complete_table
from aiokproto.structs import TopicPartition


class State(enum.Enum):
    UNJOINED = "unjoined"  # not a member: not subscribed yet, left, or removed
    JOINING = "joining"  # one JoinGroup in flight
    SYNCING = "syncing"  # one SyncGroup in flight
    STABLE = "stable"  # assignment applied; heartbeats run
    # giving partitions back before a JoinGroup (eager revoke, commit, listener): the
    # generation is still valid, so heartbeats go on and commits are accepted
    PREPARING = "preparing"
    FAILED = "failed"  # a fatal error; a new subscription (JOIN_NEEDED) starts over
    CLOSED = "closed"  # final


class Input(enum.Enum):
    # from the user / consumer
    JOIN_NEEDED = "join_needed"  # subscribed, subscription or metadata changed, poll resumed
    UNSUBSCRIBED = "unsubscribed"
    POLL_TIMEOUT = "poll_timeout"  # max_poll_interval_ms passed without a poll
    CLOSE = "close"
    # from the task: the revocation before a join is done; send the JoinGroup
    PREPARED = "prepared"
    # JoinGroup answers
    JOINED = "joined"  # carries member_id, generation
    MEMBER_ID_REQUIRED = "member_id_required"  # carries member_id
    JOIN_UNKNOWN_MEMBER = "join_unknown_member"
    JOIN_RETRY = "join_retry"  # retriable error (REBALANCE_IN_PROGRESS, timeouts...)
    JOIN_COORDINATOR_LOST = "join_coordinator_lost"
    # SyncGroup answers
    SYNCED = "synced"  # carries assignment
    SYNCED_REJOIN = "synced_rejoin"  # derived from SYNCED by the machine: rejoin at once
    SYNC_REJOIN = "sync_rejoin"  # REBALANCE_IN_PROGRESS or a retriable error
    SYNC_UNKNOWN_MEMBER = "sync_unknown_member"
    SYNC_ILLEGAL_GENERATION = "sync_illegal_generation"
    SYNC_COORDINATOR_LOST = "sync_coordinator_lost"
    # heartbeats and commits of the current generation
    HEARTBEAT_OK = "heartbeat_ok"
    REBALANCING = "rebalancing"
    UNKNOWN_MEMBER = "unknown_member"
    ILLEGAL_GENERATION = "illegal_generation"
    COORDINATOR_LOST = "coordinator_lost"
    # from anywhere
    FATAL = "fatal"  # fenced instance, authorization, invalid config...


JOIN_ANSWERS = frozenset(
    {
        Input.JOINED,
        Input.MEMBER_ID_REQUIRED,
        Input.JOIN_UNKNOWN_MEMBER,
        Input.JOIN_RETRY,
        Input.JOIN_COORDINATOR_LOST,
    }
)
SYNC_ANSWERS = frozenset(
    {
        Input.SYNCED,
        Input.SYNCED_REJOIN,
        Input.SYNC_REJOIN,
        Input.SYNC_UNKNOWN_MEMBER,
        Input.SYNC_ILLEGAL_GENERATION,
        Input.SYNC_COORDINATOR_LOST,
    }
)


class Action(enum.Enum):
    # data-only: applied by the machine, no effect
    REMEMBER_JOIN = "remember_join"  # member id + generation from JOINED
    REMEMBER_MEMBER_ID = "remember_member_id"  # from MEMBER_ID_REQUIRED
    FORGET_MEMBER = "forget_member"  # member id and generation reset
    FORGET_GENERATION = "forget_generation"  # generation reset, member id kept
    MARK_REJOIN = "mark_rejoin"  # rejoin once the rebalance in flight completes
    # partition handling, expanded into REVOKE / LOSE / SET_ASSIGNMENT / ASSIGNED effects
    PREPARE_JOIN = "prepare_join"  # eager: revoke all; invalid generation: lose all
    APPLY_ASSIGNMENT = "apply_assignment"  # revoke what left, set, announce what came
    RELEASE_ALL = "release_all"  # revoke all (lose all if the generation is gone)
    LOSE_ALL = "lose_all"
    # effects performed by the task
    SEND_JOIN = "send_join"
    SEND_SYNC = "send_sync"
    SEND_LEAVE = "send_leave"
    FIND_COORDINATOR = "find_coordinator"  # forget the coordinator; look it up again
    BACKOFF = "backoff"  # wait retry_backoff before the next request
    FAIL = "fail"  # record the fatal error for the consumer
    FINISH_PREPARE = "finish_prepare"  # feed PREPARED once the effects before it are done


class EffectKind(enum.Enum):
    REVOKE = "revoke"  # auto-commit (if enabled), then listener.on_partitions_revoked
    LOSE = "lose"  # listener.on_partitions_lost (no commit: someone else owns them)
    SET_ASSIGNMENT = "set_assignment"  # subscription.set_group_assignment(partitions)
    ASSIGNED = "assigned"  # listener.on_partitions_assigned(partitions)
    SEND_JOIN = "send_join"
    SEND_SYNC = "send_sync"
    SEND_LEAVE = "send_leave"  # member_id says who leaves
    FIND_COORDINATOR = "find_coordinator"
    BACKOFF = "backoff"
    FAIL = "fail"
    PREPARED = "prepared"  # the task feeds Input.PREPARED next


@dataclass(frozen=True, slots=True)
class Effect:
    """One thing for the task to do; ``member_id``/``generation`` as of when it was
    decided (a commit before a revoke must use the generation that owned them)."""

    kind: EffectKind
    partitions: frozenset[TopicPartition] = frozenset()
    member_id: str = ""
    generation: int = -1


S, In, A = State, Input, Action

_LEAVE = (A.RELEASE_ALL, A.SEND_LEAVE, A.FORGET_MEMBER)
# revoke (eager) with the generation still valid, then join: heartbeats go on meanwhile
_PREPARE = Transition(S.PREPARING, (A.PREPARE_JOIN, A.FINISH_PREPARE))
_POLL_LEAVE = (A.LOSE_ALL, A.SEND_LEAVE, A.FORGET_MEMBER)
_FATAL = Transition(S.FAILED, (A.LOSE_ALL, A.FAIL))

# Every pair not listed here is a stale or irrelevant input: same state, no actions.
_LISTED: dict[State, dict[Input, Transition[State, Action]]] = {
    S.UNJOINED: {
        In.JOIN_NEEDED: Transition(S.JOINING, (A.PREPARE_JOIN, A.SEND_JOIN)),
        In.CLOSE: Transition(S.CLOSED, (A.RELEASE_ALL,)),
        In.COORDINATOR_LOST: Transition(S.UNJOINED, (A.FIND_COORDINATOR,)),
        In.FATAL: _FATAL,
    },
    S.JOINING: {
        In.JOIN_NEEDED: Transition(S.JOINING, (A.MARK_REJOIN,)),
        In.UNSUBSCRIBED: Transition(S.UNJOINED, _LEAVE),
        In.POLL_TIMEOUT: Transition(S.UNJOINED, _POLL_LEAVE),
        In.CLOSE: Transition(S.CLOSED, _LEAVE),
        In.JOINED: Transition(S.SYNCING, (A.REMEMBER_JOIN, A.SEND_SYNC)),
        In.MEMBER_ID_REQUIRED: Transition(S.JOINING, (A.REMEMBER_MEMBER_ID, A.SEND_JOIN)),
        In.JOIN_UNKNOWN_MEMBER: Transition(
            S.JOINING, (A.FORGET_MEMBER, A.PREPARE_JOIN, A.SEND_JOIN)
        ),
        In.JOIN_RETRY: Transition(S.JOINING, (A.BACKOFF, A.SEND_JOIN)),
        In.JOIN_COORDINATOR_LOST: Transition(
            S.JOINING, (A.FIND_COORDINATOR, A.BACKOFF, A.SEND_JOIN)
        ),
        In.COORDINATOR_LOST: Transition(S.JOINING, (A.FIND_COORDINATOR,)),
        In.FATAL: _FATAL,
    },
    S.SYNCING: {
        In.JOIN_NEEDED: Transition(S.SYNCING, (A.MARK_REJOIN,)),
        In.UNSUBSCRIBED: Transition(S.UNJOINED, _LEAVE),
        In.POLL_TIMEOUT: Transition(S.UNJOINED, _POLL_LEAVE),
        In.CLOSE: Transition(S.CLOSED, _LEAVE),
        In.SYNCED: Transition(S.STABLE, (A.APPLY_ASSIGNMENT,)),
        In.SYNCED_REJOIN: Transition(
            S.PREPARING, (A.APPLY_ASSIGNMENT, A.PREPARE_JOIN, A.FINISH_PREPARE)
        ),
        In.SYNC_REJOIN: Transition(S.JOINING, (A.PREPARE_JOIN, A.SEND_JOIN)),
        In.SYNC_UNKNOWN_MEMBER: Transition(
            S.JOINING, (A.FORGET_MEMBER, A.PREPARE_JOIN, A.SEND_JOIN)
        ),
        In.SYNC_ILLEGAL_GENERATION: Transition(
            S.JOINING, (A.FORGET_GENERATION, A.PREPARE_JOIN, A.SEND_JOIN)
        ),
        In.SYNC_COORDINATOR_LOST: Transition(
            S.JOINING, (A.FIND_COORDINATOR, A.BACKOFF, A.PREPARE_JOIN, A.SEND_JOIN)
        ),
        In.COORDINATOR_LOST: Transition(S.SYNCING, (A.FIND_COORDINATOR,)),
        In.FATAL: _FATAL,
    },
    S.STABLE: {
        In.JOIN_NEEDED: _PREPARE,
        In.UNSUBSCRIBED: Transition(S.UNJOINED, _LEAVE),
        In.POLL_TIMEOUT: Transition(S.UNJOINED, _POLL_LEAVE),
        In.CLOSE: Transition(S.CLOSED, _LEAVE),
        In.HEARTBEAT_OK: Transition(S.STABLE),
        In.REBALANCING: _PREPARE,
        In.UNKNOWN_MEMBER: Transition(S.JOINING, (A.FORGET_MEMBER, A.PREPARE_JOIN, A.SEND_JOIN)),
        In.ILLEGAL_GENERATION: Transition(
            S.JOINING, (A.FORGET_GENERATION, A.PREPARE_JOIN, A.SEND_JOIN)
        ),
        In.COORDINATOR_LOST: Transition(S.STABLE, (A.FIND_COORDINATOR,)),
        In.FATAL: _FATAL,
    },
    S.PREPARING: {
        In.PREPARED: Transition(S.JOINING, (A.SEND_JOIN,)),
        In.UNSUBSCRIBED: Transition(S.UNJOINED, _LEAVE),
        In.POLL_TIMEOUT: Transition(S.UNJOINED, _POLL_LEAVE),
        In.CLOSE: Transition(S.CLOSED, _LEAVE),
        In.UNKNOWN_MEMBER: Transition(S.JOINING, (A.FORGET_MEMBER, A.PREPARE_JOIN, A.SEND_JOIN)),
        In.ILLEGAL_GENERATION: Transition(
            S.JOINING, (A.FORGET_GENERATION, A.PREPARE_JOIN, A.SEND_JOIN)
        ),
        In.COORDINATOR_LOST: Transition(S.PREPARING, (A.FIND_COORDINATOR,)),
        In.FATAL: _FATAL,
    },
    S.FAILED: {
        In.JOIN_NEEDED: Transition(S.JOINING, (A.FORGET_MEMBER, A.PREPARE_JOIN, A.SEND_JOIN)),
        In.CLOSE: Transition(S.CLOSED, (A.RELEASE_ALL,)),
    },
    S.CLOSED: {},
}

#: The complete table: every state x every input.
TABLE: Mapping[tuple[State, Input], Transition[State, Action]] = complete_table(
    _LISTED, State, Input
)


class GroupMachine:
    """The member's state and data; ``feed`` an input, get the effects to perform."""

    def __init__(self, *, cooperative: bool) -> None:
        self.cooperative = cooperative
        self.state = State.UNJOINED
        self.member_id = ""
        self.generation = -1
        self.owned: frozenset[TopicPartition] = frozenset()
        self.rejoin_pending = False
        #: counts fed inputs: effects of a transition are stale once it moves on
        self.transitions = 0
        # Bumped per partition each time it is lost: a commit that waited through a
        # rebalance may be retried only for partitions never lost meanwhile.
        self.loss_count: dict[TopicPartition, int] = {}

    @property
    def generation_valid(self) -> bool:
        return self.generation >= 0 and bool(self.member_id)

    @property
    def heartbeat_allowed(self) -> bool:
        return self.state is State.STABLE or self.state is State.PREPARING

    def transition_for(
        self, inp: Input, assignment: Iterable[TopicPartition] | None
    ) -> Transition[State, Action]:
        if inp is Input.SYNCED and self.state is State.SYNCING:
            new = frozenset(assignment or ())
            # KIP-429: a cooperative member that gave partitions up rejoins at once so
            # the next rebalance can hand them to their new owner.
            if self.rejoin_pending or (self.cooperative and self.owned - new):
                inp = Input.SYNCED_REJOIN
        return TABLE[(self.state, inp)]

    def feed(
        self,
        inp: Input,
        *,
        member_id: str | None = None,
        generation: int | None = None,
        assignment: Iterable[TopicPartition] | None = None,
    ) -> list[Effect]:
        if inp is Input.JOINED and (not member_id or generation is None):
            raise ValueError("JOINED needs member_id and generation")
        if inp is Input.MEMBER_ID_REQUIRED and not member_id:
            raise ValueError("MEMBER_ID_REQUIRED needs the member_id the broker gave")
        transition = self.transition_for(inp, assignment)
        self.transitions += 1
        self.state = transition.next
        effects: list[Effect] = []
        for action in transition.actions:
            self._act(action, effects, member_id, generation, assignment)
        return effects

    def _effect(
        self,
        effects: list[Effect],
        kind: EffectKind,
        partitions: frozenset[TopicPartition] = frozenset(),
    ) -> None:
        effects.append(Effect(kind, partitions, self.member_id, self.generation))

    def _release(self, effects: list[Effect], lose: bool) -> None:
        owned = self.owned
        if not owned:
            return
        if lose:
            for tp in owned:
                self.loss_count[tp] = self.loss_count.get(tp, 0) + 1
        self._effect(effects, EffectKind.LOSE if lose else EffectKind.REVOKE, owned)
        self.owned = frozenset()
        self._effect(effects, EffectKind.SET_ASSIGNMENT)

    def _act(
        self,
        action: Action,
        effects: list[Effect],
        member_id: str | None,
        generation: int | None,
        assignment: Iterable[TopicPartition] | None,
    ) -> None:
        if action is Action.REMEMBER_JOIN:
            assert member_id is not None and generation is not None  # checked in feed
            self.member_id, self.generation = member_id, generation
        elif action is Action.REMEMBER_MEMBER_ID:
            assert member_id is not None
            self.member_id = member_id
        elif action is Action.FORGET_MEMBER:
            self.member_id, self.generation = "", -1
        elif action is Action.FORGET_GENERATION:
            self.generation = -1
        elif action is Action.MARK_REJOIN:
            self.rejoin_pending = True
        elif action is Action.PREPARE_JOIN:
            if not self.generation_valid:
                self._release(effects, lose=True)
            elif not self.cooperative:
                self._release(effects, lose=False)
        elif action is Action.APPLY_ASSIGNMENT:
            new = frozenset(assignment or ())
            revoked = self.owned - new
            added = new - self.owned
            if revoked:
                self._effect(effects, EffectKind.REVOKE, revoked)
            self.owned = new
            self._effect(effects, EffectKind.SET_ASSIGNMENT, new)
            self._effect(effects, EffectKind.ASSIGNED, added)
        elif action is Action.RELEASE_ALL:
            self._release(effects, lose=not self.generation_valid)
        elif action is Action.LOSE_ALL:
            self._release(effects, lose=True)
        elif action is Action.SEND_JOIN:
            self.rejoin_pending = False
            self._effect(effects, EffectKind.SEND_JOIN)
        elif action is Action.SEND_SYNC:
            self._effect(effects, EffectKind.SEND_SYNC)
        elif action is Action.SEND_LEAVE:
            if self.member_id:
                self._effect(effects, EffectKind.SEND_LEAVE)
        elif action is Action.FIND_COORDINATOR:
            self._effect(effects, EffectKind.FIND_COORDINATOR)
        elif action is Action.BACKOFF:
            self._effect(effects, EffectKind.BACKOFF)
        elif action is Action.FAIL:
            self._effect(effects, EffectKind.FAIL)
        elif action is Action.FINISH_PREPARE:
            self._effect(effects, EffectKind.PREPARED)
        else:  # pragma: no cover - every Action is handled above
            raise AssertionError(action)
