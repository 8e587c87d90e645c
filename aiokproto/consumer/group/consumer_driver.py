"""The consumer group protocol (KIP-848) driver (``ConsumerGroupDriver``,
``group_protocol="consumer"``): one member in one group. A heartbeat task feeds
``MemberMachine`` and sends ConsumerGroupHeartbeat on the broker's interval, a worker
task runs the revoke/assign/lose steps and the listeners, a watch task the poll timeout,
metadata and auto-commit; it offers the ``Consumer`` the interface of
``ClassicGroupDriver``.

The pure parts decide; this module performs. Three tasks, all owned here and stopped
by ``close()``:

- the driver task owns the ``MemberMachine`` and the heartbeat: it feeds the machine
  one event at a time (the application's, the heartbeat answers, the worker's
  results), sends a ConsumerGroupHeartbeat (``HeartbeatBuilder``) when
  ``HeartbeatTimer`` says one is due, on the coordinator's "group" connection, one
  in flight at a time, and performs the effects that need no waiting at once;
- the worker task performs, in order, the effects that run user code or commit: the
  revoke step (stop handing the partitions out, auto-commit, ``on_partitions_revoked``),
  the assign step (``set_group_assignment`` holding new partitions until
  ``on_partitions_assigned`` returned), a lose (``on_partitions_lost``) and the revoke
  before a leave; it reports ``REVOKED`` / ``RECONCILED`` / ``RELEASED`` back. While a
  listener runs, heartbeats go on (it is not the driver task);
- the watch task (every half second): the poll timeout, metadata changes while topic
  ids are unresolved, periodic auto-commit.

Commits carry the member epoch as the generation (OffsetCommit v9+); a
STALE_MEMBER_EPOCH is re-sent with the newest epoch while the member still owns the
partitions, else it is a ``CommitFailedError``.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from aiokproto.cluster.client import ClusterClient
from aiokproto.consumer.group.committer import names
from aiokproto.consumer.group.consumer_machine import (
    Effect,
    EffectKind,
    Event,
    MemberMachine,
    State,
    heartbeat_event,
)
from aiokproto.consumer.group.group_config import GroupConfig
from aiokproto.consumer.group.heartbeat import (
    HeartbeatBuilder,
    HeartbeatTimer,
    MemberConfig,
    Subscription,
    response_assignment,
)
from aiokproto.consumer.group.member_base import (
    WATCH_TICK_S,
    MemberBase,
    Positions,
    as_kafka_error,
    resolve_queued,
)
from aiokproto.consumer.group.outcomes import COORDINATOR_ERRORS
from aiokproto.consumer.subscription import SubscriptionState
from aiokproto.errors import (
    CommitFailedError,
    FencedMemberEpochError,
    KafkaError,
    KafkaTimeoutError,
    StaleMemberEpochError,
    UnknownMemberIdError,
    for_code,
)
from aiokproto.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from aiokproto.structs import OffsetAndMetadata, TopicPartition

log = logging.getLogger(__name__)

STALE_MEMBER_EPOCH = StaleMemberEpochError.errno
_MEMBER_GONE = frozenset({UnknownMemberIdError.errno, FencedMemberEpochError.errno})

#: effects the worker task performs (they run listeners or commit)
_WORKER_EFFECTS = frozenset(
    {EffectKind.REVOKE_STEP, EffectKind.ASSIGN_STEP, EffectKind.LOSE, EffectKind.REVOKE}
)


def new_member_id() -> str:
    """A member id as Java's client makes one (``Uuid.randomUuid()``: 22 characters of
    URL-safe base64); kept for the consumer's lifetime (ConsumerGroupHeartbeat v1)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@dataclass(slots=True)
class _Item:
    """An event for the machine, with what it carries."""

    event: Event
    epoch: int | None = None
    member_id: str | None = None
    assignment: Mapping[uuid.UUID, Iterable[int]] | None = None
    token: int | None = None
    error: BaseException | None = None
    done: asyncio.Future[None] | None = None  # a leave: resolved at LEAVE_DONE
    final: Positions | None = None  # a leave: what its auto-commit commits


class ConsumerGroupDriver(MemberBase[MemberMachine, Effect]):
    """Membership of one consumer in a ``group_protocol="consumer"`` group; the same
    interface the ``Consumer`` uses of the classic ``ClassicGroupDriver``."""

    _log = log
    _CLOSED_MESSAGE = "the group driver is closed"
    _CLOSE_IN_TASK_MESSAGE = (
        "close() cannot run inside a rebalance listener: it would wait for itself"
    )
    _COMMITS_WHILE_CLOSING_REVOKE = True

    def __init__(
        self, client: ClusterClient, subscription: SubscriptionState, config: GroupConfig
    ) -> None:
        super().__init__(client, subscription, config)
        self._machine = MemberMachine(
            member_id=new_member_id(),
            resolver=self._resolve,
            instance_id=config.group_instance_id,
        )
        self._builder = HeartbeatBuilder(
            MemberConfig(
                group_id=config.group_id,
                rebalance_timeout_ms=config.effective_rebalance_timeout_ms,
                instance_id=config.group_instance_id,
                rack_id=config.client_rack,
                server_assignor=config.group_remote_assignor,
            )
        )
        self._timer = HeartbeatTimer()
        self._events: asyncio.Queue[_Item] = asyncio.Queue()
        self._work: asyncio.Queue[Effect] = asyncio.Queue()
        self._leaves: list[asyncio.Future[None]] = []  # resolved at the next LEAVE_DONE
        # (_all_topics: a regex subscription; metadata covers every topic, so the
        # broker's topic ids resolve whatever the regex matched, later topics included)
        self._metadata_version = -1
        # no heartbeat before this loop time (a back-off after a failure)
        self._retry_at = 0.0
        # machine transitions as of the last answer: a state that heartbeats at once
        # (joining) waits for the interval if that answer changed nothing
        self._answered_at = -1
        self._pending_error: BaseException | None = None  # for FAIL / REPORT_ERROR
        #: assignments reconciled (assign steps done), for tests and diagnostics
        self.reconciliations = 0

    # -- lifecycle ---------------------------------------------------------------------

    def _start_tasks(self, loop: asyncio.AbstractEventLoop, gid: str) -> list[asyncio.Task[None]]:
        # the worker task runs the rebalance listeners
        self._listener_task = loop.create_task(self._worker(), name=f"aiokproto-member-{gid}")
        return [
            loop.create_task(self._run(), name=f"aiokproto-heartbeat-{gid}"),
            self._listener_task,
            loop.create_task(self._watch(), name=f"aiokproto-member-watch-{gid}"),
        ]

    async def close(self, *, timeout_ms: int | None = None) -> None:
        """Final auto-commit, ``on_partitions_revoked``, the leave heartbeat (epoch -1,
        or -2 for a static member), then stop; within ``timeout_ms`` (30 s by
        default). A listener in progress finishes first. Every task is stopped and
        every waiter released, whatever happens to ``close()`` itself."""
        await super().close(timeout_ms=timeout_ms)

    async def _leave_on_close(self, tasks: list[asyncio.Task[None]], timeout_s: float) -> None:
        if self._started and all(not t.done() for t in tasks):
            done = asyncio.get_running_loop().create_future()
            self._post(_Item(Event.LEAVE, done=done))
            async with asyncio.timeout(timeout_s):
                await done

    def _release_queued(self) -> None:
        self._resolve_leaves()
        resolve_queued(self._events)

    # -- what the consumer calls -------------------------------------------------------

    @property
    def generation_id(self) -> int:
        """The member epoch (what OffsetCommit carries as the generation)."""
        return self._machine.epoch

    @property
    def member_epoch(self) -> int:
        return self._machine.epoch

    @property
    def state(self) -> State:
        return self._machine.state

    def notify_poll(self) -> None:
        loop = asyncio.get_running_loop()
        self._last_poll = loop.time()
        if self._closed:
            return
        if self._poll_expired:
            self._poll_expired = False
            self._post(_Item(Event.POLL))
        elif self._machine.state in (State.RECONCILING, State.STALE, State.LEAVING):
            self._post(_Item(Event.POLL))

    def request_rejoin(self) -> None:
        """The subscription changed: join, or send the change with the next heartbeat."""
        if self._closed:
            return
        if self._sub.in_group:
            # a new subscription after a fatal group error joins afresh: from now on,
            # not from when the heartbeat task gets to the event (a task that died
            # stays fatal)
            if self._machine.state is State.FATAL and not any(t.done() for t in self._tasks):
                self._fatal = None
            regex = self._sub.regex is not None
            self._want_all_topics(regex)
            self._set_tracked(frozenset() if regex else frozenset(self._sub.topics))
            self._post(_Item(Event.SUBSCRIBE))
        else:
            self._post(_Item(Event.LEAVE))

    async def wait_for_assignment(self, timeout_s: float) -> bool:
        """True once the member is stable (everything it got is reconciled)."""
        if not self._sub.in_group:
            return True
        m = self._machine
        await self._until(lambda: m.state in (State.STABLE, State.FATAL), timeout_s)
        return m.state is State.STABLE

    def raise_if_failed(self) -> None:
        super().raise_if_failed()
        # out of the group for good until subscribe() again: every poll says so, rather
        # than returning nothing forever
        if self._fatal is not None and self._machine.state is State.FATAL:
            raise self._fatal

    async def _leave_from_listener(self) -> None:
        self._post(_Item(Event.LEAVE))

    def _post_leave(self, done: asyncio.Future[None], final: Positions) -> None:
        self._post(_Item(Event.LEAVE, done=done, final=final))

    async def commit(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata] | None = None,
        *,
        timeout_ms: int | None = None,
    ) -> None:
        """Commit ``offsets`` (default: every consumed position) with the member epoch.

        A member still joining or reconciling is waited for (not from a listener);
        retriable errors and coordinator moves are retried within the timeout; a
        STALE_MEMBER_EPOCH is re-sent with the newest epoch while every partition is
        still owned. Partitions not owned (or taken away meanwhile) are a
        ``CommitFailedError``; without ``offsets``, so are partitions the group took
        after records of theirs were handed out and not committed."""
        await self._commit_consumed(offsets, timeout_ms)

    # -- commits ---------------------------------------------------------------------

    def _allowed(self) -> frozenset[TopicPartition]:
        revoke = self._revoking
        owned = self._machine.owned
        return owned | revoke.partitions if revoke is not None else owned

    async def _commit_offsets(
        self, offsets: dict[TopicPartition, OffsetAndMetadata], timeout_ms: int | None
    ) -> None:
        loop = asyncio.get_running_loop()
        timeout = self._timeout_s(timeout_ms)
        deadline = loop.time() + timeout
        m = self._machine
        states = {tp: self._sub.state_of(tp) for tp in offsets}
        backoff = self._offsets.backoff()
        last: BaseException | None = None
        sent_epoch: int | None = None
        while True:
            self._check_usable()
            if self._sub.in_group or self._revoking is not None:
                if not m.in_group and self._revoking is None:
                    if self.in_group_task() or m.state in (
                        State.UNSUBSCRIBED,
                        State.STALE,
                        State.FATAL,
                    ):
                        raise self._not_a_member()
                    left = max(0.0, deadline - loop.time())
                    if not await self._until(lambda: m.in_group or self._closed, left):
                        raise KafkaTimeoutError(
                            f"commit: this consumer did not join group "
                            f"{self.config.group_id!r} within {timeout:.1f} s"
                        )
                    continue
                # a partition held when the commit began whose state changed since was
                # taken (lost, or revoked) and handed back: its position belongs to the
                # ownership that ended, and must not go out with a later epoch
                held = self._sub.state_of
                moved = sorted(
                    tp
                    for tp in offsets
                    if tp not in self._allowed()
                    or (states[tp] is not None and held(tp) is not states[tp])
                )
                if moved:
                    raise CommitFailedError(
                        f"commit failed: {names(moved)} are not assigned to this member of "
                        f"group {self.config.group_id!r} (the group moved them, or took them "
                        "while this commit waited, or they never were); records after the "
                        "last committed offset may be consumed again"
                    )
                epoch, member_id = m.epoch, m.member_id
            else:
                epoch, member_id = -1, ""
            if (
                sent_epoch is not None
                and epoch == sent_epoch
                and last is not None
                and (isinstance(last, StaleMemberEpochError))
            ):
                # the broker has a newer epoch than this member knows: wait for the
                # heartbeat that brings it
                left = max(0.0, deadline - loop.time())
                stale = sent_epoch
                await self._until(
                    lambda stale=stale: m.epoch != stale or not m.in_group,  # type: ignore[misc]
                    min(left, 1.0),
                )
                if m.epoch == stale and loop.time() >= deadline:
                    raise CommitFailedError(
                        f"commit to group {self.config.group_id!r} failed: the broker "
                        "answered STALE_MEMBER_EPOCH and no newer epoch came in time"
                    )
                continue
            sent_epoch = epoch
            try:
                codes = await self._offsets.commit_once(offsets, epoch, member_id, deadline)
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                self._offsets.forget_coordinator()
                last = exc
            else:
                failed = {tp: c for tp, c in codes.items() if c}
                if not failed and codes:
                    self._sub.note_committed(offsets, states)
                    return
                code = next(iter(failed.values()), 0)
                error = for_code(code)(f"OffsetCommit for group {self.config.group_id!r}")
                if code == STALE_MEMBER_EPOCH:
                    last = error
                    continue  # re-sent with the newest epoch (ownership checked again)
                if code in _MEMBER_GONE:
                    raise CommitFailedError(
                        f"commit failed: group {self.config.group_id!r} answered "
                        f"{type(error).__name__} (this member was fenced or left); records "
                        "after the last committed offset may be consumed again"
                    )
                if code in COORDINATOR_ERRORS:
                    self._offsets.forget_coordinator()
                elif not error.retriable:
                    raise error
                last = error
            await self._commit_backoff(backoff, deadline, timeout, last)

    def _not_a_member(self) -> CommitFailedError:
        return CommitFailedError(
            f"commit failed: this consumer is not a member of group "
            f"{self.config.group_id!r} now (it left after max_poll_interval_ms without a "
            "poll, has not joined, or is rejoining); poll to rejoin"
        )

    async def _commit_before_revoke(
        self, partitions: frozenset[TopicPartition], final: Positions | None
    ) -> None:
        """Auto-commit what was consumed from partitions about to be revoked, with the
        newest epoch (re-sent on STALE_MEMBER_EPOCH within the rebalance timeout)."""
        if not self.config.enable_auto_commit or self._machine.epoch <= 0:
            return
        plan = self._revoke_commit(partitions, final)
        if plan is None:
            return
        offsets, states, deadline = plan
        loop = asyncio.get_running_loop()
        backoff = self._offsets.backoff()
        while True:
            epoch = self._machine.epoch
            if epoch <= 0:
                return
            try:
                codes = await self._offsets.commit_once(
                    offsets, epoch, self._machine.member_id, deadline
                )
                failed = {c for c in codes.values() if c}
            except KafkaError as exc:
                if not exc.retriable or loop.time() >= deadline:
                    log.warning(
                        "group %r: commit before revoke failed: %s", self.config.group_id, exc
                    )
                    return
                self._offsets.forget_coordinator()
                failed = {-1}
            if not failed:
                self._sub.note_committed(offsets, states)
                self._last_auto_commit = {}
                return
            final_codes = [
                c
                for c in failed
                if c not in (-1, STALE_MEMBER_EPOCH)
                and c not in COORDINATOR_ERRORS
                and (c in _MEMBER_GONE or not for_code(c).retriable)
            ]
            if final_codes:
                log.warning(
                    "group %r: commit before revoking %s failed (%s); their records after "
                    "the last commit may be consumed again",
                    self.config.group_id,
                    names(sorted(offsets)),
                    ", ".join(for_code(c).__name__ for c in final_codes),
                )
                return
            if failed & COORDINATOR_ERRORS:
                self._offsets.forget_coordinator()
            backoff.failed(loop.time())
            if loop.time() + backoff.delay_s() >= deadline:
                log.warning("group %r: commit before revoke timed out", self.config.group_id)
                return
            await asyncio.sleep(backoff.delay_s())

    async def _auto_commit(self) -> None:
        m = self._machine
        offsets = self._sub.all_consumed()
        offsets = {tp: o for tp, o in offsets.items() if tp in m.owned}
        if not offsets or offsets == self._last_auto_commit or not m.in_group:
            return
        await self._auto_commit_offsets(offsets, m.epoch, m.member_id)

    def _auto_commit_answered(self, code: int, generation: int) -> None:
        if code in COORDINATOR_ERRORS:
            self._offsets.forget_coordinator()

    # -- internals -----------------------------------------------------------------------

    def _resolve(self, topic_id: uuid.UUID) -> str | None:
        for name, info in self._client.metadata.snapshot.topics.items():
            if info.topic_id == topic_id:
                return name
        return None

    def _subscription(self) -> Subscription:
        sub = self._sub
        if not sub.in_group:
            return Subscription.to_topics(())
        if sub.regex is not None:
            return Subscription.to_regex(sub.regex)
        return Subscription.to_topics(sub.topics)

    def _post(self, item: _Item) -> None:
        self._events.put_nowait(item)

    def _resolve_leaves(self) -> None:
        leaves, self._leaves = self._leaves, []
        for fut in leaves:
            if not fut.done():
                fut.set_result(None)

    # -- the driver task ------------------------------------------------------------------

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        m, timer = self._machine, self._timer
        while True:
            delay: float | None = None
            if m.sends_heartbeats:
                delay = timer.delay_s(loop.time(), heartbeat_now=self._urgent())
                if delay is not None:
                    delay = max(delay, self._retry_at - loop.time())
            item: _Item | None = None
            if not self._events.empty() or delay is None or delay > 0:
                try:
                    async with asyncio.timeout(delay):
                        item = await self._events.get()
                except TimeoutError:
                    item = None
            try:
                if item is not None:
                    self._handle(item)
                elif (
                    m.sends_heartbeats
                    and loop.time() >= self._retry_at
                    and timer.due(loop.time(), heartbeat_now=self._urgent())
                ):
                    await self._heartbeat()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a bug: surface it to the consumer and stop
                log.exception("group %r: the group driver failed", self.config.group_id)
                error = as_kafka_error(exc, "group driver")
                self._fatal = error
                self._errors.append(error)
                self._resolve_leaves()
                self._notify()
                raise

    def _urgent(self) -> bool:
        m = self._machine
        return m.heartbeat_now and m.transitions != self._answered_at

    def _back_off(self) -> None:
        loop = asyncio.get_running_loop()
        self._backoff.failed(loop.time())
        self._retry_at = loop.time() + self._backoff.delay_s()

    def _handle(self, item: _Item) -> None:
        if item.done is not None:
            self._leaves.append(item.done)
        if item.final is not None:
            self._final = item.final
        self._feed(
            item.event,
            epoch=item.epoch,
            member_id=item.member_id,
            assignment=item.assignment,
            token=item.token,
            error=item.error,
        )

    def _feed(
        self,
        event: Event,
        *,
        epoch: int | None = None,
        member_id: str | None = None,
        assignment: Mapping[uuid.UUID, Iterable[int]] | None = None,
        token: int | None = None,
        error: BaseException | None = None,
    ) -> None:
        m = self._machine
        before = m.state
        effects = m.feed(
            event, epoch=epoch, member_id=member_id, assignment=assignment, token=token
        )
        if before is not m.state:
            log.debug("group %r: %s -> %s on %s", self.config.group_id, before, m.state, event)
        if before is State.FATAL and m.state is not State.FATAL:
            self._fatal = None
        for effect in effects:
            self._perform(effect, error)
        self._notify()

    def _perform(self, effect: Effect, error: BaseException | None) -> None:
        kind = effect.kind
        loop = asyncio.get_running_loop()
        if kind in _WORKER_EFFECTS:
            self._work.put_nowait(effect)
        elif kind is EffectKind.REFRESH_METADATA:
            self._client.metadata.request_refresh()
        elif kind is EffectKind.RESET_HEARTBEAT:
            self._builder.reset()
        elif kind is EffectKind.BACKOFF:
            self._back_off()
            self._timer.failed(loop.time(), after_s=self._retry_at - loop.time())
        elif kind is EffectKind.FIND_COORDINATOR:
            self._offsets.forget_coordinator()
        elif kind is EffectKind.FAIL:
            failure = error or KafkaError(f"group {self.config.group_id!r} failed")
            log.error("group %r: %s", self.config.group_id, failure)
            self._fatal = failure
            self._errors.append(failure)
        elif kind is EffectKind.REPORT_ERROR:
            if error is not None:
                self._errors.append(error)
        elif kind is EffectKind.LEAVE_DONE:
            self._final = None
            self._resolve_leaves()

    async def _heartbeat(self) -> None:
        m, timer, loop = self._machine, self._timer, asyncio.get_running_loop()
        leaving = m.leaving
        subscription = self._subscription()
        request = self._builder.build(
            member_id=m.member_id,
            epoch=m.epoch,
            subscription=subscription,
            assignment=m.current,
            joining=m.joining,
            leaving=leaving,
        )
        try:
            node = await self._offsets.coordinator()
            conn = await self._client.connection(node, "group")
        except KafkaError as exc:
            self._trouble(
                f"group {self.config.group_id!r}: no coordinator ({exc})", kind="unreachable"
            )
            self._offsets.forget_coordinator()
            self._back_off()
            timer.failed(loop.time())
            self._feed(Event.HEARTBEAT_SKIPPED)
            return
        timer.sent(loop.time())
        if not leaving:
            self._feed(Event.HEARTBEAT_SENT)  # ACKNOWLEDGING: this one acknowledges
        sent_at = time.monotonic()
        try:
            response = await self._send(conn, request)
        except KafkaError as exc:
            self._trouble(
                f"group {self.config.group_id!r}: heartbeat failed ({exc})", kind="unreachable"
            )
            timer.failed(loop.time())
            self._back_off()
            if leaving:
                self._feed(Event.HEARTBEAT_SENT)  # the leave is over for this member
                return
            if exc.retriable:
                self._offsets.forget_coordinator()
                self._feed(Event.RETRIABLE, error=exc)
            else:
                self._feed(Event.FATAL, error=exc)
            return
        if leaving:
            timer.abandoned()
            log.info("group %r: member %s left", self.config.group_id, m.member_id)
            self._feed(Event.HEARTBEAT_SENT)
            return
        self._trouble.recovered()
        if self._metrics is not None:
            self._metrics.heartbeat(time.monotonic() - sent_at)
        code = response.error_code
        event = heartbeat_event(code)
        if event is Event.HEARTBEAT_OK:
            self._backoff.succeeded()
            self._retry_at = 0.0
            timer.answered(loop.time(), response.heartbeat_interval_ms)
            assignment = response_assignment(response)
            self._feed(
                Event.HEARTBEAT_OK,
                epoch=response.member_epoch,
                member_id=response.member_id,
                assignment=assignment,
            )
            self._answered_at = m.transitions
            return
        timer.failed(loop.time())
        if event is not Event.FENCED or request.member_epoch == 0:
            # a fenced member rejoins at once, but a join fenced again waits: a broker
            # that kept answering so got about 10,700 heartbeats a second
            self._back_off()
        message = response.error_message or ""
        error = for_code(code)(
            f"ConsumerGroupHeartbeat for group {self.config.group_id!r}"
            + (f": {message}" if message else "")
        )
        log.info("group %r: heartbeat answered %s", self.config.group_id, type(error).__name__)
        self._feed(event, error=error)

    async def _send(self, conn: Any, request: ConsumerGroupHeartbeatRequest) -> Any:
        version = conn.version_for(ConsumerGroupHeartbeatRequest)
        return await conn.send(request, version)

    # -- the worker task ------------------------------------------------------------------

    async def _worker(self) -> None:
        while True:
            effect = await self._work.get()
            try:
                await self._work_on(effect)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.exception("group %r: the group worker failed", self.config.group_id)
                error = as_kafka_error(exc, "group worker")
                self._fatal = error
                self._errors.append(error)
                self._notify()
                raise

    async def _work_on(self, effect: Effect) -> None:
        m, sub = self._machine, self._sub
        ours = sub.kind != "assigned"
        kind = effect.kind
        gid = self.config.group_id
        if kind is EffectKind.REVOKE_STEP:
            if not m.is_live(effect.token):
                return
            if self._metrics is not None:
                self._metrics.rebalance_started()
            if effect.partitions:
                log.info("group %r: revoking %s", gid, names(sorted(effect.partitions)))
                if ours:
                    sub.start_revoking(effect.partitions)
                self._revoking = effect
                self._notify()
                try:
                    if sub.use_stored:  # commit what the listener stores too
                        await self._call_listener("on_partitions_revoked", effect.partitions)
                        await self._commit_before_revoke(effect.partitions, None)
                    else:
                        await self._commit_before_revoke(effect.partitions, None)
                        await self._call_listener("on_partitions_revoked", effect.partitions)
                finally:
                    if ours:
                        # they leave the subscription with the revocation: the machine
                        # stops owning them when it takes REVOKED, and a commit() between
                        # that and the assign step must not name them
                        sub.set_group_assignment(sub.assigned() - effect.partitions)
                    self._revoking = None
                    self._notify()
            self._post(_Item(Event.REVOKED, token=effect.token))
        elif kind is EffectKind.ASSIGN_STEP:
            if not m.is_live(effect.token):
                return
            if self._metrics is not None:
                self._metrics.rebalance_started()  # no revoke step came first
            log.info(
                "group %r: epoch %d assigned %s",
                gid,
                effect.epoch,
                names(sorted(effect.partitions)) or "nothing",
            )
            sub.set_group_assignment(effect.partitions, hold=sub.listener is not None)
            # a regex: subscription() reports the topics the broker matched and assigned
            sub.set_matched_topics({tp.topic for tp in effect.partitions})
            try:
                await self._call_listener("on_partitions_assigned", effect.added)
            finally:
                sub.release_held()
            self.reconciliations += 1
            if self._metrics is not None:
                self._metrics.rebalance_done()
            self._reset_auto_commit_timer(asyncio.get_running_loop().time())
            self._post(_Item(Event.RECONCILED, token=effect.token))
        elif kind is EffectKind.LOSE:
            held = self._held(effect, ours)
            log.info("group %r: lost %s", gid, names(sorted(held)))
            if ours:
                sub.start_revoking(held)
            try:
                if held:
                    await self._call_listener("on_partitions_lost", held)
            finally:
                if ours:
                    sub.set_group_assignment(m.owned)
            self._post(_Item(Event.RELEASED))
        elif kind is EffectKind.REVOKE:
            held = self._held(effect, ours)
            if ours:
                sub.start_revoking(held)
            self._revoking = effect
            self._notify()
            try:
                if held and sub.use_stored:  # commit what the listener stores too
                    await self._call_listener("on_partitions_revoked", held)
                    await self._commit_before_revoke(held, self._final)
                elif held:
                    await self._commit_before_revoke(held, self._final)
                    await self._call_listener("on_partitions_revoked", held)
            finally:
                if ours:
                    # released: a subscribe() right after unsubscribe() must not keep
                    # them, flagged revoking (never fetched again), for a rejoin that
                    # hands back the same set (an unchanged assignment keeps states)
                    sub.set_group_assignment(sub.assigned() - held)
                self._revoking = None
                self._notify()
            self._post(_Item(Event.RELEASED))

    def _held(self, effect: Effect, ours: bool) -> frozenset[TopicPartition]:
        """What a release (leave, loss) takes from the consumer: the machine's owned
        set, less what it does not hold. A reconciliation cut short by the release
        already revoked some (its revoke step ended, REVOKED not yet taken), or had
        the machine own some the assign step never handed over; neither reaches a
        listener, whose position() or commit on them would fail."""
        if not ours:
            return effect.partitions
        return effect.partitions & self._sub.assigned()

    # -- the watch task -------------------------------------------------------------------

    async def _watch(self) -> None:
        loop = asyncio.get_running_loop()
        m, cfg = self._machine, self.config
        while True:
            await asyncio.sleep(WATCH_TICK_S)
            now = loop.time()
            if (
                m.sends_heartbeats
                and not m.leaving
                and m.state is not State.PREPARE_LEAVING
                and not self._poll_expired
                and now - self._last_poll > cfg.max_poll_interval_ms / 1000
            ):
                self._poll_expired = True
                log.warning(
                    "group %r: no poll for %.1f s (max_poll_interval_ms=%d): leaving the "
                    "group so other members take over; the next poll rejoins",
                    cfg.group_id,
                    now - self._last_poll,
                    cfg.max_poll_interval_ms,
                )
                self._post(_Item(Event.POLL_TIMEOUT))
                continue
            version = self._client.metadata.snapshot.version
            if m.state is State.RECONCILING and version != self._metadata_version:
                self._metadata_version = version
                self._post(_Item(Event.METADATA_UPDATED))
            if (
                cfg.enable_auto_commit
                and m.state is State.STABLE
                and self._revoking is None
                and self._auto_commit_due(now)
            ):
                await self._auto_commit()
