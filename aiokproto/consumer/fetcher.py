"""The fetcher (``Fetcher``): one fetch loop per broker, a bounded buffer of fetched
data handed out by ``drain``, and the position housekeeping (offset resets, KIP-320
epoch checks) in a manager task that also starts the loops.

Flow: the manager starts a loop for every broker that leads (or, with ``client_rack``,
is the preferred replica of) an assigned partition with a position. A loop keeps one
Fetch in flight on its broker's "fetch" connection, inside an incremental fetch
session, for the partitions that have no buffered data; while the application works
through one partition's data, the broker's other partitions keep being fetched. A
partition is fetched again as soon as its buffered data has been handed out.

Memory: at most PREFETCH_DEPTH responses' worth of data per partition is buffered
(each bounded by ``max_partition_fetch_bytes``, except a single batch larger than
that), plus one response in flight per broker (bounded by ``fetch_max_bytes``), and
all of it together by ``fetch_buffer_max_bytes`` (``FetchBudget``, ``budget.py``): a
fetch asks for at most what is free of it (and a quarter of it), reserved
while in flight, and none is sent while nothing is free; handing data out or dropping
it (seek, revocation, unassignment) frees its bytes and wakes the loops. Paused
partitions' data is dropped when the budget is full and other partitions wait to be
fetched (refetched on resume), and so is the data of partitions a reader of some
partitions only did not ask for when it got nothing: neither pausing nor
``getmany(*partitions)`` can starve the rest. Buffered data are
zero-copy slices of their response, which they keep alive; once what is still
buffered from a response is under a quarter of it, that rest is copied out
(``SharedFrame``), so buffered data never pins more than four times its own size; the
budget counts the whole response while it is kept alive (the memory really held), and
the rest is copied out only when the copies fit in it beside the response.

Every task belongs to the fetcher (the broker loops to its ``BrokerTasks``,
``cluster/broker_tasks.py``, the per-broker supervisor the share consumer uses too); an
unexpected failure in one is raised to the application's next ``getmany``/``getone``;
broker errors for one partition are handled (retries, metadata refresh, resets) or
raised the same way when they are final.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Collection
from functools import partial
from typing import TYPE_CHECKING, Any

from aiokproto.cluster.broker_tasks import BrokerTasks, Wakeup, wait_event
from aiokproto.cluster.client import ClusterClient
from aiokproto.cluster.snapshot import BrokerInfo
from aiokproto.consumer.budget import FetchBudget
from aiokproto.consumer.consumer_config import READ_COMMITTED, ConsumerConfig
from aiokproto.consumer.errors import OffsetOutOfRangeConsumerError, UndecodableBatchError
from aiokproto.consumer.fetched import FetchedData, SharedFrame, first_batch_size
from aiokproto.consumer.offsets import EARLIEST, LATEST, OffsetClient
from aiokproto.consumer.record import ConsumerRecord
from aiokproto.consumer.session import FetchPlan, FetchSession, PartitionFetch
from aiokproto.consumer.subscription import PartitionState, SubscriptionState
from aiokproto.consumer.transactions import AbortedFilter
from aiokproto.errors import (
    CorruptRecordError,
    KafkaError,
    UnsupportedVersionError,
    for_code,
)
from aiokproto.logs import RepeatingWarning
from aiokproto.protocol.messages.fetch import (
    FetchPartition,
    FetchRequest,
    FetchRequestForgottenTopic,
    FetchTopic,
)
from aiokproto.protocol.primitives import ZERO_UUID
from aiokproto.structs import TopicPartition

if TYPE_CHECKING:
    from aiokproto.metrics.consumer import FetchMetrics

log = logging.getLogger(__name__)

_OFFSET_OUT_OF_RANGE = 1
# errors after which the partition's leader (or our metadata) is wrong: refresh, retry
_STALE_LEADER = frozenset({3, 5, 6, 9, 56, 74, 75, 78, 100, 103})
#: responses buffered per partition: the next fetch (from the end of the buffered data)
#: is in flight while the application works through the current one
PREFETCH_DEPTH = 2
_MIN_FETCH_VERSION = 4  # isolation level, last stable offset, aborted transactions
_TOPIC_ID_FETCH_VERSION = 13
_MAX_INT32 = (1 << 31) - 1


class Fetcher:
    """Fetches assigned partitions into a buffer that ``drain`` hands out."""

    def __init__(
        self,
        client: ClusterClient,
        subscription: SubscriptionState,
        config: ConsumerConfig,
        offsets: OffsetClient,
        metrics: FetchMetrics | None = None,
    ) -> None:
        self.client = client
        self.metrics = metrics
        self.subs = subscription
        self.config = config
        self.offsets = offsets
        self._read_committed = config.isolation == READ_COMMITTED
        # per partition, fetched data in offset order (at most PREFETCH_DEPTH responses)
        self._buffer: dict[TopicPartition, list[FetchedData]] = {}
        self._in_flight: dict[TopicPartition, PartitionState] = {}
        #: every buffered byte and every fetch in flight, against fetch_buffer_max_bytes
        self.budget = FetchBudget(config.fetch_buffer_max_bytes)
        if metrics is not None:
            metrics.buffer_gauges(lambda: self.budget.buffered, config.fetch_buffer_max_bytes)
        self._sessions: dict[int, FetchSession] = {}
        self._task: asyncio.Task[None] | None = None
        self._wake = Wakeup()
        self._data = Wakeup()
        self._wake_held = False  # see _handle_response
        self._node_tasks = BrokerTasks(
            "aiokproto-fetch", failed=self._broker_failed, release=self._data.set, logger=log
        )
        self._errors: list[KafkaError] = []
        self._fatal: BaseException | None = None
        # final per-partition errors, raised while the partition stays where it failed
        self._partition_errors: dict[
            TopicPartition, tuple[PartitionState, int, int, KafkaError]
        ] = {}
        self._backoff_until: dict[TopicPartition, float] = {}
        self._oversized: dict[TopicPartition, int] = {}
        # when each partition last got data (a counter): requests name the partitions
        # served longest ago first, so a byte limit (the budget's) starves none
        self._served: dict[TopicPartition, int] = {}
        self._serial = 0
        #: broker loops waiting for room in the budget
        self._starved: set[int] = set()
        #: the partitions of a reader of some partitions only that got nothing at the
        #: bound: fetched first until it gets records (see drain)
        self._asked: frozenset[TopicPartition] = frozenset()
        self._tracked: frozenset[str] = frozenset()
        self._closed = False
        #: how many times the manager task planned (a test sees it idle, not spinning)
        self.planning_rounds = 0
        #: partition answers thrown away because the partition moved while fetching
        self.discarded = 0
        self._skip_logged: dict[TopicPartition, str | None] = {}
        self._node_trouble: dict[int, RepeatingWarning] = {}
        subscription.add_change_listener(self._subscription_changed)

    # -- lifecycle ---------------------------------------------------------------

    async def start(self) -> None:
        self._task = asyncio.create_task(self._guard(self._run), name="aiokproto-fetcher")

    async def close(self) -> None:
        self._closed = True
        self._data.set()  # no waiter outlives the fetcher
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self._node_tasks.close()
        for queue in self._buffer.values():
            for fd in queue:
                fd.discard()
        self._buffer.clear()
        if self._tracked:
            self.client.metadata.untrack(self._tracked)
            self._tracked = frozenset()

    async def _guard(self, job: Callable[[], Awaitable[None]]) -> None:
        # takes a factory: a task cancelled before it ran leaves no unawaited coroutine
        try:
            await job()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            log.exception("aiokproto fetcher task failed")
            self._fatal = exc
            self._data.set()

    def _broker_failed(self, node: int, exc: BaseException) -> None:
        # the application's next getmany/getone raises it (BrokerTasks then wakes it)
        if self._fatal is None:
            self._fatal = exc

    def _subscription_changed(self) -> None:
        self._wake.set()
        self._data.set()  # waiting callers re-check positions and the assignment

    def wake(self) -> None:
        """Something changed (assignment, a position, buffered data consumed): re-plan."""
        self._wake.set()

    # -- handing out -------------------------------------------------------------

    def data_waiter(self) -> asyncio.Event:
        return self._data.waiter()

    def release_waiters(self) -> None:
        """Wake everyone waiting for data (they re-check whether to go on)."""
        self._data.set()

    def defer_error(self, exc: KafkaError) -> None:
        """Have the application's next call raise ``exc`` (records came with it)."""
        self._errors.append(exc)

    def raise_errors(
        self, partitions: Collection[TopicPartition] | None = None, *, data: bool = True
    ) -> None:
        """Raise what the application is to see next; ``data=False`` leaves out an
        undecodable batch at the position (``position()`` is known all the same)."""
        if self._fatal is not None:
            raise KafkaError(f"the consumer's fetcher failed: {self._fatal!r}") from self._fatal
        if self._errors:
            raise self._errors.pop(0)
        if self._partition_errors:
            states = self.subs.states()
            out_of_range: dict[TopicPartition, int] = {}
            for tp, (state, seeks, position, exc) in list(self._partition_errors.items()):
                if (
                    states.get(tp) is not state
                    or state.seeks != seeks
                    or state.position != position
                ):
                    del self._partition_errors[tp]  # seeked or reassigned since
                elif partitions is None or tp in partitions:
                    if not data and isinstance(exc, UndecodableBatchError):
                        continue
                    if state.paused and isinstance(exc, UndecodableBatchError):
                        continue  # kept for resume(); the other partitions flow (Java's)
                    if isinstance(exc, OffsetOutOfRangeConsumerError):
                        out_of_range[tp] = position
                    else:
                        raise exc
            if out_of_range:
                raise OffsetOutOfRangeConsumerError(out_of_range)

    def drain(
        self, max_records: int, partitions: Collection[TopicPartition] | None = None
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Hand out up to ``max_records`` buffered records, advancing positions."""
        self.raise_errors(partitions)
        out: dict[TopicPartition, list[ConsumerRecord]] = {}
        buffer = self._buffer
        if not buffer:
            return out
        states = self.subs.states()
        remaining = max_records
        freed = False
        error: KafkaError | None = None
        for tp in list(buffer):
            if partitions is not None and tp not in partitions:
                continue
            queue = buffer[tp]
            fd = queue[0]
            state = states.get(tp)
            if state is not fd.state or state.position != fd.next_offset:
                self._drop(tp)  # unassigned or seeked since it was fetched
                freed = True
                continue
            if state.paused or state.revoking or state.held:
                continue
            parts: list[list[ConsumerRecord]] = []
            got = 0
            while True:
                recs = fd.take(remaining - got)
                if recs:
                    parts.append(recs)
                    got += len(recs)
                state.position = fd.next_offset
                if fd.exhausted:
                    del queue[0]
                    fd.discard()
                    freed = True
                    if fd.error is not None:
                        error = fd.error
                        self._drop(tp)
                        if isinstance(error, UndecodableBatchError):
                            # raised by every call (and not fetched) until a seek: a
                            # refetch would only bring the same bytes back
                            self._partition_errors[tp] = (
                                state,
                                state.seeks,
                                fd.next_offset,
                                error,
                            )
                        break
                    if not queue:
                        del buffer[tp]
                        break
                    fd = queue[0]
                    if fd.next_offset != state.position:
                        self._drop(tp)  # not contiguous (cannot happen; be safe)
                        break
                elif not recs:
                    break
                if got >= remaining:
                    break
            if parts:
                recs = parts[0] if len(parts) == 1 else [r for part in parts for r in part]
                last = recs[-1]
                state.leader_epoch = last[8]
                state.handed = last[2] + 1
                out[tp] = recs
                remaining -= got
                if self.metrics is not None:
                    self._record_handed(tp, state, got)
            if error is not None or remaining <= 0:
                break
        if out:
            if self._asked:
                self._asked = frozenset()
        elif partitions is not None and self._starved:
            # a reader of some partitions only (getmany(*partitions)) gets nothing while
            # the others' data fills the bound: its partitions go first in the next
            # fetch, and enough of the others' data goes to make room for them, most
            # recently fetched first (refetched when read); letting all of it go made a
            # round-robin reader of one partition at a time refetch nearly everything
            self._asked = frozenset(partitions)
            need = min(self._fair_share(), self.config.max_partition_fetch_bytes * len(partitions))
            served = self._served
            others = sorted(
                (tp for tp in buffer if tp not in partitions),
                key=lambda tp: served.get(tp, 0),
                reverse=True,
            )
            for tp in others:
                if self.budget.free >= need:
                    break
                self._drop(tp)
                freed = True
        if freed:
            self.wake()
        if self.metrics is not None and out:
            self.metrics.drained(max_records - remaining)
        if error is not None:
            if not out:
                raise error
            if not isinstance(error, UndecodableBatchError):
                self._errors.append(error)  # a partition error is raised next anyway
        return out

    def _record_handed(self, tp: TopicPartition, state: PartitionState, count: int) -> None:
        assert self.metrics is not None
        pos, high, start = state.position, state.highwater, state.log_start_offset
        lag = None if pos is None or high is None else max(0, high - pos)
        lead = None if pos is None or start is None else pos - start
        self.metrics.handed_out(tp.topic, count, lag, lead)

    # -- the manager task ----------------------------------------------------------

    async def _run(self) -> None:
        metadata = self.client.metadata
        backoff = self.client.config.retry_backoff_ms / 1000
        while True:
            waiter = self._wake.waiter()
            self._sync_tracking()
            retry = False
            if self.subs.pending_resets():
                retry |= await self._resolve_resets()
            if self.subs.needs_validation():
                retry |= await self._validate_positions()
            routes, unroutable = self._routes()
            for node in routes:
                self._node_tasks.start(node, self._node_loop)
            timeout: float | None = None
            if unroutable or retry:
                metadata.request_refresh()
                timeout = backoff
            soonest = self._next_backoff_end()
            if soonest is not None:
                timeout = soonest if timeout is None else min(timeout, soonest)
            self.planning_rounds += 1
            await wait_event(waiter, timeout)
            if timeout is not None and not waiter.is_set():
                self.wake()  # back-offs ended: let the broker loops look again

    def _next_backoff_end(self) -> float | None:
        """Seconds until the next partition back-off ends (None: none pending).

        Ended back-offs and those of partitions no longer assigned are dropped here:
        one left behind would read as "due now" forever and spin this loop."""
        backoff = self._backoff_until
        if not backoff:
            return None
        now = asyncio.get_running_loop().time()
        states = self.subs.states()
        for tp, until in list(backoff.items()):
            if until <= now or tp not in states:
                del backoff[tp]
        return min(backoff.values()) - now if backoff else None

    def _sync_tracking(self) -> None:
        topics = frozenset(tp.topic for tp in self.subs.assigned())
        if topics != self._tracked:
            metadata = self.client.metadata
            metadata.track(topics - self._tracked)
            metadata.untrack(self._tracked - topics)
            self._tracked = topics

    def _skip_reason(
        self, tp: TopicPartition, state: PartitionState, loop_time: float
    ) -> str | None:
        """Why ``tp`` is not to be fetched now, or None when it is. Drops buffered data
        that went stale (seek or reassignment): it will never be handed out."""
        position = state.position
        if position is None:
            return "no position yet"
        if state.paused:
            return "paused"
        if state.revoking:
            return "being revoked"
        if state.held:
            return "on_partitions_assigned is running"
        if state.reset is not None:
            return f"waiting for its {state.reset} offset"
        if state.validate_epoch:
            return "its position is being validated (KIP-320)"
        if tp in self._in_flight:
            return "a fetch is in flight"
        error = self._partition_errors.get(tp)
        if (
            error is not None
            and error[0] is state
            and error[1] == state.seeks
            and error[2] == position
        ):
            return f"failed at {position}: {error[3]}"
        queue = self._buffer.get(tp)
        if queue and (queue[0].state is not state or queue[0].next_offset != position):
            self._drop(tp)  # fetched before a seek or reassignment
            queue = None
        if queue and (len(queue) >= PREFETCH_DEPTH or queue[-1].end_offset < 0):
            return f"{len(queue)} answer(s) buffered"
        until = self._backoff_until.get(tp)
        if until is not None and until > loop_time:
            return f"backing off for {until - loop_time:.3f} s"
        return None

    def _drop(self, tp: TopicPartition) -> None:
        """Forget the data buffered for ``tp`` (it will never be handed out)."""
        for fd in self._buffer.pop(tp, ()):
            fd.discard()

    def _drop_unassigned(self, states: dict[TopicPartition, PartitionState]) -> None:
        """Drop the data of partitions no longer assigned (or reassigned): a revoked
        partition's buffer is never handed out, and must not hold the budget."""
        stale = [tp for tp, queue in self._buffer.items() if states.get(tp) is not queue[0].state]
        for tp in stale:
            self._drop(tp)
        if len(self._served) > 2 * len(states):
            self._served = {tp: n for tp, n in self._served.items() if tp in states}

    def _evict_paused(self, need: int = 1) -> bool:
        """The budget is full while partitions wait to be fetched: drop what paused
        partitions hold (refetched on resume), most recently fetched first, until
        ``need`` bytes are free (the rest stays for their resume: a consumer pausing
        for backpressure keeps most of its prefetch). True if that freed something."""
        budget, served = self.budget, self._served
        free = budget.free
        paused = [tp for tp, queue in self._buffer.items() if queue[0].state.paused]
        paused.sort(key=lambda tp: served.get(tp, 0), reverse=True)
        for tp in paused:
            if budget.free >= need:
                break
            self._drop(tp)
        return budget.free > free

    def _routes(self) -> tuple[dict[int, dict[TopicPartition, PartitionFetch]], bool]:
        """Fetchable partitions by the node to fetch them from; True if some have no leader."""
        snap = self.client.metadata.snapshot
        loop_time = asyncio.get_running_loop().time()
        routes: dict[int, dict[TopicPartition, PartitionFetch]] = {}
        unroutable = False
        buffer = self._buffer
        backoff = self._backoff_until
        base_max = self.config.max_partition_fetch_bytes
        debug = log.isEnabledFor(logging.DEBUG)
        states = self.subs.states()
        if buffer or len(self._served) > 2 * len(states):
            self._drop_unassigned(states)
        for tp, state in states.items():
            why = self._skip_reason(tp, state, loop_time)
            if debug:
                self._log_skip(tp, why)
            if why is not None:
                continue
            position = state.position
            assert position is not None
            last_epoch = state.leader_epoch
            queue = buffer.get(tp)
            if queue:
                # prefetch: continue where the buffered data ends
                tail = queue[-1]
                position = tail.end_offset
                if tail.end_epoch >= 0:
                    last_epoch = tail.end_epoch
            backoff.pop(tp, None)
            topic = snap.topics.get(tp.topic)
            info = topic.partitions.get(tp.partition) if topic is not None else None
            if topic is None or info is None or info.leader < 0:
                if debug:
                    self._log_skip(tp, "no leader known")
                unroutable = True
                continue
            node = info.leader
            preferred = state.preferred_replica
            if preferred is not None:
                if state.preferred_until > loop_time and preferred in snap.brokers:
                    node = preferred
                else:
                    state.preferred_replica = None
            routes.setdefault(node, {})[tp] = PartitionFetch(
                topic.topic_id,
                position,
                info.leader_epoch,
                last_epoch,
                max(base_max, self._oversized.get(tp, 0)),
            )
        return routes, unroutable

    def _log_skip(self, tp: TopicPartition, why: str | None) -> None:
        """Debug: say when the reason a partition is (not) fetched changes."""
        if self._skip_logged.get(tp) != why:
            self._skip_logged[tp] = why
            log.debug("%s: %s", tp, f"not fetched: {why}" if why else "fetchable")

    def describe(self) -> str:
        """The fetcher's view of every assigned partition (to debug a stall)."""
        loop_time = asyncio.get_running_loop().time()
        snap = self.client.metadata.snapshot
        lines = []
        for tp, state in self.subs.states().items():
            queue = self._buffer.get(tp, [])
            in_sessions = {
                node: session.known[tp].fetch_offset
                for node, session in self._sessions.items()
                if tp in session.known
            }
            lines.append(
                f"{tp.topic}-{tp.partition}: {state!r} leader={snap.leader_for(*tp)} "
                f"buffered={[(fd.next_offset, fd.end_offset) for fd in queue]} "
                f"sessions={in_sessions} "
                f"now={self._skip_reason(tp, state, loop_time) or 'fetchable'}"
            )
        lines.append(
            f"broker loops={self._node_tasks.nodes()} errors={self._errors!r} "
            f"fatal={self._fatal!r} planning_rounds={self.planning_rounds} "
            f"discarded={self.discarded} buffered_bytes={self.budget.buffered} "
            f"reserved_bytes={self.budget.reserved} "
            f"fetch_buffer_max_bytes={self.budget.limit}"
        )
        return "\n".join(lines)

    # -- per-broker fetch loops --------------------------------------------------------

    async def _node_loop(self, node: int) -> None:
        # the loop's task is this fetcher's BrokerTasks': it forgets the task at return
        session = self._sessions.setdefault(node, FetchSession())
        while True:
            waiter = self._wake.waiter()
            wanted = self._routes()[0].get(node)
            if not wanted:
                if not self._node_has_partitions(node):
                    self.wake()  # leadership moved: the manager starts other loops
                    return
                await waiter.wait()
                continue
            budget = self.budget
            max_bytes = budget.grant(node, self.config.fetch_max_bytes, self._fair_share())
            if not max_bytes:
                # the buffer is at its bound: wait until the application drains some
                # (drain wakes the loops), unless paused partitions' data can go
                need = self.config.max_partition_fetch_bytes * len(wanted)
                if self._evict_paused(min(need, self._fair_share())):
                    continue
                self._starved.add(node)
                if self._data.awaited():
                    # a reader of other partitions only (getone(*partitions)) may wait
                    # for data no fetch can bring now: let it look again, and let the
                    # others' data go (drain), or it waits forever
                    self._data.set()
                try:
                    await waiter.wait()
                finally:
                    self._starved.discard(node)
                continue
            try:
                hand_first = await self._fetch_once(node, session, wanted, max_bytes)
            finally:
                budget.settle(node)
                if self._starved:
                    self.wake()  # its reservation is free for the loops waiting for room
            if hand_first:
                # A reader was starved and the broker has nothing more: let it have
                # the records before this loop spends its turn on the next fetch
                # (which would only wait at the broker); see Fetcher._handle_response.
                await asyncio.sleep(0)

    def _fair_share(self) -> int:
        """The most one broker's fetch may ask for: a quarter of the bound, or an equal
        part per broker loop beyond four, so one lagging broker cannot hold all of it in
        flight, and an answer (kept whole until read, see SharedFrame) frees its room in
        steps small enough for the next fetch to go out while the rest is read."""
        return max(1, self.budget.limit // max(4, len(self._node_tasks)))

    def _node_has_partitions(self, node: int) -> bool:
        snap = self.client.metadata.snapshot
        for tp, state in self.subs.states().items():
            if state.preferred_replica == node or snap.leader_for(tp.topic, tp.partition) == node:
                return True
        return False

    async def _fetch_once(
        self,
        node: int,
        session: FetchSession,
        wanted: dict[TopicPartition, PartitionFetch],
        max_bytes: int,
    ) -> bool:
        """One fetch from ``node`` of at most ``max_bytes`` (a first batch larger than
        that still comes); True when its records should reach a waiting reader before
        the next fetch is built."""
        config = self.config
        states = self.subs.states()
        mine = {tp: states[tp] for tp in wanted}
        self._in_flight.update(mine)
        try:
            try:
                conn = await self.client.connection(node, "fetch")
                version = conn.version_for(FetchRequest, _MIN_FETCH_VERSION)
                if version >= _TOPIC_ID_FETCH_VERSION and any(
                    s.topic_id == ZERO_UUID for s in wanted.values()
                ):
                    version = _TOPIC_ID_FETCH_VERSION - 1  # metadata without topic ids
                plan = session.plan(wanted, sessions=version >= 7)
                request = self._build_request(plan, max_bytes)
                sent_at = time.monotonic()
                timeout_ms = self.client.config.request_timeout_ms + config.fetch_max_wait_ms
                if conn.ready_now():
                    # answered from the read path: the records are buffered, and a
                    # waiting reader woken, in the step the answer is read; this loop
                    # goes on after the reader (no loop pass of its own first)
                    answered: asyncio.Future[tuple[bool, bool]] = (
                        asyncio.get_running_loop().create_future()
                    )
                    conn.send_now(
                        request,
                        version,
                        partial(
                            self._answered, answered, (node, session, plan, version, mine, sent_at)
                        ),
                        timeout_ms=timeout_ms,
                    )
                    hand_first, back_off = await answered
                else:
                    response: Any = await conn.send(request, version, timeout_ms=timeout_ms)
                    hand_first, back_off = self._answer(
                        node, session, plan, version, mine, sent_at, response
                    )
            except (KafkaError, OSError) as exc:
                session.on_failure()
                self._fetch_failed(node, wanted, exc)
                await asyncio.sleep(self.client.config.retry_backoff_ms / 1000)
                if isinstance(exc, KafkaError) and exc.retriable:
                    # the broker may be gone: learn where its partitions went
                    with contextlib.suppress(KafkaError, TimeoutError):
                        async with asyncio.timeout(self.client.config.request_timeout_ms / 1000):
                            await self.client.metadata.refresh()
                    self.wake()
                return False
            if back_off:
                await asyncio.sleep(self.client.config.retry_backoff_ms / 1000)
            return hand_first
        finally:
            for tp, state in mine.items():
                if self._in_flight.get(tp) is state:
                    del self._in_flight[tp]

    def _answered(
        self,
        answered: asyncio.Future[tuple[bool, bool]],
        args: tuple[int, FetchSession, FetchPlan, int, dict[TopicPartition, PartitionState], float],
        response: Any,
        error: KafkaError | None,
    ) -> None:
        """A fetch's answer, from the connection's read path (``_answer``); dropped, as
        ``send()``'s would be, when the loop that sent it was cancelled meanwhile."""
        if answered.done():
            return
        if error is not None:
            answered.set_exception(error)
            return
        try:
            hand_first, back_off = self._answer(*args, response, hold_wake=True)
        except Exception as exc:  # a bug: raised in the loop, as from send()'s path
            self._wake_held = False
            answered.set_exception(exc)
            return
        wake, self._wake_held = self._wake_held, False
        # Both resume in the next pass, in the order woken here: a caught-up reader
        # first (this loop's next fetch would only wait at the broker), else this
        # loop first (its next fetch is prepared at the broker while the reader works).
        if wake and hand_first:
            self._data.set()
        answered.set_result((False, back_off))
        if wake and not hand_first:
            self._data.set()

    def _answer(
        self,
        node: int,
        session: FetchSession,
        plan: FetchPlan,
        version: int,
        mine: dict[TopicPartition, PartitionState],
        sent_at: float,
        response: Any,
        hold_wake: bool = False,
    ) -> tuple[bool, bool]:
        """Apply a fetch's answer: whether a waiting reader should have the records
        before the next fetch is built, and whether to back off first. ``hold_wake``:
        see ``_handle_response``."""
        session.on_response(plan, response.error_code, response.session_id)
        if response.error_code:
            error = for_code(response.error_code)(f"Fetch from node {node}")
            if plan.epoch > 0 and response.error_code in (70, 71):
                log.debug("fetch session with node %d reset: %s", node, error)
                return False, False
            self._trouble(node)(f"fetch from node {node} failed: {error}", kind="answer")
            if not error.retriable and not error.invalid_metadata:
                self._errors.append(error)
                self._data.set()
            return False, True
        self._trouble(node).recovered()
        nbytes, hand_first = self._handle_response(node, plan, response, version, mine, hold_wake)
        if self.metrics is not None:
            self.metrics.fetched(time.monotonic() - sent_at, nbytes, response.throttle_time_ms)
        return hand_first, False

    def _trouble(self, node: int) -> RepeatingWarning:
        """The node's repeating-warning log: one line per outage, not one per retry."""
        warning = self._node_trouble.get(node)
        if warning is None:
            warning = self._node_trouble[node] = RepeatingWarning(log, level=logging.INFO)
        return warning

    def _build_request(self, plan: FetchPlan, max_bytes: int) -> FetchRequest:
        config = self.config
        topics: dict[str, FetchTopic] = {}
        # oversized partitions first (only the first partition may exceed the limits),
        # then those a reader of some partitions only waits for at the bound (drain),
        # then those with nothing buffered, then those served longest ago: a broker
        # fills a full fetch in request order, up to max_bytes (an incremental one in
        # its session's order, moving partitions that returned data to its end)
        oversized, buffer, served = self._oversized, self._buffer, self._served
        asked = self._asked
        order = sorted(
            plan.send.items(),
            key=lambda item: (
                item[0] not in oversized,
                item[0] not in asked,
                item[0] in buffer,
                served.get(item[0], 0),
            ),
        )
        for tp, spec in order:
            ft = topics.get(tp.topic)
            if ft is None:
                ft = topics[tp.topic] = FetchTopic(topic=tp.topic, topic_id=spec.topic_id)
            ft.partitions.append(
                FetchPartition(
                    partition=tp.partition,
                    current_leader_epoch=spec.current_leader_epoch,
                    fetch_offset=spec.fetch_offset,
                    last_fetched_epoch=spec.last_fetched_epoch,
                    log_start_offset=-1,
                    partition_max_bytes=spec.max_bytes,
                )
            )
        forgotten: dict[tuple[str, uuid.UUID], list[int]] = {}
        for tp, topic_id in plan.forgotten.items():
            forgotten.setdefault((tp.topic, topic_id), []).append(tp.partition)
        return FetchRequest(
            replica_id=-1,
            max_wait_ms=config.fetch_max_wait_ms,
            # a broker must not wait for more than it may send
            min_bytes=min(config.fetch_min_bytes, max_bytes),
            max_bytes=max_bytes,
            isolation_level=config.isolation,
            session_id=plan.session_id,
            session_epoch=plan.epoch,
            topics=list(topics.values()),
            forgotten_topics_data=[
                FetchRequestForgottenTopic(topic=t, topic_id=tid, partitions=ps)
                for (t, tid), ps in forgotten.items()
            ],
            rack_id=config.client_rack or "",
        )

    def _fetch_failed(
        self, node: int, wanted: dict[TopicPartition, PartitionFetch], exc: BaseException
    ) -> None:
        if isinstance(exc, UnsupportedVersionError):
            self._errors.append(exc)
            self._data.set()
        self._trouble(node)(f"fetch from node {node} failed ({exc}); retrying", kind="request")
        states = self.subs.states()
        for tp in wanted:
            state = states.get(tp)
            if state is not None and state.preferred_replica == node:
                state.preferred_replica = None  # fall back to the leader

    # -- responses -----------------------------------------------------------------------

    def _handle_response(
        self,
        node: int,
        plan: FetchPlan,
        response: Any,
        version: int,
        mine: dict[TopicPartition, PartitionState],
        hold_wake: bool = False,
    ) -> tuple[int, bool]:
        """Buffer what the answer carried (``hold_wake``: the readers are not woken for
        the new records but ``_wake_held`` is set, for the caller to wake them). Returns
        the record bytes it carried, and whether a reader is waiting for these records
        while every partition that carried some has nothing more at the broker (caught
        up: a latency-bound reader, whose next fetch would only wait at the broker). A
        lagging consumer keeps fetching first, so its next answer is prepared while the
        reader works."""
        config = self.config
        metrics = self.metrics
        total = 0
        names = {spec.topic_id: tp.topic for tp, spec in plan.wanted.items()}
        states = self.subs.states()
        loop_time = asyncio.get_running_loop().time()
        now_ms = int(time.time() * 1000)
        got_data = False
        caught_up = True
        carried: set[TopicPartition] = set()
        frame: SharedFrame | None = None
        for t in response.responses:
            topic = t.topic if version < _TOPIC_ID_FETCH_VERSION else names.get(t.topic_id)
            if topic is None:
                continue
            for p in t.partitions:
                tp = TopicPartition(topic, p.partition_index)
                spec = plan.wanted.get(tp)
                state = states.get(tp)
                if spec is None or state is None or state is not mine.get(tp):
                    continue  # unassigned while the fetch was out
                queue = self._buffer.get(tp)
                if queue:
                    if (
                        queue[-1].end_offset != spec.fetch_offset
                        or queue[0].state is not state
                        or state.position != queue[0].next_offset
                    ):
                        self.discarded += 1
                        continue  # seeked while the fetch was out
                    if p.error_code or p.diverging_epoch.epoch >= 0:
                        # a prefetch: sort it out once the data before it is handed out
                        continue
                elif state.position != spec.fetch_offset:
                    self.discarded += 1
                    continue  # seeked while the fetch was out
                if p.error_code:
                    self._partition_error(node, tp, state, spec, p, response)
                    continue
                state.highwater = p.high_watermark
                state.fetched_at_ms = now_ms
                if p.last_stable_offset >= 0:
                    state.last_stable_offset = p.last_stable_offset
                if p.log_start_offset >= 0:
                    state.log_start_offset = p.log_start_offset
                diverging = p.diverging_epoch
                if diverging.epoch >= 0 and diverging.end_offset >= 0:
                    self._truncated(tp, state, diverging.epoch, diverging.end_offset)
                    continue
                if p.preferred_read_replica >= 0 and p.preferred_read_replica != node:
                    state.preferred_replica = p.preferred_read_replica
                    state.preferred_until = (
                        loop_time + self.client.config.metadata_max_age_ms / 1000
                    )
                    self.wake()
                    continue
                records = p.records
                if not records:
                    continue
                if metrics is not None:
                    total += len(records)
                    metrics.partition_fetched(tp.topic, len(records))
                view = memoryview(records)
                cut = first_batch_size(view)
                if cut is not None:
                    limit = min(self.client.config.max_response_size, _MAX_INT32)
                    if cut > limit:
                        # no answer we accept could ever carry it
                        self._partition_errors[tp] = (
                            state,
                            state.seeks,
                            spec.fetch_offset,
                            CorruptRecordError(
                                f"{tp.topic}-{tp.partition} at offset {spec.fetch_offset}: "
                                f"a record batch of {cut} bytes, more than "
                                f"max_response_size ({limit})"
                            ),
                        )
                        self._data.set()
                        continue
                    if cut > spec.max_bytes:
                        # a batch larger than we allowed: ask for at least its size
                        self._oversized[tp] = min(limit, max(cut, spec.max_bytes * 2))
                    # else the answer's own byte limit (the budget's) cut it: fetch again
                    self.wake()
                    continue
                self._oversized.pop(tp, None)
                aborted = None
                if self._read_committed and p.aborted_transactions:
                    aborted = AbortedFilter(
                        (a.producer_id, a.first_offset) for a in p.aborted_transactions
                    )
                fd = FetchedData(
                    tp,
                    state,
                    spec.fetch_offset,
                    view,
                    check_crc=config.check_crcs,
                    aborted=aborted,
                    key_deserializer=config.key_deserializer,
                    value_deserializer=config.value_deserializer,
                )
                base = view.obj
                if isinstance(base, (bytes, bytearray)) and len(view) < len(base):
                    if frame is None:
                        frame = SharedFrame(len(base), self.budget)
                    frame.join(fd)
                else:
                    fd.charge(self.budget)
                if queue:
                    queue.append(fd)
                else:
                    self._buffer[tp] = [fd]
                got_data = True
                carried.add(tp)
                self._serial += 1
                self._served[tp] = self._serial
                if caught_up:
                    last = self._readable_end(p.last_stable_offset, p.high_watermark)
                    caught_up = last is not None and fd.end_offset >= last
        if frame is not None:
            frame.settle()  # e.g. one small partition in a big answer: copy it now
        hand_first = False
        if got_data:
            hand_first = (
                caught_up and self._data.awaited() and self._rest_caught_up(plan, mine, carried)
            )
            if hold_wake:
                self._wake_held = True
            else:
                self._data.set()
        return total, hand_first

    def _rest_caught_up(
        self,
        plan: FetchPlan,
        mine: dict[TopicPartition, PartitionState],
        carried: set[TopicPartition],
    ) -> bool:
        """Whether the fetched partitions that carried no records have nothing at the
        broker past where they were fetched from (by their last known high watermark or
        last stable offset): one left out because the answer's byte limit ran out, or
        omitted by an incremental session, may still lag."""
        for tp, spec in plan.wanted.items():
            state = mine.get(tp)
            if state is None or tp in carried:
                continue
            last = self._readable_end(state.last_stable_offset, state.highwater)
            if last is not None and last > spec.fetch_offset:
                return False
        return True

    def _readable_end(self, lso: int | None, highwater: int | None) -> int | None:
        """Where what this consumer may read ends at the broker: the last stable offset
        under read_committed when known (>= 0), else the high watermark."""
        if self._read_committed and lso is not None and lso >= 0:
            return lso
        return highwater

    def _partition_error(
        self,
        node: int,
        tp: TopicPartition,
        state: PartitionState,
        spec: PartitionFetch,
        p: Any,
        response: Any,
    ) -> None:
        code = p.error_code
        exc = for_code(code)(f"Fetch {tp.topic}-{tp.partition} at offset {spec.fetch_offset}")
        on_follower = state.preferred_replica is not None
        state.preferred_replica = None
        if code == _OFFSET_OUT_OF_RANGE:
            if on_follower:
                return  # the follower may lag; ask the leader
            strategy = self.config.auto_offset_reset
            if strategy == "none":
                self._partition_errors[tp] = (
                    state,
                    state.seeks,
                    spec.fetch_offset,
                    OffsetOutOfRangeConsumerError({tp: spec.fetch_offset}),
                )
                self._data.set()
            else:
                log.info(
                    "offset %d of %s is out of range; resetting to %s",
                    spec.fetch_offset,
                    tp,
                    strategy,
                )
                self.subs.request_reset(tp, "earliest" if strategy == "earliest" else "latest")
            return
        if code in _STALE_LEADER or exc.invalid_metadata:
            leader = p.current_leader
            if leader.leader_id >= 0 and leader.leader_epoch >= 0:
                endpoints = [
                    BrokerInfo(e.node_id, e.host, e.port, e.rack)
                    for e in getattr(response, "node_endpoints", None) or ()
                ]
                self.client.metadata.apply_leader_hint(
                    tp.topic, tp.partition, leader.leader_id, leader.leader_epoch, endpoints
                )
            else:
                self.client.metadata.request_refresh()
            log.debug("fetch %s from node %d: %s", tp, node, exc)
            self._back_off(tp)
            return
        if exc.retriable:
            log.debug("fetch %s from node %d: %s; retrying", tp, node, exc)
            self._back_off(tp)
            return
        log.warning("fetch %s from node %d failed: %s", tp, node, exc)
        self._partition_errors[tp] = (state, state.seeks, spec.fetch_offset, exc)
        self._data.set()

    def _back_off(self, tp: TopicPartition) -> None:
        loop_time = asyncio.get_running_loop().time()
        self._backoff_until[tp] = loop_time + self.client.config.retry_backoff_ms / 1000
        self.wake()  # the manager sleeps until the earliest back-off ends

    def _truncated(
        self, tp: TopicPartition, state: PartitionState, epoch: int, end_offset: int
    ) -> None:
        position = state.position
        if position is not None and end_offset < position:
            log.warning(
                "log truncation on %s: records from offset %d to %d are gone from the "
                "leader (epoch %d ended at %d); consuming from %d",
                tp,
                end_offset,
                position,
                epoch,
                end_offset,
                end_offset,
            )
            state.position = end_offset
        state.leader_epoch = epoch
        self.subs.notify_changed()

    # -- position housekeeping -----------------------------------------------------------

    async def _resolve_resets(self) -> bool:
        """ListOffsets for partitions waiting for a reset; True if some must be retried."""
        pending = self.subs.pending_resets()
        snap = self.client.metadata.snapshot
        specs: dict[TopicPartition, tuple[int, int]] = {}
        for tp, strategy in pending.items():
            info = snap.partition(tp.topic, tp.partition)
            epoch = info.leader_epoch if info is not None else -1
            specs[tp] = (EARLIEST if strategy == "earliest" else LATEST, epoch)
        results, errors = await self.offsets.list_offsets_once(specs)
        for tp, answer in results.items():
            strategy = pending[tp]
            if self.subs.finish_reset(tp, strategy, answer.offset):
                log.debug("%s reset to %s offset %d", tp, strategy, answer.offset)
        for exc in errors.values():
            if not exc.retriable:
                self._errors.append(exc)
                self._data.set()
        return bool(errors)

    async def _validate_positions(self) -> bool:
        """KIP-320: check positions that came with a leader epoch against the log."""
        snap = self.client.metadata.snapshot
        states = self.subs.states()
        specs: dict[TopicPartition, tuple[int, int]] = {}
        for tp in self.subs.needs_validation():
            info = snap.partition(tp.topic, tp.partition)
            specs[tp] = (states[tp].leader_epoch, info.leader_epoch if info is not None else -1)
        try:
            results, errors = await self.offsets.epoch_end_offsets_once(specs)
        except UnsupportedVersionError:
            results, errors = {}, {}
            for tp in specs:
                states[tp].validate_epoch = False
        states = self.subs.states()
        for tp, end in results.items():
            state = states.get(tp)
            if state is None or not state.validate_epoch or state.leader_epoch != specs[tp][0]:
                continue
            state.validate_epoch = False
            if (
                end.end_offset >= 0
                and state.position is not None
                and end.end_offset < state.position
            ):
                self._truncated(tp, state, end.leader_epoch, end.end_offset)
        for tp, exc in errors.items():
            if not exc.retriable:
                state = states.get(tp)
                if state is not None:
                    state.validate_epoch = False  # cannot check; consume from the position
                log.warning("cannot validate the position of %s: %s", tp, exc)
        self.subs.notify_changed()
        return any(exc.retriable for exc in errors.values())
