"""Group membership under the consumer group protocol (KIP-848), sans-I/O: one ``TABLE``
of (state, input) to (next state, actions); ``MemberMachine.classify`` turns the
driver's ``Event`` values into inputs; ``heartbeat_event(code)``.

The broker computes assignments; the member heartbeats with ConsumerGroupHeartbeat,
reconciles each target assignment it gets (revoke first, then assign) and acknowledges
it in a later heartbeat. This module is the member's state machine, built like the
classic one (``classic_machine.py``): ``TABLE`` maps every (state, input) pair to (next state,
actions), and that table is the whole behaviour. ``MemberMachine`` keeps the member's
data (member id, epoch, a ``Reconciler`` with target/current/owned assignments) and
turns actions into ``Effect`` objects for the driver task to perform in order.

The driver reports ``Event``s; ``MemberMachine.classify`` turns an event into the
table's ``Input`` using the member's data (a heartbeat answer carrying a new target is
``HB_NEW``, one carrying the reconciled target ``HB_SAME``; a heartbeat sent while
acknowledging is ``ACK_SENT`` or ``ACK_SENT_MORE``; a result of an abandoned
reconciliation is ``STALE_RESULT``...). Some actions queue an event of their own
(``TRY_RECONCILE``, ``RELEASED`` when there was nothing to release, ``SUBSCRIBE`` when
a subscription came while leaving); ``feed`` processes those before it returns.

Epochs (Java's): join with 0; leave with -1, or -2 for a static member (it means "back
within the session timeout"); on FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID the member
loses its partitions (on_partitions_lost) and rejoins at 0. Heartbeats: none in
UNSUBSCRIBED, FENCED, STALE, FATAL; at once (not waiting for the interval) in JOINING,
ACKNOWLEDGING and LEAVING; on the broker's interval otherwise.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from uuid import UUID

from aiokproto.consumer.group.reconcile import (
    LocalAssignment,
    Outcome,
    Reconciler,
    Resolver,
)
from aiokproto.consumer.group.table import Transition, complete_table
from aiokproto.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedMemberEpochError,
    NotCoordinatorError,
    TopicAuthorizationFailedError,
    UnknownMemberIdError,
)
from aiokproto.structs import TopicPartition

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
LEAVE_STATIC_EPOCH = -2


class State(enum.Enum):
    UNSUBSCRIBED = "unsubscribed"  # not in the group (may still commit offsets)
    JOINING = "joining"  # heartbeats with epoch 0 until the broker gives an epoch
    RECONCILING = "reconciling"  # a target differs from what is reconciled
    ACKNOWLEDGING = "acknowledging"  # reconciled; the next heartbeat (sent at once) acks
    STABLE = "stable"  # everything received is reconciled and acknowledged
    FENCED = "fenced"  # losing partitions (on_partitions_lost), then rejoins at 0
    PREPARE_LEAVING = "prepare_leaving"  # releasing partitions (revoke or lost) to leave
    LEAVING = "leaving"  # the next heartbeat (sent at once) has epoch -1/-2
    STALE = "stale"  # left because the poll interval expired; rejoins on the next poll
    FATAL = "fatal"  # failed; answers a leave, and a new subscribe() joins afresh


class Event(enum.Enum):
    """What the driver reports (and a few events actions queue themselves)."""

    SUBSCRIBE = "subscribe"  # the consumer subscribed (topics or a regex)
    LEAVE = "leave"  # unsubscribe() or close()
    POLL = "poll"  # the application polled (resets the poll timer)
    POLL_TIMEOUT = "poll_timeout"  # max_poll_interval_ms passed without a poll
    HEARTBEAT_SENT = "heartbeat_sent"  # a heartbeat request was built and sent
    HEARTBEAT_SKIPPED = "heartbeat_skipped"  # one was due but no coordinator is known
    HEARTBEAT_OK = "heartbeat_ok"  # an answer without error: epoch, maybe an assignment
    FENCED = "fenced"  # FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID
    FATAL = "fatal"  # see ``heartbeat_event``
    RETRIABLE = "retriable"  # COORDINATOR_LOAD_IN_PROGRESS, a lost connection, a timeout
    COORDINATOR_LOST = "coordinator_lost"  # NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE
    NONFATAL_ERROR = "nonfatal_error"  # TOPIC_AUTHORIZATION_FAILED: reported, member stays
    METADATA_UPDATED = "metadata_updated"  # topic ids may resolve now
    TRY_RECONCILE = "try_reconcile"  # queued by the machine itself
    REVOKED = "revoked"  # the revoke step of reconciliation ``token`` is done
    RECONCILED = "reconciled"  # its assign step is done
    RECONCILE_FAILED = "reconcile_failed"  # a listener of it raised
    RELEASED = "released"  # a LOSE/REVOKE effect (lost, fenced, leave) is done


class Input(enum.Enum):
    """The table's inputs: events as classified against the member's data."""

    SUBSCRIBE = "subscribe"
    LEAVE = "leave"
    POLL = "poll"
    REJOIN = "rejoin"  # STALE: polled again and the lost partitions are released
    POLL_TIMEOUT = "poll_timeout"
    HEARTBEAT_SENT = "heartbeat_sent"
    ACK_SENT = "ack_sent"  # the acknowledging heartbeat went out; nothing more to do
    ACK_SENT_MORE = "ack_sent_more"  # it went out; a newer target waits
    LEFT = "left"  # the leave heartbeat went out (or could not: no coordinator)
    LEFT_STALE = "left_stale"  # same, for a leave caused by the poll timeout
    HEARTBEAT_SKIPPED = "heartbeat_skipped"
    HB_EPOCH = "hb_epoch"  # an answer with no assignment (or one the state ignores)
    HB_SAME = "hb_same"  # an answer whose assignment is the one reconciled
    HB_NEW = "hb_new"  # an answer with a new target assignment
    HB_LEFT = "hb_left"  # an answer with a negative epoch (to a leave)
    FENCED = "fenced"
    FATAL = "fatal"
    RETRIABLE = "retriable"
    COORDINATOR_LOST = "coordinator_lost"
    NONFATAL_ERROR = "nonfatal_error"
    METADATA_UPDATED = "metadata_updated"
    RECONCILE_START = "reconcile_start"  # revoke/assign work to do
    RECONCILE_ACK = "reconcile_ack"  # the resolvable part is owned: only acknowledge
    RECONCILE_NOTHING = "reconcile_nothing"  # in progress, done, or waiting for metadata
    REVOKED = "revoked"
    RECONCILED = "reconciled"
    RECONCILE_FAILED = "reconcile_failed"
    STALE_RESULT = "stale_result"  # a result of a reconciliation that was abandoned
    RELEASED = "released"


class Action(enum.Enum):
    # member data
    JOIN = "join"  # epoch 0, forget target and names; flags cleared
    RESET_EPOCH = "reset_epoch"  # epoch 0 (fenced: the broker forgot this member)
    LEAVE_EPOCH = "leave_epoch"  # epoch -1, or -2 for a static member; current NONE
    ADOPT_EPOCH = "adopt_epoch"  # epoch (and member id, v0) from the answer
    TAKE_TARGET = "take_target"  # the answer's assignment becomes the target
    MARK_POLL_EXPIRED = "mark_poll_expired"
    MARK_POLLED = "mark_polled"
    MARK_RELEASED = "mark_released"
    MARK_SUBSCRIBE = "mark_subscribe"  # subscribed while leaving: join once left
    UNMARK_SUBSCRIBE = "unmark_subscribe"
    UNMARK_POLL_EXPIRED = "unmark_poll_expired"  # a stale leave became a plain leave
    # reconciliation
    TRY_RECONCILE = "try_reconcile"  # queue Event.TRY_RECONCILE
    START_RECONCILIATION = "start_reconciliation"  # REVOKE_STEP effect (+ refresh)
    ACKNOWLEDGE = "acknowledge"  # current := resolvable part of the target (+ refresh)
    REFRESH_IF_UNRESOLVED = "refresh_if_unresolved"
    ASSIGN_STEP = "assign_step"  # ASSIGN_STEP effect
    FINISH_RECONCILIATION = "finish_reconciliation"  # current := reconciled part
    FAIL_RECONCILIATION = "fail_reconciliation"  # ends it; retried on a later poll
    # releasing partitions (the driver feeds RELEASED when done)
    LOSE_ALL = "lose_all"  # on_partitions_lost
    RELEASE_ALL = "release_all"  # leaving: revoke if epoch > 0, else lost
    # effects
    RESET_HEARTBEAT = "reset_heartbeat"  # the next heartbeat carries every field
    BACKOFF = "backoff"
    FIND_COORDINATOR = "find_coordinator"
    FAIL = "fail"
    REPORT_ERROR = "report_error"
    LEAVE_DONE = "leave_done"  # completes a leave (queues SUBSCRIBE if marked)


class EffectKind(enum.Enum):
    # reconciliation, in this order; the driver feeds REVOKED / RECONCILED /
    # RECONCILE_FAILED with the effect's token, and checks ``is_live(token)`` between
    # its steps (a fenced member must not apply an assignment)
    REVOKE_STEP = "revoke_step"  # stop fetching revoked, auto-commit, on_partitions_revoked
    ASSIGN_STEP = "assign_step"  # hold `partitions` (`added` held back), on_partitions_assigned
    # releasing everything; the driver feeds RELEASED when done
    LOSE = "lose"  # on_partitions_lost (no commit: others own them now)
    REVOKE = "revoke"  # leaving while a member: auto-commit, on_partitions_revoked
    REFRESH_METADATA = "refresh_metadata"  # some target topic ids are unknown
    RESET_HEARTBEAT = "reset_heartbeat"  # HeartbeatBuilder.reset()
    BACKOFF = "backoff"
    FIND_COORDINATOR = "find_coordinator"
    FAIL = "fail"  # record the fatal error for the consumer
    REPORT_ERROR = "report_error"  # raise it on the next poll; the member stays
    LEAVE_DONE = "leave_done"  # the leave is over (unsubscribe()/close() may return)


@dataclass(frozen=True, slots=True)
class Effect:
    """One thing for the driver to do, with the member epoch as of when it was decided
    (a commit before a revoke carries it)."""

    kind: EffectKind
    partitions: frozenset[TopicPartition] = frozenset()
    added: frozenset[TopicPartition] = frozenset()
    token: int = 0
    epoch: int = 0


S, In, A = State, Input, Action

#: States in which the member is in the group and sends heartbeats.
HEARTBEATING = frozenset(
    {S.JOINING, S.RECONCILING, S.ACKNOWLEDGING, S.STABLE, S.PREPARE_LEAVING, S.LEAVING}
)
#: States whose next heartbeat goes out without waiting for the interval.
HEARTBEAT_NOW = frozenset({S.JOINING, S.ACKNOWLEDGING, S.LEAVING})
#: States that take a new target assignment (Java's ``canHandleNewAssignment``).
TAKES_ASSIGNMENT = frozenset({S.JOINING, S.RECONCILING, S.ACKNOWLEDGING, S.STABLE})

_FENCED = Transition(S.FENCED, (A.RESET_EPOCH, A.RESET_HEARTBEAT, A.LOSE_ALL))
_FATAL = Transition(S.FATAL, (A.LOSE_ALL, A.FAIL))
# A subscribe() made while leaving is dropped: the error must reach the application,
# which joins again with a new subscribe() (FATAL ends only that way). A leave for
# the poll timeout still holds its partitions (lost once the leave is answered): lose
# them now, or a later subscribe() would join owning them.
_FATAL_LEAVING = Transition(S.FATAL, (A.UNMARK_SUBSCRIBE, A.LOSE_ALL, A.LEAVE_DONE, A.FAIL))
_LEAVE = Transition(S.PREPARE_LEAVING, (A.RELEASE_ALL,))
_POLL_TIMEOUT = Transition(S.LEAVING, (A.MARK_POLL_EXPIRED, A.LEAVE_EPOCH, A.RESET_HEARTBEAT))
_JOIN = Transition(S.JOINING, (A.JOIN, A.RESET_HEARTBEAT))
_NEW_TARGET = Transition(S.RECONCILING, (A.ADOPT_EPOCH, A.TAKE_TARGET, A.TRY_RECONCILE))


def _errors(state: State) -> dict[Input, Transition[State, Action]]:
    """Heartbeat errors of a member that heartbeats (stays in ``state``)."""
    return {
        In.RETRIABLE: Transition(state, (A.RESET_HEARTBEAT, A.BACKOFF)),
        In.COORDINATOR_LOST: Transition(state, (A.RESET_HEARTBEAT, A.FIND_COORDINATOR)),
        In.NONFATAL_ERROR: Transition(state, (A.RESET_HEARTBEAT, A.BACKOFF, A.REPORT_ERROR)),
    }


def _member(state: State) -> dict[Input, Transition[State, Action]]:
    """What every member state (JOINING..STABLE) does alike."""
    return {
        In.SUBSCRIBE: Transition(state),  # the next heartbeat carries the change
        In.LEAVE: _LEAVE,
        In.POLL_TIMEOUT: _POLL_TIMEOUT,
        In.HB_EPOCH: Transition(state, (A.ADOPT_EPOCH,)),
        In.HB_NEW: _NEW_TARGET,
        In.FENCED: _FENCED,
        In.FATAL: _FATAL,
        **_errors(state),
    }


# Every (state, input) is either listed here or in _IGNORED (same state, no actions:
# an input the state has no use for, e.g. a late answer); the two never overlap.
_LISTED: dict[State, dict[Input, Transition[State, Action]]] = {
    S.UNSUBSCRIBED: {
        In.SUBSCRIBE: _JOIN,
        In.LEAVE: Transition(S.UNSUBSCRIBED, (A.LEAVE_DONE,)),
        # the answer to the leave heartbeat (Java fails the member on a fatal one)
        In.FATAL: Transition(S.FATAL, (A.FAIL,)),
    },
    S.JOINING: {
        **_member(S.JOINING),
        # Java's rule (a target equal to what is reconciled: STABLE at once); not reached
        # here: a first target always differs from "none", even an empty one
        In.HB_SAME: Transition(S.STABLE, (A.ADOPT_EPOCH, A.TAKE_TARGET)),
    },
    S.RECONCILING: {
        **_member(S.RECONCILING),
        In.HB_SAME: Transition(S.STABLE, (A.ADOPT_EPOCH, A.TAKE_TARGET)),
        In.RECONCILE_START: Transition(S.RECONCILING, (A.START_RECONCILIATION,)),
        In.RECONCILE_ACK: Transition(S.ACKNOWLEDGING, (A.ACKNOWLEDGE,)),
        In.RECONCILE_NOTHING: Transition(S.RECONCILING, (A.REFRESH_IF_UNRESOLVED,)),
        In.REVOKED: Transition(S.RECONCILING, (A.ASSIGN_STEP,)),
        In.RECONCILED: Transition(S.ACKNOWLEDGING, (A.FINISH_RECONCILIATION,)),
        In.RECONCILE_FAILED: Transition(S.RECONCILING, (A.FAIL_RECONCILIATION,)),
    },
    S.ACKNOWLEDGING: {
        **_member(S.ACKNOWLEDGING),
        In.HB_SAME: Transition(S.ACKNOWLEDGING, (A.ADOPT_EPOCH, A.TAKE_TARGET)),
        In.ACK_SENT: Transition(S.STABLE),
        In.ACK_SENT_MORE: Transition(S.RECONCILING, (A.TRY_RECONCILE,)),
    },
    S.STABLE: {
        **_member(S.STABLE),
        In.HB_SAME: Transition(S.STABLE, (A.ADOPT_EPOCH, A.TAKE_TARGET)),
    },
    S.FENCED: {
        In.RELEASED: _JOIN,
        In.LEAVE: Transition(S.UNSUBSCRIBED, (A.LEAVE_DONE,)),
    },
    S.PREPARE_LEAVING: {
        In.SUBSCRIBE: Transition(S.PREPARE_LEAVING, (A.MARK_SUBSCRIBE,)),
        In.LEAVE: Transition(S.PREPARE_LEAVING, (A.UNMARK_SUBSCRIBE,)),
        In.RELEASED: Transition(S.LEAVING, (A.LEAVE_EPOCH,)),
        In.HB_EPOCH: Transition(S.PREPARE_LEAVING, (A.ADOPT_EPOCH,)),
        # out of the group already: no leave heartbeat; the release in progress ends
        In.FENCED: Transition(S.UNSUBSCRIBED, (A.RESET_EPOCH, A.LEAVE_DONE)),
        In.FATAL: _FATAL_LEAVING,
        **_errors(S.PREPARE_LEAVING),
    },
    S.LEAVING: {
        In.SUBSCRIBE: Transition(S.LEAVING, (A.MARK_SUBSCRIBE,)),
        # a leave while leaving for the poll timeout: lose now, end as a plain leave
        In.LEAVE: Transition(S.LEAVING, (A.UNMARK_SUBSCRIBE, A.UNMARK_POLL_EXPIRED, A.LOSE_ALL)),
        In.POLL: Transition(S.LEAVING, (A.MARK_POLLED,)),
        In.LEFT: Transition(S.UNSUBSCRIBED, (A.LEAVE_DONE,)),
        In.LEFT_STALE: Transition(S.STALE, (A.LOSE_ALL,)),
        In.FATAL: _FATAL_LEAVING,
        **_errors(S.LEAVING),
    },
    S.STALE: {
        In.POLL: Transition(S.STALE, (A.MARK_POLLED,)),
        In.RELEASED: Transition(S.STALE, (A.MARK_RELEASED,)),
        In.REJOIN: _JOIN,
        In.LEAVE: Transition(S.UNSUBSCRIBED, (A.LEAVE_DONE,)),
    },
    S.FATAL: {
        In.LEAVE: Transition(S.FATAL, (A.LEAVE_DONE,)),
        # the application subscribed again after the error (e.g. an instance id that
        # a crashed process held until its session expired): a fresh join. Java has no
        # way back from FATAL but a new consumer.
        In.SUBSCRIBE: _JOIN,
    },
}

_IGNORED: dict[State, frozenset[Input]] = {
    state: frozenset(inp for inp in Input if inp not in _LISTED[state]) for state in State
}

#: The complete table: every state x every input.
TABLE: Mapping[tuple[State, Input], Transition[State, Action]] = complete_table(
    _LISTED, State, Input
)


def is_ignored(state: State, inp: Input) -> bool:
    """True if ``inp`` means nothing in ``state`` (stale answer, irrelevant event)."""
    return inp in _IGNORED[state]


class MemberMachine:
    """The member's state and data; ``feed`` an event, get the effects to perform.

    ``resolver`` maps a topic id to its name from the metadata cache (None if unknown);
    ``member_id`` is generated by the client and kept for the process's lifetime.
    """

    def __init__(
        self, *, member_id: str, resolver: Resolver, instance_id: str | None = None
    ) -> None:
        self.member_id = member_id
        self.instance_id = instance_id
        self.state = State.UNSUBSCRIBED
        self.epoch = JOIN_EPOCH
        self.reconciler = Reconciler(resolver)
        self.poll_expired = False
        self.polled = False  # polled since the poll timeout (STALE: rejoin once released)
        self.released = False  # STALE: the lost partitions are released
        self.subscribe_pending = False
        #: counts inputs fed (effects of a transition are stale once it moves on)
        self.transitions = 0
        #: (state, input, next state) of every transition, newest last (bounded)
        self.history: list[tuple[State, Input, State]] = []

    # -- views for the driver -----------------------------------------------------

    @property
    def owned(self) -> frozenset[TopicPartition]:
        return self.reconciler.owned

    @property
    def current(self) -> LocalAssignment:
        return self.reconciler.current

    @property
    def sends_heartbeats(self) -> bool:
        return self.state in HEARTBEATING

    @property
    def heartbeat_now(self) -> bool:
        return self.state in HEARTBEAT_NOW

    @property
    def joining(self) -> bool:
        return self.state is State.JOINING

    @property
    def leaving(self) -> bool:
        return self.state is State.LEAVING

    @property
    def in_group(self) -> bool:
        """A member of the group as the broker sees it (a commit carries ``epoch``)."""
        return self.state in HEARTBEATING and self.epoch > 0

    def is_live(self, token: int) -> bool:
        """True while the reconciliation ``token`` should go on (the driver checks it
        between the commit, the revoke and the assign steps)."""
        return self.state is State.RECONCILING and self.reconciler.is_live(token)

    # -- classification ----------------------------------------------------------

    def classify(
        self,
        event: Event,
        *,
        epoch: int | None = None,
        assignment: Mapping[UUID, Iterable[int]] | None = None,
        token: int | None = None,
    ) -> Input:
        state = self.state
        if event is Event.HEARTBEAT_OK:
            if epoch is None:
                raise ValueError("HEARTBEAT_OK needs the answer's member epoch")
            if epoch < 0:
                return In.HB_LEFT
            if assignment is None or state not in TAKES_ASSIGNMENT:
                return In.HB_EPOCH
            if self.reconciler.receive_would_be_reconciled(assignment):
                return In.HB_SAME
            return In.HB_NEW
        if event in (Event.HEARTBEAT_SENT, Event.HEARTBEAT_SKIPPED, Event.FENCED) and (
            state is State.LEAVING
        ):
            return In.LEFT_STALE if self.poll_expired else In.LEFT
        if event is Event.HEARTBEAT_SENT and state is State.ACKNOWLEDGING:
            return In.ACK_SENT if self.reconciler.reconciled else In.ACK_SENT_MORE
        if state is State.STALE:
            if event is Event.POLL and self.released:
                return In.REJOIN
            if event is Event.RELEASED and self.polled:
                return In.REJOIN
        if event in (Event.TRY_RECONCILE, Event.METADATA_UPDATED, Event.POLL) and (
            state is State.RECONCILING
        ):
            outcome = self.reconciler.outcome()
            if outcome is Outcome.START:
                return In.RECONCILE_START
            if outcome is Outcome.ACKNOWLEDGE:
                return In.RECONCILE_ACK
            return In.RECONCILE_NOTHING
        if event is Event.TRY_RECONCILE:
            return In.RECONCILE_NOTHING
        if event in (Event.REVOKED, Event.RECONCILED, Event.RECONCILE_FAILED):
            if token is None:
                raise ValueError(f"{event.name} needs the reconciliation's token")
            if not self.is_live(token):
                return In.STALE_RESULT
        return _SAME_NAME[event]

    # -- feeding -------------------------------------------------------------------

    def feed(
        self,
        event: Event,
        *,
        epoch: int | None = None,
        member_id: str | None = None,
        assignment: Mapping[UUID, Iterable[int]] | None = None,
        token: int | None = None,
    ) -> list[Effect]:
        """Apply ``event`` (and the events its actions queue); the effects, in order."""
        effects: list[Effect] = []
        queue: list[Event] = [event]
        first = True
        while queue:
            ev = queue.pop(0)
            data_epoch = epoch if first else None
            inp = self.classify(
                ev,
                epoch=data_epoch,
                assignment=assignment if first else None,
                token=token if first else None,
            )
            transition = TABLE[(self.state, inp)]
            before = self.state
            self.transitions += 1
            self.state = transition.next
            self.history.append((before, inp, transition.next))
            del self.history[:-64]
            for action in transition.actions:
                self._act(action, effects, queue, data_epoch, member_id, assignment)
            if before is State.RECONCILING and self.state is not State.RECONCILING:
                self.reconciler.abort()  # its remaining steps no longer count
            first = False
        return effects

    def _effect(
        self,
        effects: list[Effect],
        kind: EffectKind,
        partitions: frozenset[TopicPartition] = frozenset(),
        added: frozenset[TopicPartition] = frozenset(),
        token: int = 0,
    ) -> None:
        effects.append(Effect(kind, partitions, added, token, self.epoch))

    def _act(
        self,
        action: Action,
        effects: list[Effect],
        queue: list[Event],
        epoch: int | None,
        member_id: str | None,
        assignment: Mapping[UUID, Iterable[int]] | None,
    ) -> None:
        rec = self.reconciler
        if action is Action.JOIN:
            self.epoch = JOIN_EPOCH
            rec.clear_targets()
            rec.current = LocalAssignment(-1)
            self.poll_expired = self.polled = self.released = False
            self.subscribe_pending = False
        elif action is Action.RESET_EPOCH:
            self.epoch = JOIN_EPOCH
        elif action is Action.LEAVE_EPOCH:
            self.epoch = LEAVE_STATIC_EPOCH if self.instance_id is not None else LEAVE_EPOCH
            rec.clear_targets()
            rec.current = LocalAssignment(-1)
        elif action is Action.ADOPT_EPOCH:
            assert epoch is not None  # checked by classify
            self.epoch = epoch
            if member_id:
                self.member_id = member_id
        elif action is Action.TAKE_TARGET:
            assert assignment is not None
            rec.receive(assignment)
        elif action is Action.MARK_POLL_EXPIRED:
            self.poll_expired, self.polled, self.released = True, False, False
        elif action is Action.MARK_POLLED:
            self.polled = True
        elif action is Action.MARK_RELEASED:
            self.released = True
        elif action is Action.MARK_SUBSCRIBE:
            self.subscribe_pending = True
        elif action is Action.UNMARK_SUBSCRIBE:
            self.subscribe_pending = False
        elif action is Action.UNMARK_POLL_EXPIRED:
            self.poll_expired = False
        elif action is Action.TRY_RECONCILE:
            queue.append(Event.TRY_RECONCILE)
        elif action is Action.START_RECONCILIATION:
            plan = rec.start()
            if plan.unresolved:
                self._effect(effects, EffectKind.REFRESH_METADATA)
            self._effect(effects, EffectKind.REVOKE_STEP, partitions=plan.revoked, token=plan.token)
        elif action is Action.ACKNOWLEDGE:
            if rec.acknowledge():
                self._effect(effects, EffectKind.REFRESH_METADATA)
        elif action is Action.REFRESH_IF_UNRESOLVED:
            if rec.in_progress is None and rec.unresolved():
                self._effect(effects, EffectKind.REFRESH_METADATA)
        elif action is Action.ASSIGN_STEP:
            plan = rec.assign()
            self._effect(
                effects,
                EffectKind.ASSIGN_STEP,
                partitions=plan.assigned,
                added=plan.added,
                token=plan.token,
            )
        elif action is Action.FINISH_RECONCILIATION:
            rec.finish()
        elif action is Action.FAIL_RECONCILIATION:
            rec.fail()
        elif action is Action.LOSE_ALL or action is Action.RELEASE_ALL:
            owned = rec.release()
            if owned:
                kind = EffectKind.LOSE
                if action is Action.RELEASE_ALL and self.epoch > 0:
                    kind = EffectKind.REVOKE
                self._effect(effects, kind, partitions=owned)
            else:
                queue.append(Event.RELEASED)  # nothing to wait for
        elif action is Action.RESET_HEARTBEAT:
            self._effect(effects, EffectKind.RESET_HEARTBEAT)
        elif action is Action.BACKOFF:
            self._effect(effects, EffectKind.BACKOFF)
        elif action is Action.FIND_COORDINATOR:
            self._effect(effects, EffectKind.FIND_COORDINATOR)
        elif action is Action.FAIL:
            self._effect(effects, EffectKind.FAIL)
        elif action is Action.REPORT_ERROR:
            self._effect(effects, EffectKind.REPORT_ERROR)
        elif action is Action.LEAVE_DONE:
            self._effect(effects, EffectKind.LEAVE_DONE)
            if self.subscribe_pending:
                self.subscribe_pending = False
                queue.append(Event.SUBSCRIBE)
        else:  # pragma: no cover - every Action is handled above
            raise AssertionError(action)


_SAME_NAME: Mapping[Event, Input] = {
    ev: Input[ev.name] for ev in Event if ev.name in Input.__members__
}


_EVENT_FOR_CODE: Mapping[int, Event] = {
    0: Event.HEARTBEAT_OK,
    FencedMemberEpochError.errno: Event.FENCED,
    UnknownMemberIdError.errno: Event.FENCED,
    NotCoordinatorError.errno: Event.COORDINATOR_LOST,
    CoordinatorNotAvailableError.errno: Event.COORDINATOR_LOST,
    CoordinatorLoadInProgressError.errno: Event.RETRIABLE,
    TopicAuthorizationFailedError.errno: Event.NONFATAL_ERROR,
}


def heartbeat_event(code: int) -> Event:
    """The event for a ConsumerGroupHeartbeat answer's error code (Java's handling).

    Every other code is fatal, as in Java: GROUP_AUTHORIZATION_FAILED, INVALID_REQUEST,
    GROUP_MAX_SIZE_REACHED, UNSUPPORTED_ASSIGNOR, UNRELEASED_INSTANCE_ID,
    FENCED_INSTANCE_ID, INVALID_REGULAR_EXPRESSION, UNSUPPORTED_VERSION and codes this
    client does not expect. A request that got no answer (connection lost, timeout) is
    ``Event.RETRIABLE``."""
    return _EVENT_FOR_CODE.get(code, Event.FATAL)
