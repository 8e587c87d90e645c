"""What the two group drivers share: ``MemberBase``, the base of ``ClassicGroupDriver``
(classic protocol) and ``ConsumerGroupDriver`` (KIP-848): context manager, task-owning
start/close (tasks stopped, waiters released), ``in_group_task``,
``_notify``/``_until``, ``raise_if_failed``, ``unsubscribe``/``leave``,
``fetch_committed``, metadata tracking, running a rebalance listener, auto-commit
bookkeeping.

It holds the parts that are the same logic in both: the async context manager, the
task-owning ``start()`` / ``close()`` skeleton (every owned task cancelled and
awaited, every waiter released, whatever happens to ``close()``), ``in_group_task``,
the change notification (``_notify`` / ``_until``), ``raise_if_failed``,
``unsubscribe`` / ``leave``, ``fetch_committed``, metadata tracking, running a
rebalance listener, and the auto-commit bookkeeping. A subclass starts its own tasks
(``_start_tasks``), says how it leaves on close (``_leave_on_close``), what it queues
for a leave (``_post_leave``) and what a failed auto-commit code means to it.

Log lines go to the subclass's logger (``_log``), as they did before this base
existed.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import inspect
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, ClassVar, Generic, Protocol, Self, TypeVar

from aiokproto.cluster.backoff import Backoff
from aiokproto.cluster.client import ClusterClient
from aiokproto.consumer.group.committer import GroupOffsets, names
from aiokproto.consumer.group.group_config import GroupConfig
from aiokproto.consumer.subscription import PartitionState, SubscriptionState
from aiokproto.errors import (
    CommitFailedError,
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
    for_code,
)
from aiokproto.logs import RepeatingWarning
from aiokproto.structs import OffsetAndMetadata, TopicPartition

if TYPE_CHECKING:
    from aiokproto.metrics.consumer import CoordinatorMetrics

_CLOSE_TIMEOUT_MS = 30_000
#: how often the watch tasks look at the clock, the subscription and the metadata
WATCH_TICK_S = 0.5

#: positions to commit, and the partition states they belong to
Positions = tuple[
    dict[TopicPartition, OffsetAndMetadata], dict[TopicPartition, PartitionState | None]
]
#: a commit before a revoke: offsets, the partition states they belong to, deadline
_RevokeCommit = tuple[
    dict[TopicPartition, OffsetAndMetadata], dict[TopicPartition, PartitionState | None], float
]


class _Machine(Protocol):
    @property
    def member_id(self) -> str: ...


class _Queued(Protocol):
    @property
    def done(self) -> asyncio.Future[None] | None: ...


MachineT = TypeVar("MachineT", bound=_Machine)
EffectT = TypeVar("EffectT")
_QueuedT = TypeVar("_QueuedT", bound=_Queued)


def as_kafka_error(exc: Exception, what: str) -> KafkaError:
    """``exc`` itself if a ``KafkaError``, else one saying ``what`` failed (a bug)."""
    return exc if isinstance(exc, KafkaError) else KafkaError(f"{what} failed: {exc!r}")


def resolve_queued(queue: asyncio.Queue[_QueuedT]) -> None:
    """Empty ``queue``, resolving the ``done`` future of every item (they never run)."""
    while not queue.empty():
        item = queue.get_nowait()
        if item.done is not None and not item.done.done():
            item.done.set_result(None)


async def stop_tasks(
    tasks: Iterable[asyncio.Task[None]],
    suppress: tuple[type[BaseException], ...] = (asyncio.CancelledError, Exception),
) -> None:
    """Cancel every task, then await each (what ``suppress`` names is swallowed)."""
    tasks = list(tasks)
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(*suppress):
            await task


class MemberBase(abc.ABC, Generic[MachineT, EffectT]):
    """One consumer's membership in one group: the tasks it owns, its waiters, and
    what the ``Consumer`` calls alike under either group protocol.

    An async context manager (also ``start()`` / ``close()``).
    """

    #: the subclass's module logger (log lines keep their logger name)
    _log: ClassVar[logging.Logger]
    #: what ``start()`` and commits raise once closed
    _CLOSED_MESSAGE: ClassVar[str]
    #: what ``close()`` raises when called from a rebalance listener
    _CLOSE_IN_TASK_MESSAGE: ClassVar[str]
    #: commits are still accepted after ``close()`` while a revocation runs
    _COMMITS_WHILE_CLOSING_REVOKE: ClassVar[bool] = False
    #: how the group took partitions away, in ``commit()``'s ``CommitFailedError``
    _TOOK: ClassVar[str] = "took"

    _machine: MachineT

    def __init__(
        self, client: ClusterClient, subscription: SubscriptionState, config: GroupConfig
    ) -> None:
        self._client = client
        self._sub = subscription
        self.config = config
        self._offsets = GroupOffsets(client, config.group_id, config.group_instance_id)
        self._backoff = Backoff.for_retries(client.config)
        self._tasks: list[asyncio.Task[None]] = []
        # the task that runs the rebalance listeners (set by _start_tasks)
        self._listener_task: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()
        self._fatal: BaseException | None = None
        self._errors: list[BaseException] = []
        self._started = False
        self._closed = False
        self._last_poll = 0.0
        self._poll_expired = False
        self._next_auto_commit = 0.0
        self._last_auto_commit: dict[TopicPartition, OffsetAndMetadata] = {}
        # the revoke being performed (commit before revoke, then the listener): its
        # generation still owns the partitions, so commits go through meanwhile
        self._revoking: EffectT | None = None
        self._in_user_code = False  # a rebalance listener runs
        # the leave being handled: positions to commit as of unsubscribe()
        self._final: Positions | None = None
        self._tracked: frozenset[str] = frozenset()
        self._all_topics = False  # metadata covers every topic (pattern / regex)
        # the coordinator unreachable: one line per outage, not one per heartbeat
        self._trouble = RepeatingWarning(self._log, level=logging.INFO)
        self._metrics: CoordinatorMetrics | None = None

    def set_metrics(self, metrics: CoordinatorMetrics | None) -> None:
        """Record rebalances, commits, heartbeats and listener calls in ``metrics``."""
        self._metrics = metrics
        self._offsets.metrics = metrics

    # -- lifecycle ---------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Start the tasks; joining happens in the background."""
        if self._started:
            return
        if self._closed:
            raise IllegalStateError(self._CLOSED_MESSAGE)
        self._started = True
        loop = asyncio.get_running_loop()
        self._last_poll = loop.time()
        self._reset_auto_commit_timer(loop.time())
        self._tasks = self._start_tasks(loop, self.config.group_id)
        if self._sub.in_group:
            self.request_rejoin()

    @abc.abstractmethod
    def _start_tasks(self, loop: asyncio.AbstractEventLoop, gid: str) -> list[asyncio.Task[None]]:
        """Create the owned tasks (setting ``_listener_task``); ``close()`` stops them."""

    async def close(self, *, timeout_ms: int | None = None) -> None:
        """Leave the group (``_leave_on_close``) within ``timeout_ms`` (30 s by
        default), then stop. Every task is stopped and every waiter released, whatever
        happens to ``close()`` itself. Not from a rebalance listener."""
        if self._closed:
            return
        if self.in_group_task():
            raise IllegalStateError(self._CLOSE_IN_TASK_MESSAGE)
        self._closed = True
        timeout = (timeout_ms if timeout_ms is not None else _CLOSE_TIMEOUT_MS) / 1000
        tasks, self._tasks = self._tasks, []
        try:
            await self._leave_on_close(tasks, timeout)
        except TimeoutError:
            self._log.warning(
                "group %r: leaving did not finish within %.1f s", self.config.group_id, timeout
            )
        except KafkaError as exc:
            self._log.warning("group %r: leaving failed: %s", self.config.group_id, exc)
        finally:
            # whatever happened above (even a cancellation), no task outlives close()
            await stop_tasks(tasks)
            self._release_queued()
            self._set_tracked(frozenset())
            self._want_all_topics(False)
            self._notify()

    @abc.abstractmethod
    async def _leave_on_close(self, tasks: list[asyncio.Task[None]], timeout_s: float) -> None:
        """Leave the group as ``close()`` does (``tasks``: the owned ones, still
        running); a ``TimeoutError`` or ``KafkaError`` is logged, not raised."""

    @abc.abstractmethod
    def _release_queued(self) -> None:
        """On close: resolve every leave still queued or waited for (they never run)."""

    def in_group_task(self) -> bool:
        """True when called from the task that runs the rebalance listeners."""
        task = self._listener_task
        return task is not None and asyncio.current_task() is task

    # -- what the consumer calls -------------------------------------------------------

    @property
    def member_id(self) -> str:
        return self._machine.member_id

    @property
    def revoking(self) -> bool:
        """True while partitions are being given back (commit, listener): commits of
        them are accepted, also while the consumer is stopping."""
        return self._revoking is not None

    @abc.abstractmethod
    def request_rejoin(self) -> None:
        """The subscription changed: join or rejoin (or leave when no longer subscribed)."""

    def raise_if_failed(self) -> None:
        """Raise (once) a fatal group error or a rebalance listener's exception."""
        if self._errors:
            raise self._errors.pop(0)

    async def unsubscribe(self) -> None:
        """Leave the group now (commit, revoke, leave) and wait for it.

        Call before ``SubscriptionState.unsubscribe()`` so the final auto-commit still
        sees the positions; ``request_rejoin()`` afterwards is then a no-op.
        """
        if self._closed or not self._started:
            return
        if self.in_group_task():
            # from a rebalance listener: the task running it cannot wait for the leave
            await self._leave_from_listener()
            return
        await asyncio.shield(self.leave())

    @abc.abstractmethod
    async def _leave_from_listener(self) -> None:
        """``unsubscribe()`` called from a rebalance listener."""

    def leave(self) -> asyncio.Future[None]:
        """Ask to leave the group (commit, revoke, leave) now, without waiting.

        The request takes its place in the queue at once, so a ``request_rejoin()``
        made afterwards (a new subscription) is carried out after the leave. The final
        auto-commit commits the positions as of this call. The future resolves once
        the leave was handled, or when this member closes (which leaves too).
        """
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._closed or not self._started:
            done.set_result(None)
            return done
        states = self._sub.states()
        final = (self._sub.all_consumed(), {tp: states.get(tp) for tp in states})
        self._post_leave(done, final)
        return done

    @abc.abstractmethod
    def _post_leave(self, done: asyncio.Future[None], final: Positions) -> None:
        """Queue a leave: ``done`` resolves once handled, ``final`` is what it commits."""

    async def fetch_committed(
        self, partitions: Iterable[TopicPartition], *, timeout_ms: int | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets (None where nothing is committed)."""
        return await self._offsets.fetch(partitions, self._timeout_s(timeout_ms))

    # -- waiting -----------------------------------------------------------------------

    def _notify(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def _until(self, predicate: Callable[[], bool], timeout_s: float | None = None) -> bool:
        """Wait until ``predicate()`` holds (re-checked at every state change)."""
        try:
            async with asyncio.timeout(timeout_s):
                while not predicate():
                    await self._changed.wait()
        except TimeoutError:
            return predicate()
        return True

    def _check_usable(self) -> None:
        if self._fatal is not None:
            raise self._fatal
        if self._closed and not (self._COMMITS_WHILE_CLOSING_REVOKE and self._revoking is not None):
            raise IllegalStateError(self._CLOSED_MESSAGE)

    def _timeout_s(self, timeout_ms: int | None) -> float:
        ms = timeout_ms if timeout_ms is not None else self._client.config.default_api_timeout_ms
        return ms / 1000

    # -- topics and metadata -------------------------------------------------------------

    def _set_tracked(self, topics: frozenset[str]) -> None:
        metadata = self._client.metadata
        added, removed = topics - self._tracked, self._tracked - topics
        if added:
            metadata.track(added)
        if removed:
            metadata.untrack(removed)
        self._tracked = topics

    def _want_all_topics(self, on: bool) -> None:
        if on != self._all_topics:
            self._client.metadata.want_all_topics(on)
            self._all_topics = on

    # -- rebalance listeners -------------------------------------------------------------

    async def _call_listener(self, name: str, partitions: frozenset[TopicPartition]) -> None:
        listener = self._sub.listener
        if listener is None:
            return
        self._in_user_code = True
        started = time.monotonic()
        try:
            result = getattr(listener, name)(partitions)
            if inspect.isawaitable(result):  # plain methods are fine too (aiokafka's)
                await result
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # reported on the next poll; the rebalance goes on, so one failing
            # listener never wedges the member
            self._log.exception(
                "group %r: rebalance listener %s raised", self.config.group_id, name
            )
            self._errors.append(exc)
        finally:
            self._in_user_code = False
            if self._metrics is not None:
                self._metrics.listener_ran(name, time.monotonic() - started)
            self._notify()

    # -- commits ---------------------------------------------------------------------------

    async def _commit_consumed(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata] | None, timeout_ms: int | None
    ) -> None:
        """``commit()``: ``offsets`` (default: every consumed position) by
        ``_commit_offsets``; without ``offsets``, partitions the group took after records
        of theirs were handed out and not committed are a ``CommitFailedError`` (raised
        after committing what is still owned)."""
        everything = offsets is None
        if offsets is None:
            offsets = self._sub.all_consumed()
        offsets = dict(offsets)
        if offsets:
            await self._commit_offsets(offsets, timeout_ms)
        if everything:
            moved = self._sub.take_uncommitted_moved()
            if moved:
                raise CommitFailedError(
                    f"commit failed for {names(moved)}: group {self.config.group_id!r} "
                    f"{self._TOOK} them from this member after records of theirs were "
                    "handed out and before they were committed; those records will be "
                    "consumed again by the new owner (commit in on_partitions_revoked, or "
                    "enable auto-commit, to avoid this)"
                )

    @abc.abstractmethod
    async def _commit_offsets(
        self, offsets: dict[TopicPartition, OffsetAndMetadata], timeout_ms: int | None
    ) -> None:
        """Commit ``offsets`` within ``timeout_ms`` (``default_api_timeout_ms``)."""

    async def _commit_backoff(
        self, backoff: Backoff, deadline: float, limit_s: float, last: BaseException | None
    ) -> None:
        """A commit attempt failed: wait before the next, or raise if past ``deadline``
        (``limit_s``: the commit's whole time limit, for the message)."""
        loop = asyncio.get_running_loop()
        backoff.failed(loop.time())
        wait = backoff.delay_s()
        if loop.time() + wait >= deadline:
            raise KafkaTimeoutError(
                f"commit to group {self.config.group_id!r} did not succeed within "
                f"{limit_s:.1f} s" + (f"; last error: {last}" if last else "")
            )
        await asyncio.sleep(wait)

    def _revoke_commit(
        self, partitions: frozenset[TopicPartition], final: Positions | None
    ) -> _RevokeCommit | None:
        """What the commit before revoking ``partitions`` commits (the positions as of
        ``final`` when leaving), their states, and its deadline; None: nothing."""
        if final is not None:  # leaving: the positions as of unsubscribe()
            consumed, as_of = final
        else:
            consumed, as_of = self._sub.all_consumed(), dict(self._sub.states())
        offsets = {tp: o for tp, o in consumed.items() if tp in partitions}
        if not offsets:
            return None
        limit_ms = min(
            self._client.config.default_api_timeout_ms, self.config.effective_rebalance_timeout_ms
        )
        deadline = asyncio.get_running_loop().time() + limit_ms / 1000
        states = {tp: as_of.get(tp) for tp in offsets}
        return offsets, states, deadline

    # -- auto-commit -----------------------------------------------------------------------

    def _reset_auto_commit_timer(self, now: float) -> None:
        self._next_auto_commit = now + self.config.auto_commit_interval_ms / 1000

    def _auto_commit_due(self, now: float) -> bool:
        """True (and the next one scheduled) when a periodic auto-commit is due."""
        if now < self._next_auto_commit:
            return False
        self._reset_auto_commit_timer(now)
        return True

    async def _auto_commit_offsets(
        self, offsets: dict[TopicPartition, OffsetAndMetadata], generation: int, member_id: str
    ) -> None:
        """One periodic auto-commit of ``offsets``; each failed code goes to
        ``_auto_commit_answered``."""
        deadline = asyncio.get_running_loop().time() + self.config.auto_commit_interval_ms / 1000
        states = {tp: self._sub.state_of(tp) for tp in offsets}
        try:
            codes = await self._offsets.commit_once(offsets, generation, member_id, deadline)
        except KafkaError as exc:
            self._log.info("group %r: auto-commit failed: %s", self.config.group_id, exc)
            if exc.retriable:
                self._offsets.forget_coordinator()
            return
        failed = {c for c in codes.values() if c}
        if not failed:
            self._last_auto_commit = offsets
            self._sub.note_committed(offsets, states)
            return
        for code in failed:
            self._log.info(
                "group %r: auto-commit answered %s",
                self.config.group_id,
                for_code(code).__name__,
            )
            self._auto_commit_answered(code, generation)

    @abc.abstractmethod
    def _auto_commit_answered(self, code: int, generation: int) -> None:
        """A periodic auto-commit in ``generation`` was answered with error ``code``."""
