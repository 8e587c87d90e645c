"""The classic group member driver (``ClassicGroupDriver``): membership of one consumer
in one classic group. A group task feeds the machine and performs its effects, beside a
heartbeat loop and a watch loop (poll timeout, pattern, partition counts, auto-commit).

Three tasks, all owned here and stopped by ``close()``:

- the group task feeds inputs to the state machine (``classic_machine.py``) one at a time and
  performs the effects it returns, in order: JoinGroup, SyncGroup (running the
  assignor when this member leads), the rebalance listener, the commit before a
  revoke, LeaveGroup. JoinGroup/SyncGroup answers are fed back at once, so there is
  never more than one of them in flight;
- the heartbeat loop, which sends heartbeats while the member is stable (on the
  "group" connection, so a long fetch never delays one) and reports trouble;
- the watch loop (every half second): max_poll_interval_ms, pattern matches,
  partition-count changes seen by the leader, periodic auto-commit.

Heartbeat and commit answers are tagged with the generation they were sent in and
dropped if the member has moved on since.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NoReturn

from aiokproto.cluster.client import ClusterClient
from aiokproto.consumer.group.assignors import (
    Assignor,
    RebalanceProtocol,
    rebalance_protocol,
    resolve_assignors,
)
from aiokproto.consumer.group.classic_machine import Effect, EffectKind, GroupMachine, Input, State
from aiokproto.consumer.group.committer import names
from aiokproto.consumer.group.group_config import GroupConfig
from aiokproto.consumer.group.leader import (
    JoinedMember,
    decode_members,
    perform_assignment,
    subscribed_topics,
)
from aiokproto.consumer.group.member_base import (
    WATCH_TICK_S,
    MemberBase,
    Positions,
    as_kafka_error,
    resolve_queued,
    stop_tasks,
)
from aiokproto.consumer.group.outcomes import (
    COORDINATOR_ERRORS,
    ILLEGAL_GENERATION,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    join_input,
    member_input,
    sync_input,
)
from aiokproto.consumer.group.protocol import decode_assignment
from aiokproto.consumer.group.requests import (
    describe_error,
    heartbeat_request,
    join_request,
    leave_request,
    sync_request,
)
from aiokproto.consumer.subscription import SubscriptionState
from aiokproto.errors import (
    CommitFailedError,
    FencedInstanceIdError,
    KafkaError,
    KafkaProtocolError,
    KafkaTimeoutError,
    RebalanceInProgressError,
    for_code,
)
from aiokproto.protocol.messages.join_group import (
    JoinGroupResponse,
)
from aiokproto.protocol.messages.leave_group import (
    LeaveGroupRequest,
)
from aiokproto.structs import OffsetAndMetadata, TopicPartition

log = logging.getLogger(__name__)

#: JoinGroups in a row without a completed SyncGroup after which rejoins are paced
_PACED_FROM = 5


@dataclass(slots=True)
class _Answer:
    """An input for the machine, with what it carries."""

    input: Input
    member_id: str | None = None
    generation: int | None = None
    assignment: tuple[TopicPartition, ...] | None = None
    error: BaseException | None = None
    tag: int | None = None  # generation it belongs to; None: always current
    done: asyncio.Future[None] | None = None  # resolved once the group task handled it
    # UNSUBSCRIBED: what the final commit before the revoke commits, taken when the
    # consumer unsubscribed (its partitions may have been reassigned by hand since)
    final: Positions | None = None
    seq: int = 0  # JOIN_NEEDED: numbered, so a join sent later answers it too


class ClassicGroupDriver(MemberBase[GroupMachine, Effect]):
    """Owns the group task: FindCoordinator, Join/Sync, heartbeats, auto-commit, leave.

    An async context manager (also ``start()`` / ``close()``).
    """

    _log = log
    _CLOSED_MESSAGE = "the group coordinator is closed"
    _TOOK = "rebalanced and took"
    _CLOSE_IN_TASK_MESSAGE = (
        "ClassicGroupDriver.close() cannot run inside its own group task "
        "(a rebalance listener): it would wait for itself"
    )

    def __init__(
        self, client: ClusterClient, subscription: SubscriptionState, config: GroupConfig
    ) -> None:
        super().__init__(client, subscription, config)
        self._assignors: tuple[Assignor, ...] = resolve_assignors(
            config.partition_assignment_strategy
        )
        self._protocol = rebalance_protocol(self._assignors)
        self._machine = GroupMachine(cooperative=self._protocol is RebalanceProtocol.COOPERATIVE)
        self._inputs: asyncio.Queue[_Answer] = asyncio.Queue()
        self._join_queued = False
        self._join_seq = 0  # JOIN_NEEDED inputs posted
        self._join_seq_sent = 0  # ... of which a JoinGroup sent since covers this many
        self._joined_version = -1
        self._join: JoinGroupResponse | None = None  # the last successful answer
        self._joins_in_a_row = 0  # JoinGroups sent since the last completed SyncGroup
        self._last_join_at = 0.0  # loop time the last JoinGroup was sent
        self._leader_counts: dict[str, int] | None = None
        #: how many times this member ran the assignor as the group's leader
        self.assignments_led = 0
        self._heartbeat_task: asyncio.Task[None] | None = None

    # -- lifecycle ---------------------------------------------------------------------

    def _start_tasks(self, loop: asyncio.AbstractEventLoop, gid: str) -> list[asyncio.Task[None]]:
        self._heartbeat_task = loop.create_task(
            self._heartbeats(), name=f"aiokproto-heartbeat-{gid}"
        )
        # the group task runs the rebalance listeners
        self._listener_task = loop.create_task(self._run(), name=f"aiokproto-group-{gid}")
        return [
            self._listener_task,
            self._heartbeat_task,
            loop.create_task(self._watch(), name=f"aiokproto-group-watch-{gid}"),
        ]

    async def close(self, *, timeout_ms: int | None = None) -> None:
        """Final auto-commit, ``on_partitions_revoked``, LeaveGroup (dynamic members
        only), then stop; all within ``timeout_ms`` (30 s by default). A revocation in
        progress (commit before revoke, the listener) finishes first; heartbeats go on
        until the member has left. Not from a rebalance listener (``Consumer.stop()``
        handles that case)."""
        await super().close(timeout_ms=timeout_ms)

    async def _leave_on_close(self, tasks: list[asyncio.Task[None]], timeout_s: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        heartbeats = self._heartbeat_task
        # A revocation in progress (often a listener committing) is not interrupted:
        # it finishes, within the close timeout, before the group task is stopped.
        await self._until(lambda: not self._in_user_code and self._revoking is None, timeout_s)
        await stop_tasks([t for t in tasks if t is not heartbeats], (asyncio.CancelledError,))
        if self._started:
            async with asyncio.timeout_at(max(deadline, loop.time() + 0.1)):
                await self._process(_Answer(Input.CLOSE))

    def _release_queued(self) -> None:
        # leaves still queued will never run: closing left the group instead
        resolve_queued(self._inputs)

    # -- what the consumer calls -------------------------------------------------------

    @property
    def generation_id(self) -> int:
        return self._machine.generation

    @property
    def state(self) -> State:
        return self._machine.state

    @property
    def rebalance_protocol(self) -> RebalanceProtocol:
        return self._protocol

    @property
    def is_leader(self) -> bool:
        """True while this member leads (runs the assignor for) its generation."""
        join = self._join
        return (
            join is not None
            and self._machine.generation_valid
            and join.generation_id == self._machine.generation
            and join.leader == join.member_id
        )

    def notify_poll(self) -> None:
        """The consumer polled: reset the max_poll_interval_ms clock (and rejoin if
        the member left because it had not polled)."""
        self._last_poll = asyncio.get_running_loop().time()
        if self._poll_expired:
            self._poll_expired = False
            if self._sub.in_group and not self._closed:
                log.info(
                    "group %r: polling again after a poll timeout; rejoining", self.config.group_id
                )
                self._post_join()

    def request_rejoin(self) -> None:
        """The subscription changed: rejoin (or leave when no longer subscribed)."""
        if self._closed:
            return
        if self._sub.in_group:
            self._post_join(force=True)
        else:
            self._post(_Answer(Input.UNSUBSCRIBED))

    async def wait_for_assignment(self, timeout_s: float) -> bool:
        """True once the member is stable with an assignment for the current subscription."""
        if not self._sub.in_group:
            return True
        m = self._machine

        def settled() -> bool:
            if m.state in (State.FAILED, State.CLOSED):
                return True
            return m.state is State.STABLE and self._joined_version == self._sub.version

        await self._until(settled, timeout_s)
        return m.state is State.STABLE and self._joined_version == self._sub.version

    async def commit(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata] | None = None,
        *,
        timeout_ms: int | None = None,
    ) -> None:
        """Commit ``offsets`` (default: every consumed position) synchronously.

        Coordinator moves and retriable errors are retried within the timeout
        (``default_api_timeout_ms``). If the group rebalances meanwhile, the commit
        waits for it and is sent again in the new generation when this member still
        owns every partition and lost none of them in between; otherwise it raises
        ``CommitFailedError``. While partitions are being revoked (the rebalance
        listener runs) their generation is still valid, and the commit uses it; while
        they are being lost (``on_partitions_lost`` runs) a commit naming them raises
        ``CommitFailedError`` at once.

        Without ``offsets``, partitions that the group took from this member while
        records of theirs were handed out and not committed are named in a
        ``CommitFailedError`` (raised after committing what is still owned): those
        records will be consumed again by their new owner.
        """
        await self._commit_consumed(offsets, timeout_ms)

    async def _commit_offsets(
        self, offsets: dict[TopicPartition, OffsetAndMetadata], timeout_ms: int | None
    ) -> None:
        if self._revoking is not None:
            await self._commit_while_revoking(self._revoking, offsets, timeout_ms)
        else:
            await self._commit(offsets, timeout_ms)

    async def _commit(
        self, offsets: dict[TopicPartition, OffsetAndMetadata], timeout_ms: int | None
    ) -> None:
        loop = asyncio.get_running_loop()
        timeout = self._timeout_s(timeout_ms)
        deadline = loop.time() + timeout
        m = self._machine
        losses = {tp: m.loss_count.get(tp, 0) for tp in offsets}
        states = {tp: self._sub.state_of(tp) for tp in offsets}
        backoff = self._offsets.backoff()
        last: BaseException | None = None
        while True:
            self._check_usable()
            if self._revoking is not None:
                # a revocation started while this commit waited: its generation rules
                await self._commit_while_revoking(
                    self._revoking, offsets, int(max(0.0, deadline - loop.time()) * 1000)
                )
                return
            if self._sub.in_group:
                # Held by the consumer, no longer owned by the machine, not being
                # revoked: lost (on_partitions_lost runs). Those positions belong to an
                # ownership that ended; no later generation may carry them, even one
                # that hands the partitions back (Java fails such a commit too).
                held = self._sub.state_of
                lost = sorted(tp for tp in offsets if tp not in m.owned and held(tp) is not None)
                if lost:
                    raise CommitFailedError(
                        f"commit failed: {names(lost)} were lost by this member of group "
                        f"{self.config.group_id!r} (its generation ended: session expired, "
                        "fenced, or max_poll_interval_ms passed); their positions cannot be "
                        "committed in a later generation, so records after the last "
                        "committed offset may be consumed again"
                    )
                if m.state is State.UNJOINED and not self._join_queued:
                    raise self._not_a_member()
                if not self._can_commit_now():
                    await self._until_commit_possible(deadline)
                    continue
                moved = sorted(
                    tp
                    for tp in offsets
                    if tp not in m.owned or m.loss_count.get(tp, 0) != losses[tp]
                )
                if moved:
                    raise CommitFailedError(
                        f"commit failed: {names(moved)} are not assigned to this member of "
                        f"group {self.config.group_id!r} (the group rebalanced and they moved "
                        "or were lost, or they never were); records after the last committed "
                        "offset may be consumed again"
                    )
                generation, member_id = m.generation, m.member_id
            else:
                generation, member_id = -1, ""
            try:
                codes = await self._offsets.commit_once(offsets, generation, member_id, deadline)
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                self._forget_coordinator()
                codes, last = {}, exc
            else:
                failed = {tp: c for tp, c in codes.items() if c}
                if not failed and codes:
                    self._sub.note_committed(offsets, states)
                    return
                last = None
                for code in set(failed.values()):
                    inp = member_input(code)
                    if inp is Input.FATAL:
                        error = describe_error(code, "OffsetCommit", self.config)
                        if code == FencedInstanceIdError.errno:
                            self._post(_Answer(Input.FATAL, error=error, tag=generation))
                        raise error
                    if code in (REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION):
                        if not self._sub.in_group:
                            raise CommitFailedError(
                                f"commit failed: group {self.config.group_id!r} has active "
                                "members, and this consumer is not one of them (manual "
                                "assignment); only a member can commit while it is active"
                            )
                        assert inp is not None
                        self._post(_Answer(inp, tag=generation))
                        # the group moves on (a new generation, or this member out of
                        # it); then ownership is checked again and the commit resent
                        await self._until_generation_moves(generation, deadline)
                    elif code in COORDINATOR_ERRORS:
                        self._forget_coordinator()
                    last = for_code(code)(f"OffsetCommit for group {self.config.group_id!r}")
            await self._commit_backoff(backoff, deadline, timeout, last)

    def _can_commit_now(self) -> bool:
        """The member's generation is valid and the broker accepts commits in it: while
        stable or preparing to rejoin, and (cooperative: it keeps its partitions) while
        joining; the broker's REBALANCE_IN_PROGRESS tells when it must wait instead."""
        m = self._machine
        if not m.generation_valid:
            return False
        if m.state in (State.STABLE, State.PREPARING):
            return True
        return m.cooperative and m.state in (State.JOINING, State.SYNCING)

    def _not_a_member(self) -> CommitFailedError:
        return CommitFailedError(
            f"commit failed: this consumer is not a member of group "
            f"{self.config.group_id!r} now (it left after max_poll_interval_ms without a "
            "poll, or has not joined); poll to rejoin"
        )

    def _wait_limit(self, deadline: float) -> float:
        """How long a commit may wait for the group: its own deadline, and never past
        the poll deadline (the application must poll for the member to stay in)."""
        loop = asyncio.get_running_loop()
        poll_deadline = self._last_poll + self.config.max_poll_interval_ms / 1000
        return max(0.0, min(deadline, poll_deadline) - loop.time())

    async def _until_commit_possible(self, deadline: float) -> None:
        """Wait for the rebalance to let this member commit; raise if it cannot."""
        if self.in_group_task():
            raise RebalanceInProgressError(
                f"commit() from a rebalance listener of group {self.config.group_id!r} "
                "while this member has no generation to commit in (it is rejoining); "
                "commit in on_partitions_revoked, or after the rebalance"
            )
        m = self._machine

        def possible() -> bool:
            return (
                self._can_commit_now()
                or self._revoking is not None
                or m.state in (State.FAILED, State.CLOSED)
                or (m.state is State.UNJOINED and not self._join_queued)
            )

        if not await self._until(possible, self._wait_limit(deadline)):
            self._raise_waited_too_long(deadline)

    async def _until_generation_moves(self, generation: int, deadline: float) -> None:
        m = self._machine
        if self.in_group_task():
            raise CommitFailedError(
                f"commit failed during a rebalance of group {self.config.group_id!r} "
                "(called from a rebalance listener, it cannot wait for the group)"
            )

        def moved() -> bool:
            return (
                m.generation != generation
                or self._revoking is not None
                or m.state in (State.UNJOINED, State.FAILED, State.CLOSED)
            )

        if not await self._until(moved, self._wait_limit(deadline)):
            self._raise_waited_too_long(deadline)

    def _raise_waited_too_long(self, deadline: float) -> NoReturn:
        self._check_usable()
        if asyncio.get_running_loop().time() >= deadline - 0.001:
            raise KafkaTimeoutError(
                f"commit: group {self.config.group_id!r} did not finish rebalancing in "
                f"time (state {self._machine.state.value})"
            )
        raise RebalanceInProgressError(
            f"commit: group {self.config.group_id!r} is still rebalancing and waiting "
            "longer would pass max_poll_interval_ms; poll to let the rebalance complete, "
            "then commit again"
        )

    async def _commit_while_revoking(
        self,
        revoke: Effect,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        timeout_ms: int | None,
    ) -> None:
        """A commit while ``revoke`` runs (from the listener, or concurrently): sent in
        the generation that still owns the partitions; the group cannot be waited for
        (the rebalance waits for this), so a generation error is final."""
        if self._fatal is not None:
            raise self._fatal
        m = self._machine
        still_owned = m.owned if m.generation == revoke.generation else frozenset()
        allowed = revoke.partitions | still_owned
        moved = sorted(tp for tp in offsets if tp not in allowed)
        if moved:
            raise CommitFailedError(
                f"commit failed: {names(moved)} are not assigned to this member of group "
                f"{self.config.group_id!r} (a rebalance is giving partitions back now)"
            )
        states = {tp: self._sub.state_of(tp) for tp in offsets}
        loop = asyncio.get_running_loop()
        timeout = self._timeout_s(timeout_ms)
        deadline = loop.time() + timeout
        backoff = self._offsets.backoff()
        while True:
            try:
                codes = await self._offsets.commit_once(
                    offsets, revoke.generation, revoke.member_id, deadline
                )
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                self._forget_coordinator()
                last: BaseException = exc
            else:
                failed = {tp: c for tp, c in codes.items() if c}
                if not failed and codes:
                    self._sub.note_committed(offsets, states)
                    return
                code = next(iter(failed.values()), 0)
                if code in (REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION):
                    raise CommitFailedError(
                        f"commit failed during the rebalance of group "
                        f"{self.config.group_id!r}: the broker answered "
                        f"{for_code(code).__name__}; the partitions being revoked may be "
                        "consumed again from their last committed offset"
                    )
                error = for_code(code)(f"OffsetCommit for group {self.config.group_id!r}")
                if not error.retriable and code not in COORDINATOR_ERRORS:
                    raise error
                if code in COORDINATOR_ERRORS:
                    self._forget_coordinator()
                last = error
            await self._commit_backoff(backoff, deadline, timeout, last)

    async def _leave_from_listener(self) -> None:
        # the group task is busy running the listener, so the leave happens here and
        # now (what remained of that rebalance is dropped)
        await self._process(_Answer(Input.UNSUBSCRIBED))

    def _post_leave(self, done: asyncio.Future[None], final: Positions) -> None:
        self._post(_Answer(Input.UNSUBSCRIBED, done=done, final=final))

    # -- internals: queue ---------------------------------------------------------------

    def _post(self, answer: _Answer) -> None:
        if answer.input is Input.JOIN_NEEDED:
            self._join_queued = True
            self._join_seq += 1
            answer.seq = self._join_seq
        self._inputs.put_nowait(answer)

    def _post_join(self, *, force: bool = False) -> None:
        # One queued JOIN_NEEDED is enough unless the subscription itself changed.
        if force or not self._join_queued:
            self._post(_Answer(Input.JOIN_NEEDED))

    # -- the group task ----------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            answer = await self._inputs.get()
            if answer.input is Input.JOIN_NEEDED:
                self._join_queued = False
            # dropped: answers about a generation this member has left, and join
            # requests that a JoinGroup sent after them already carried out
            stale = (answer.tag is not None and answer.tag != self._machine.generation) or (
                answer.input is Input.JOIN_NEEDED
                and answer.seq <= self._join_seq_sent
                and self._machine.state is State.STABLE
            )
            self._final = answer.final
            try:
                if not stale:
                    await self._process(answer)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a bug or an unexpected answer: surface it
                log.exception("group %r: the group task failed", self.config.group_id)
                error = as_kafka_error(exc, "group task")
                try:
                    await self._process(_Answer(Input.FATAL, error=error))
                except Exception:
                    log.exception("group %r: failing the group failed", self.config.group_id)
                    self._fatal = error
                    self._errors.append(error)
            finally:
                self._final = None
                if answer.done is not None and not answer.done.done():
                    answer.done.set_result(None)

    async def _process(self, first: _Answer) -> None:
        queue = [first]
        while queue:
            answer = queue.pop(0)
            if answer.input is Input.FATAL:
                self._fatal = answer.error or KafkaError("fatal group error")
            before = self._machine.state
            effects = self._machine.feed(
                answer.input,
                member_id=answer.member_id,
                generation=answer.generation,
                assignment=answer.assignment,
            )
            if before is State.FAILED and self._machine.state is not State.FAILED:
                self._fatal = None  # a new subscription starts over
            self._notify()
            fed = self._machine.transitions
            for effect in effects:
                if self._machine.transitions != fed:
                    # a listener fed the machine itself (unsubscribe() from a
                    # callback): what is left of this transition no longer applies
                    queue.clear()
                    break
                follow = await self._perform(effect)
                if follow is not None:
                    queue.append(follow)
            self._notify()
        # a transition cut short before its ASSIGNED step must not hold partitions
        self._sub.release_held()

    async def _perform(self, effect: Effect) -> _Answer | None:
        kind = effect.kind
        # a manual assignment made after unsubscribe() is the user's: the group being
        # left does not touch its partitions
        ours = self._sub.kind != "assigned"
        if kind is EffectKind.REVOKE:
            # first stop handing them out, then commit and tell the listener: nothing
            # of theirs reaches the application after the commit that covers it
            if ours:
                self._sub.start_revoking(effect.partitions)
            self._revoking = effect
            self._notify()  # heartbeats and waiting commits see the revocation
            try:
                if self._sub.use_stored:  # commit what the listener stores too
                    await self._call_listener("on_partitions_revoked", effect.partitions)
                    await self._commit_before_revoke(effect)
                else:
                    await self._commit_before_revoke(effect)
                    await self._call_listener("on_partitions_revoked", effect.partitions)
            finally:
                self._revoking = None
                self._notify()
        elif kind is EffectKind.LOSE:
            log.info("group %r: lost %s", self.config.group_id, names(sorted(effect.partitions)))
            if ours:
                self._sub.start_revoking(effect.partitions)  # someone else owns them already
            await self._call_listener("on_partitions_lost", effect.partitions)
        elif kind is EffectKind.PREPARED:
            return _Answer(Input.PREPARED)
        elif kind is EffectKind.SET_ASSIGNMENT:
            # new partitions wait for on_partitions_assigned (it may seek): none of
            # their records is fetched or handed out, nor a position looked up, before
            self._sub.set_group_assignment(effect.partitions, hold=self._sub.listener is not None)
        elif kind is EffectKind.ASSIGNED:
            try:
                await self._call_listener("on_partitions_assigned", effect.partitions)
            finally:
                self._sub.release_held()
            if self._metrics is not None:
                self._metrics.rebalance_done()
        elif kind is EffectKind.SEND_JOIN:
            if self._metrics is not None:
                self._metrics.rebalance_started()
            return await self._join_group()
        elif kind is EffectKind.SEND_SYNC:
            return await self._sync_group()
        elif kind is EffectKind.SEND_LEAVE:
            self._joins_in_a_row = 0  # a later join starts a new count
            await self._leave_group(effect.member_id)
        elif kind is EffectKind.FIND_COORDINATOR:
            self._forget_coordinator()
        elif kind is EffectKind.BACKOFF:
            loop = asyncio.get_running_loop()
            self._backoff.failed(loop.time())
            await asyncio.sleep(max(0.0, self._backoff.not_before - loop.time()))
        elif kind is EffectKind.FAIL:
            error = self._fatal or KafkaError("fatal group error")
            log.error("group %r: %s", self.config.group_id, error)
            self._errors.append(error)
        return None

    # -- coordinator ---------------------------------------------------------------------

    async def _coordinator(self) -> int:
        return await self._offsets.coordinator()

    def _forget_coordinator(self) -> None:
        self._offsets.forget_coordinator()

    def _failed(self, exc: KafkaError, retry: Input, what: str) -> _Answer:
        """A request that did not get an answer: retry if retriable, else fatal."""
        if exc.retriable:
            self._trouble(
                f"group {self.config.group_id!r}: {what} failed ({exc}); retrying",
                kind="unreachable",
            )
            return _Answer(retry)
        return _Answer(Input.FATAL, error=exc)

    # -- join and sync ---------------------------------------------------------------------

    def _rebalance_timeout_ms(self) -> int:
        return self.config.effective_rebalance_timeout_ms

    def _long_timeout_ms(self) -> int:
        # JoinGroup / SyncGroup are held by the broker for up to the rebalance timeout.
        return max(self._client.config.request_timeout_ms, self._rebalance_timeout_ms() + 5_000)

    async def _join_group(self) -> _Answer:
        m, sub, cfg = self._machine, self._sub, self.config
        if sub.kind == "pattern":
            await self._match_pattern(refresh=True)
        topics = frozenset(sub.topics) if sub.in_group else frozenset()
        self._joined_version = sub.version
        self._join_seq_sent = self._join_seq
        self._set_tracked(
            topics | (self._tracked if self._leader_counts is not None else frozenset())
        )
        request = join_request(cfg, self._assignors, topics, m.member_id, m.generation, m.owned)
        self._joins_in_a_row += 1
        self._last_join_at = asyncio.get_running_loop().time()
        try:
            node = await self._coordinator()
            conn = await self._client.connection(node, "group")
            response = await conn.send(request, timeout_ms=self._long_timeout_ms())
        except KafkaError as exc:
            return self._failed(exc, Input.JOIN_COORDINATOR_LOST, "JoinGroup")
        code = response.error_code
        inp = join_input(code)
        if (inp is Input.JOINED and (not response.member_id or response.generation_id < 0)) or (
            inp is Input.MEMBER_ID_REQUIRED and not response.member_id
        ):
            # a broken answer (no member id, no generation): join again after a back-off
            log.warning(
                "group %r: JoinGroup answer without a member id or generation; rejoining",
                cfg.group_id,
            )
            return _Answer(Input.JOIN_RETRY)
        if inp is Input.JOINED:
            self._backoff.succeeded()
            self._join = response
            leader = response.leader == response.member_id
            log.info(
                "group %r: joined generation %d as %s%s (assignor %s)",
                cfg.group_id,
                response.generation_id,
                response.member_id,
                " (leader)" if leader else "",
                response.protocol_name,
            )
            return _Answer(inp, member_id=response.member_id, generation=response.generation_id)
        if inp is Input.MEMBER_ID_REQUIRED:
            await self._pace_rejoin()
            return _Answer(inp, member_id=response.member_id)
        if inp is Input.FATAL:
            return _Answer(inp, error=describe_error(code, "JoinGroup", self.config))
        log.info("group %r: JoinGroup answered %s", cfg.group_id, for_code(code).__name__)
        if inp is Input.JOIN_UNKNOWN_MEMBER:
            await self._pace_rejoin()
        return _Answer(inp)

    async def _pace_rejoin(self) -> None:
        """Rejoin at once after a join or sync answer that asks for it (as Java does),
        but from the fifth JoinGroup without a completed sync, not sooner than
        retry_backoff_ms after the last one: a broker that kept answering so got about
        9,500 JoinGroups a second at 100% CPU. A real rebalance is not slowed: the
        broker holds each JoinGroup until the group has rejoined."""
        if self._joins_in_a_row >= _PACED_FROM:
            loop = asyncio.get_running_loop()
            wait = self._last_join_at + self._client.config.retry_backoff_ms / 1000 - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)

    def _assignor_named(self, name: str | None) -> Assignor | None:
        for a in self._assignors:
            if a.name == name:
                return a
        return None

    async def _sync_group(self) -> _Answer:
        m, cfg, join = self._machine, self.config, self._join
        assert join is not None  # SEND_SYNC follows JOINED only
        assignor = self._assignor_named(join.protocol_name)
        if assignor is None:
            return _Answer(
                Input.FATAL,
                error=KafkaError(
                    f"group {cfg.group_id!r} chose assignor {join.protocol_name!r}, "
                    "which this consumer does not offer"
                ),
            )
        assignments: dict[str, bytes] = {}
        if join.leader == join.member_id:
            try:
                assignments = await self._lead(join, assignor)
            except Exception as exc:
                error = (
                    exc
                    if isinstance(exc, KafkaError)
                    else KafkaError(f"assignor {assignor.name!r} failed: {exc!r}")
                )
                return _Answer(Input.FATAL, error=error)
        else:
            self._leader_counts = None
        request = sync_request(cfg, m.member_id, m.generation, join.protocol_name, assignments)
        try:
            node = await self._coordinator()
            conn = await self._client.connection(node, "group")
            response = await conn.send(request, timeout_ms=self._long_timeout_ms())
        except KafkaError as exc:
            return self._failed(exc, Input.SYNC_COORDINATOR_LOST, "SyncGroup")
        code = response.error_code
        inp = sync_input(code)
        if inp is Input.SYNCED:
            try:
                assignment = decode_assignment(response.assignment)
            except KafkaProtocolError as exc:
                return _Answer(Input.FATAL, error=exc)
            assignor.on_assignment(assignment, m.generation)
            log.info(
                "group %r: generation %d assigned %s",
                cfg.group_id,
                m.generation,
                names(sorted(assignment.partitions)) or "nothing",
            )
            self._joins_in_a_row = 0
            return _Answer(inp, assignment=assignment.partitions)
        if inp is Input.FATAL:
            return _Answer(inp, error=describe_error(code, "SyncGroup", self.config))
        log.info("group %r: SyncGroup answered %s", cfg.group_id, for_code(code).__name__)
        if inp is not Input.SYNC_COORDINATOR_LOST:  # that one backs off already
            await self._pace_rejoin()
        return _Answer(inp)

    async def _lead(self, join: JoinGroupResponse, assignor: Assignor) -> dict[str, bytes]:
        members = decode_members(
            JoinedMember(x.member_id, x.group_instance_id, x.metadata) for x in join.members
        )
        topics = subscribed_topics(members)
        own = frozenset(self._sub.topics) if self._sub.in_group else frozenset()
        self._set_tracked(own | topics)
        metadata = self._client.metadata
        if any(t not in metadata.snapshot.topics for t in topics):
            with contextlib.suppress(KafkaError, TimeoutError):
                async with asyncio.timeout(self._client.config.request_timeout_ms / 1000):
                    await metadata.refresh()
        counts = self._counts(topics)
        self._leader_counts = counts
        if join.skip_assignment:
            # KIP-814: a static leader that came back keeps the group's assignment.
            return {}
        encoded = perform_assignment(
            assignor, self._protocol, {t: n for t, n in counts.items() if n > 0}, members
        )
        self.assignments_led += 1
        return encoded

    def _counts(self, topics: Iterable[str]) -> dict[str, int]:
        snap = self._client.metadata.snapshot
        return {t: len(snap.partitions_for(t)) for t in topics}

    async def _leave_group(self, member_id: str) -> None:
        cfg = self.config
        if cfg.group_instance_id is not None:
            # KIP-345: a static member keeps its place until session_timeout_ms.
            log.info("group %r: static member %s not leaving", cfg.group_id, cfg.group_instance_id)
            return
        try:
            async with asyncio.timeout(self._client.config.request_timeout_ms / 1000):
                node = await self._coordinator()
                # not the "group" connection: a JoinGroup may still be held there
                conn = await self._client.connection(node, "default")
                version = conn.version_for(LeaveGroupRequest)
                request = leave_request(cfg.group_id, member_id, version)
                response = await conn.send(request, version)
        except (KafkaError, TimeoutError) as exc:
            log.info("group %r: LeaveGroup failed (%s); the session will expire", cfg.group_id, exc)
            return
        codes = [response.error_code] + [x.error_code for x in response.members]
        bad = [c for c in codes if c]
        if bad:
            log.info("group %r: LeaveGroup answered %s", cfg.group_id, for_code(bad[0]).__name__)
        else:
            log.info("group %r: member %s left", cfg.group_id, member_id)

    # -- topics and metadata -------------------------------------------------------------

    async def _match_pattern(self, *, refresh: bool) -> bool:
        """Update the pattern's matches from metadata; True if they changed."""
        pattern = self._sub.pattern
        if pattern is None:
            return False
        metadata = self._client.metadata
        if not self._all_topics:
            self._want_all_topics(True)
            refresh = True
        if refresh:
            with contextlib.suppress(KafkaError, TimeoutError):
                async with asyncio.timeout(self._client.config.request_timeout_ms / 1000):
                    await metadata.refresh()
        exclude = self.config.exclude_internal_topics
        matched = [
            name
            for name, info in metadata.snapshot.topics.items()
            if pattern.fullmatch(name) and not (exclude and info.is_internal)
        ]
        return self._sub.set_matched_topics(matched)

    # -- heartbeats ------------------------------------------------------------------------

    def _heartbeat_identity(self) -> tuple[str, int] | None:
        """(member id, generation) to heartbeat with now, or None for no heartbeats.

        Stable and preparing members heartbeat; so does a member giving partitions
        back while closing or leaving (its machine has moved on, its generation has
        not), so a slow revoke listener does not cost it its membership."""
        m = self._machine
        if m.heartbeat_allowed:
            return m.member_id, m.generation
        revoke = self._revoking
        if revoke is not None and revoke.generation >= 0 and revoke.member_id:
            return revoke.member_id, revoke.generation
        return None

    async def _heartbeats(self) -> None:
        interval = self.config.heartbeat_interval_ms / 1000
        delay = interval
        while True:
            await self._until(lambda: self._heartbeat_identity() is not None)
            identity = self._heartbeat_identity()
            assert identity is not None

            def moved_on(who: tuple[str, int] = identity) -> bool:
                return self._heartbeat_identity() != who

            moved = await self._until(moved_on, delay)
            if moved:
                delay = interval
                continue
            answer = await self._heartbeat_once(*identity)
            delay = interval
            if answer is None:
                delay = self._client.config.retry_backoff_ms / 1000
            elif answer.input is not Input.HEARTBEAT_OK:
                self._post(answer)

    async def _heartbeat_once(self, member_id: str, generation: int) -> _Answer | None:
        cfg = self.config
        request = heartbeat_request(cfg, member_id, generation)
        try:
            node = await self._coordinator()
            conn = await self._client.connection(node, "group")
            sent_at = time.monotonic()
            response = await conn.send(request)
        except KafkaError as exc:
            if exc.retriable:
                self._trouble(
                    f"group {cfg.group_id!r}: heartbeat failed ({exc})", kind="unreachable"
                )
                self._forget_coordinator()
                return None
            return _Answer(Input.FATAL, error=exc, tag=generation)
        self._trouble.recovered()
        if self._metrics is not None:
            self._metrics.heartbeat(time.monotonic() - sent_at)
        inp = member_input(response.error_code)
        if inp is None:
            return None
        if inp is not Input.HEARTBEAT_OK:
            log.info(
                "group %r: heartbeat answered %s",
                cfg.group_id,
                for_code(response.error_code).__name__,
            )
        error = (
            describe_error(response.error_code, "Heartbeat", cfg) if inp is Input.FATAL else None
        )
        return _Answer(inp, error=error, tag=generation)

    # -- the watch loop ---------------------------------------------------------------------

    async def _watch(self) -> None:
        loop = asyncio.get_running_loop()
        m, sub, cfg = self._machine, self._sub, self.config
        while True:
            await asyncio.sleep(WATCH_TICK_S)
            now = loop.time()
            if (
                m.state in (State.JOINING, State.SYNCING, State.STABLE, State.PREPARING)
                and not self._poll_expired
                and now - self._last_poll > cfg.max_poll_interval_ms / 1000
            ):
                self._poll_expired = True
                log.warning(
                    "group %r: no poll for %.1f s (max_poll_interval_ms=%d): leaving the "
                    "group so other members take over; the next poll rejoins. Poll more "
                    "often, process less per poll, or raise max_poll_interval_ms.",
                    cfg.group_id,
                    now - self._last_poll,
                    cfg.max_poll_interval_ms,
                )
                self._post(_Answer(Input.POLL_TIMEOUT))
                continue
            if not sub.in_group or m.state is not State.STABLE or self._join_queued:
                continue
            if sub.kind == "pattern" and await self._match_pattern(refresh=False):
                log.info("group %r: the pattern matches other topics now; rejoining", cfg.group_id)
                self._post_join()
            elif sub.version != self._joined_version:
                self._post_join()
            elif (
                self._leader_counts is not None
                and self._counts(self._leader_counts) != self._leader_counts
            ):
                log.info("group %r: partition counts changed; rebalancing", cfg.group_id)
                self._post_join()
            elif cfg.enable_auto_commit and self._auto_commit_due(now):
                await self._auto_commit()

    async def _auto_commit(self) -> None:
        m = self._machine
        offsets = self._sub.all_consumed()
        if not offsets or offsets == self._last_auto_commit:
            return
        await self._auto_commit_offsets(offsets, m.generation, m.member_id)

    def _auto_commit_answered(self, code: int, generation: int) -> None:
        inp = member_input(code)
        if inp is Input.FATAL and code != FencedInstanceIdError.errno:
            return  # e.g. an offset metadata too large: not the group's problem
        if inp is not None:
            error = describe_error(code, "OffsetCommit", self.config)
            self._post(_Answer(inp, error=error, tag=generation))

    # -- offsets ------------------------------------------------------------------------------

    async def _commit_before_revoke(self, effect: Effect) -> None:
        """Auto-commit what was consumed from partitions about to be revoked."""
        if not self.config.enable_auto_commit or effect.generation < 0:
            return
        plan = self._revoke_commit(effect.partitions, self._final)
        if plan is None:
            return
        offsets, states, deadline = plan
        if await self._offsets.commit_before_revoke(
            offsets, effect.generation, effect.member_id, deadline
        ):
            self._sub.note_committed(offsets, states)
        self._last_auto_commit = {}
