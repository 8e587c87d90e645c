"""The sender: one task that drains the accumulator into per-broker Produce requests;
``decide()`` rules for each partition's error; InitProducerId and the epoch bump.

A batch refused as too large is split (``Accumulator.split``, KIP-126); the epoch bump
is taken locally where brokers allow it (KIP-360, ``Sender._bump_locally``).

Each request goes out on the broker's "produce" connection (at most
``max_in_flight_requests_per_connection`` per broker): written in the drain loop's own
step when the connection is open and nothing makes it wait (``BrokerConnection.send_now``,
its answer applied from the connection's read path), else as a task the sender owns;
either way the outcome is applied to the batches synchronously when the answer
arrives. ``decide()`` is the pure rule for one partition's answer.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import math
import random
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from aiokproto.cluster.client import ClusterClient
from aiokproto.cluster.snapshot import BrokerInfo, ClusterSnapshot
from aiokproto.config import ClientConfig
from aiokproto.errors import (
    DuplicateSequenceNumberError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    KafkaError,
    KafkaProtocolError,
    KafkaTimeoutError,
    MessageTooLargeError,
    OutOfOrderSequenceNumberError,
    ProducerFencedError,
    RecordListTooLargeError,
    UnknownProducerIdError,
    for_code,
)
from aiokproto.logs import RepeatingWarning
from aiokproto.net.connection import BrokerConnection
from aiokproto.producer.accumulator import PATIENT_DEPTH, Accumulator
from aiokproto.producer.batch import (
    NO_IDENTITY,
    BatchResult,
    ProducerBatch,
    ProducerIdentity,
    settle_parents,
)
from aiokproto.producer.options import ProducerOptions
from aiokproto.protocol.messages.init_producer_id import InitProducerIdRequest
from aiokproto.protocol.messages.produce import (
    ProduceRequest,
    ProduceRequestPartitionProduceData,
    ProduceRequestTopicProduceData,
)
from aiokproto.soonest import SoonestTimer

log = logging.getLogger(__name__)

_NO_ANSWER = BatchResult(-1, -1, -1)  # acks=0
_ZERO_UUID = uuid.UUID(int=0)
_FIRST_TOPIC_ID_VERSION = 13
_MIN_PRODUCE_VERSION = 3  # RecordBatch v2
_LAST_TXN_V1_PRODUCE_VERSION = 11
_FIRST_KIP360_INIT_VERSION = 3  # InitProducerId v3: brokers that take an epoch bump
_MAX_EPOCH = 32767  # int16: past it the producer needs a new id
# failures after which the batch's sequence numbers are not taken back: answers about
# the producer's sequence or epoch themselves (taking them back would not mend what the
# broker holds), and UNKNOWN_SERVER_ERROR (no telling what was written)
_KEEP_SEQUENCE_ERRORS = frozenset(
    {
        -1,
        OutOfOrderSequenceNumberError.errno,
        UnknownProducerIdError.errno,
        DuplicateSequenceNumberError.errno,
        InvalidProducerEpochError.errno,
        ProducerFencedError.errno,
        InvalidProducerIdMappingError.errno,
    }
)


class Action(enum.Enum):
    DONE = "done"  # delivered (or a duplicate of a delivered batch)
    RETRY = "retry"  # send again after back-off
    RETRY_NOW = "retry_now"  # the leader moved and we know where: no back-off
    RESET = "reset"  # idempotence state lost: new epoch, renumber, send again
    FAIL = "fail"


def decide(
    error_code: int,
    *,
    idempotent: bool,
    first_unresolved: bool,
    leader_hint_applied: bool = False,
    transactional: bool = False,
) -> Action:
    """What to do with a batch given its partition's error code in a Produce answer.

    A transactional producer never bumps its epoch on its own (InitProducerId with the
    transactional id would end the open transaction): where an idempotent one resets,
    the batch fails and the transaction must be aborted (the abort bumps the epoch)."""
    if error_code == 0 or error_code == DuplicateSequenceNumberError.errno:
        return Action.DONE
    if idempotent and error_code in (
        OutOfOrderSequenceNumberError.errno,
        UnknownProducerIdError.errno,
    ):
        # Before the first unresolved batch is settled, later ones get these errors
        # only because the earlier one is missing: plain retry, in order.
        if not first_unresolved:
            return Action.RETRY
        return Action.FAIL if transactional else Action.RESET
    error = for_code(error_code)
    if error.retriable:
        return Action.RETRY_NOW if leader_hint_applied else Action.RETRY
    return Action.FAIL


def backoff_s(config: ClientConfig, attempts: int) -> float:
    """Exponential back-off with +/-20% jitter from retry_backoff_ms to ..._max_ms."""
    exp = min(max(attempts - 1, 0), 20)
    delay = min(config.retry_backoff_max_ms, config.retry_backoff_ms * (1 << exp))
    return delay * random.uniform(0.8, 1.2) / 1000


class Sender:
    """Owns the drain loop task and every request task."""

    def __init__(
        self,
        client: ClusterClient,
        accumulator: Accumulator,
        options: ProducerOptions,
        config: ClientConfig,
        on_fatal: Callable[[], None],
        on_metadata: Callable[[], None],
    ) -> None:
        self._client = client
        self._on_fatal = on_fatal
        self._on_metadata = on_metadata
        self._acc = accumulator
        self._opts = options
        self._config = config
        self._loop = asyncio.get_running_loop()
        self._node_in_flight: dict[int, int] = {}
        # request tasks per broker that have not yet reached conn.send(): while one
        # waits (to start, for the connection), a later request must not be written
        # now, or it overtakes the earlier one (send() keeps the order of its callers)
        self._unwritten: dict[int, int] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._answers: set[_Answer] = set()  # requests written by send_now, unanswered
        self._expiry = _InFlightExpiry(self._loop, options.delivery_timeout_ms)
        self._waiter: asyncio.Future[None] | None = None
        self._wake_at: float | None = None  # loop time of the pass the waiter is set for
        # the waiting loop skipped its drain: every broker's in-flight requests are full
        # (only a request's end, a wake() or the first queued deadline can change that)
        self._busy = False
        self._leaderless = False  # the last drain found partitions with no known leader
        # woken during a pass (a request written by send_now ended in it: acks=0, or a
        # failed write): the loop runs another pass instead of waiting
        self._again = False
        self._bump_task: asyncio.Task[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._seen: ClusterSnapshot | None = None  # the snapshot the drain loop last saw
        self.fatal: KafkaError | None = None
        self.txn_v2 = False  # transactions v2 (KIP-890): set by the transaction manager
        self._odd_epoch = RepeatingWarning(log)
        # a broker speaks InitProducerId v3+ (KIP-360, Kafka 2.5+): it accepts a new
        # epoch of an idempotent producer id from sequence 0, so the producer bumps its
        # epoch itself, without a request (and without a new producer id each time)
        self._kip360 = False

    # -- lifecycle ----------------------------------------------------------------

    def start(self) -> None:
        self._task = self._loop.create_task(self._run(), name="aiokproto-producer-sender")

    async def close(self) -> None:
        """Cancel the loop and every request task (their batches stay unresolved)."""
        tasks = [t for t in (self._task, self._bump_task, *self._tasks) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
        self._answers.clear()  # as a cancelled task: a late answer changes nothing
        self._expiry.close()
        self._task = self._bump_task = None

    def wake(self) -> None:
        waiter = self._waiter
        if waiter is None:
            self._again = True
        elif not waiter.done():
            waiter.set_result(None)

    def wake_by(self, when: float) -> None:
        """Make sure a pass runs by loop time ``when`` (a lingering batch is ready
        then): nothing to do when the waiting loop's timer fires by then."""
        if self._busy:
            return  # no slot to send it in: the end of a request wakes the loop
        at = self._wake_at
        if at is None or at > when:
            self.wake()

    @property
    def requests_in_flight(self) -> int:
        return len(self._tasks) + len(self._answers)

    # -- the drain loop -----------------------------------------------------------

    async def _run(self) -> None:
        try:
            await self._loop_forever()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug: fail loudly, never leave records hanging
            log.exception("producer sender failed")
            self.fatal = KafkaError(f"the producer's sender failed: {exc!r}")
            self.fatal.__cause__ = exc
            self._on_fatal()
            self._acc.fail_all(self.fatal)

    async def _loop_forever(self) -> None:
        loop = self._loop
        acc = self._acc
        meta = self._client.metadata
        retry_backoff = self._config.retry_backoff_ms / 1000
        self._seen = meta.snapshot
        leader_of = self._seen.leader_for  # one per snapshot: the drain keeps its answers
        while True:
            now = loop.time()
            snapshot = meta.snapshot
            fresh = snapshot is not self._seen
            if fresh:
                self._seen = snapshot
                leader_of = snapshot.leader_for
                self._on_metadata()
            elif not self._leaderless and now < acc.expiry_due and self._all_busy(snapshot):
                # A drain could send nothing: skip it (at 1,000 partitions, passes woken
                # by lingers ending while the requests were out scanned every queued
                # partition for nothing: a fifth of the producer's CPU). A request's end
                # wakes the loop; the first queued deadline too, to expire it.
                await self._wait(None if acc.expiry_due == math.inf else acc.expiry_due, True)
                continue
            plan = acc.drain(now, leader_of, self._capacity, self._out)
            self._leaderless = bool(plan.leaderless)
            for node, batches in plan.requests:
                self._dispatch(node, batches, snapshot)
            if plan.reset_wanted and self._bump_task is None and not acc.transactional:
                if self._bump_locally():
                    plan.wake_at(now)  # the partitions waiting for it adopt it now
                else:
                    self._bump_task = loop.create_task(self._bump(), name="aiokproto-producer-bump")
            if plan.leaderless:
                meta.request_refresh(plan.leaderless)
                plan.wake_at(now + retry_backoff)
            await self._wait(plan.next_wake, False)

    async def _wait(self, when: float | None, busy: bool) -> None:
        """Until ``wake()``, or loop time ``when``; at once when woken during the pass."""
        if self._again:
            self._again = False
            return
        loop = self._loop
        waiter = self._waiter = loop.create_future()
        self._wake_at = when
        self._busy = busy
        timer = None if when is None else loop.call_at(when, self.wake)
        try:
            await waiter
        finally:
            self._waiter = self._wake_at = None
            self._busy = False
            if timer is not None:
                timer.cancel()

    def _capacity(self, node: int) -> int:
        return self._opts.max_in_flight - self._node_in_flight.get(node, 0)

    def _out(self, node: int) -> int:
        return self._node_in_flight.get(node, 0)

    def _all_busy(self, snapshot: ClusterSnapshot) -> bool:
        """No broker can take a queued batch: each has ``max_in_flight`` requests out,
        or ``PATIENT_DEPTH`` while every queued batch waits for fewer (``Accumulator.
        drain``: nothing full, retried or split was queued since the last drain)."""
        brokers = snapshot.brokers
        if not brokers:
            return False
        acc = self._acc
        limit = self._opts.max_in_flight
        if acc.patient and not acc.urgent:
            limit = min(limit, PATIENT_DEPTH)
        in_flight = self._node_in_flight
        for node in brokers:
            if in_flight.get(node, 0) < limit:
                return False
        return True

    def _dispatch(self, node: int, batches: list[ProducerBatch], snapshot: ClusterSnapshot) -> None:
        self._node_in_flight[node] = self._node_in_flight.get(node, 0) + 1
        conn = self._client.open_connection(node, "produce")
        if (
            conn is not None
            and not self._unwritten.get(node)
            and conn.ready_now(self._opts.acks != 0)
        ):
            # written in this step: no task and no loop pass of its own (at linger 0,
            # one request per record, that was a loop pass and a task per record)
            self._produce_now(conn, node, batches, snapshot)
            return
        self._unwritten[node] = self._unwritten.get(node, 0) + 1
        task = self._loop.create_task(self._produce(node, batches, snapshot))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- one request --------------------------------------------------------------

    async def _produce(
        self, node: int, batches: list[ProducerBatch], snapshot: ClusterSnapshot
    ) -> None:
        watched = self._expiry.watch(batches)
        try:
            try:
                try:
                    conn = await self._client.connection(node, "produce")
                finally:
                    # no suspension from here into conn.send(), which then holds the
                    # connection's FIFO write order (a task cancelled before it ran
                    # leaves its count: only close() cancels them)
                    self._unwritten[node] -= 1
                prepared = self._prepare(conn, batches, snapshot)
                if prepared is None:
                    return
                request, version, batches, names = prepared
                if self._opts.acks == 0:
                    await conn.send(request, version, expect_response=False)
                    self._unanswered(batches)
                    return
                response = await conn.send(
                    request, version, timeout_ms=self._config.request_timeout_ms + 1000
                )
            except KafkaError as exc:
                self._request_failed(batches, exc)
                return
            self._answered(batches, names, response)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a codec or logic bug: the batches fail, visibly
            self._unexpected(node, batches, exc)
        finally:
            self._request_over(node, watched)

    def _produce_now(
        self,
        conn: BrokerConnection,
        node: int,
        batches: list[ProducerBatch],
        snapshot: ClusterSnapshot,
    ) -> None:
        """``_produce`` without a task, on a connection that is ``ready_now()``: the
        request is written here and its answer handled by an ``_Answer``."""
        watched = self._expiry.watch(batches)
        answer: _Answer | None = None
        try:
            try:
                prepared = self._prepare(conn, batches, snapshot)
                if prepared is None:
                    return
                request, version, batches, names = prepared
                if self._opts.acks == 0:
                    conn.send_now(request, version, None)
                    self._unanswered(batches)
                    return
                answer = _Answer(self, node, batches, names, watched)
                self._answers.add(answer)
                conn.send_now(
                    request,
                    version,
                    answer.on_answer,
                    timeout_ms=self._config.request_timeout_ms + 1000,
                )
            except KafkaError as exc:
                if answer is not None:
                    self._answers.discard(answer)
                    answer = None
                self._request_failed(batches, exc)
        except Exception as exc:  # a codec or logic bug: the batches fail, visibly
            if answer is not None:
                self._answers.discard(answer)
                answer = None
            self._unexpected(node, batches, exc)
        finally:
            if answer is None:  # over already; else when the answer comes
                self._request_over(node, watched)

    def _prepare(
        self, conn: BrokerConnection, batches: list[ProducerBatch], snapshot: ClusterSnapshot
    ) -> tuple[ProduceRequest, int, list[ProducerBatch], dict[uuid.UUID, str]] | None:
        """The request for the batches that may go on ``conn`` now, its version, those
        batches and the topic names by id; None when every batch was held back."""
        acc = self._acc
        if acc.idempotent:
            if not self._kip360:
                init = conn.api_versions.get(InitProducerIdRequest.API_KEY)
                self._kip360 = init is not None and init[1] >= _FIRST_KIP360_INIT_VERSION
            batches = self._in_order_on(conn, batches)
            if not batches:
                return None
        version = conn.version_for(ProduceRequest, _MIN_PRODUCE_VERSION)
        if acc.transactional and not self.txn_v2:
            # v12+ tells the broker the partitions are added implicitly (v2)
            version = min(version, _LAST_TXN_V1_PRODUCE_VERSION)
        request, names, ids_known = self._request(batches, snapshot)
        metrics = acc.metrics
        if metrics is not None:
            metrics.request_sent(sum(b.record_count for b in batches))
        if version >= _FIRST_TOPIC_ID_VERSION and not ids_known:
            version = _FIRST_TOPIC_ID_VERSION - 1  # name the topics instead
        return request, version, batches, names

    def _unanswered(self, batches: list[ProducerBatch]) -> None:
        for batch in batches:
            self._acc.complete(batch, _NO_ANSWER)  # acks=0

    def _answered(
        self, batches: list[ProducerBatch], names: dict[uuid.UUID, str], response: Any
    ) -> None:
        metrics = self._acc.metrics
        if metrics is not None:
            metrics.throttled(response.throttle_time_ms)
        self._apply(response, batches, names)

    def _unexpected(self, node: int, batches: list[ProducerBatch], exc: Exception) -> None:
        log.exception("producing to node %s failed unexpectedly", node)
        error = KafkaError(f"producing to node {node} failed unexpectedly: {exc!r}")
        error.__cause__ = exc
        for batch in batches:
            self._acc.fail(batch, error)

    def _request_over(self, node: int, watched: int) -> None:
        self._expiry.done(watched)
        self._node_in_flight[node] -= 1
        self._wake_if_useful()

    def _wake_if_useful(self) -> None:
        """Wake the drain loop after a request ends only if a pass could do something:
        a batch is queued (the freed slot may send it, a retry was queued) or the
        metadata changed. A pass over an empty accumulator does nothing at all, and at
        one record per request it was a second loop pass per record."""
        if self._acc.has_queued or self._client.metadata.snapshot is not self._seen:
            self.wake()

    def _in_order_on(self, conn: object, batches: list[ProducerBatch]) -> list[ProducerBatch]:
        """The batches that may be written to ``conn`` now (every earlier batch of their
        partition is already on it); the others are held back, unsent, until the
        partition's in-flight batches are resolved."""
        ready: list[ProducerBatch] = []
        for batch in batches:
            if batch.queue.follows_on(batch, conn):
                batch.conn = conn
                ready.append(batch)
            else:
                log.debug("%s: held back until the batches before it are resolved", batch)
                self._acc.hold_back(batch)
        return ready

    def _request(
        self, batches: list[ProducerBatch], snapshot: ClusterSnapshot
    ) -> tuple[ProduceRequest, dict[uuid.UUID, str], bool]:
        """The request, topic id -> name, and whether every topic id is known."""
        by_topic: dict[str, list[ProduceRequestPartitionProduceData]] = {}
        for batch in batches:
            assert batch.payload is not None
            by_topic.setdefault(batch.topic, []).append(
                ProduceRequestPartitionProduceData(
                    index=batch.partition, records=memoryview(batch.payload)
                )
            )
        names: dict[uuid.UUID, str] = {}
        topic_data = []
        for topic, parts in by_topic.items():
            info = snapshot.topics.get(topic)
            topic_id = info.topic_id if info is not None else _ZERO_UUID
            names[topic_id] = topic
            topic_data.append(
                ProduceRequestTopicProduceData(name=topic, topic_id=topic_id, partition_data=parts)
            )
        request = ProduceRequest(
            transactional_id=self._opts.transactional_id,
            acks=self._opts.acks,
            timeout_ms=self._config.request_timeout_ms,
            topic_data=topic_data,
        )
        return request, names, _ZERO_UUID not in names

    # -- outcomes -----------------------------------------------------------------

    def _request_failed(self, batches: Iterable[ProducerBatch], error: KafkaError) -> None:
        if error.retriable:
            for batch in batches:
                self._retry(batch, error, now=False)
        else:
            for batch in batches:
                self._acc.fail(batch, error)

    def _retry(self, batch: ProducerBatch, error: KafkaError, *, now: bool) -> None:
        loop_now = self._loop.time()
        if loop_now >= batch.deadline:
            self._acc.fail(
                batch,
                KafkaTimeoutError(
                    f"{batch.record_count} record(s) for {batch.topic}[{batch.partition}] "
                    f"not delivered within delivery_timeout_ms="
                    f"{self._opts.delivery_timeout_ms} after {batch.attempts} attempt(s); "
                    f"last error: {error}"
                ),
            )
        elif batch.attempts > self._opts.retries:
            self._acc.fail(batch, error)
        else:
            delay = 0.0 if now else backoff_s(self._config, batch.attempts)
            self._acc.retry(batch, error, loop_now + delay)

    def _apply(
        self, response: Any, batches: list[ProducerBatch], names: dict[uuid.UUID, str]
    ) -> None:
        by_key = {(b.topic, b.partition): b for b in batches}
        endpoints = [BrokerInfo(e.node_id, e.host, e.port, e.rack) for e in response.node_endpoints]
        complete = self._acc.complete
        for topic_response in response.responses:
            topic = topic_response.name or names.get(topic_response.topic_id, "")
            for part in topic_response.partition_responses:
                batch = by_key.pop((topic, part.index), None)
                if batch is None:
                    continue
                if part.error_code:
                    self._partition_answer(batch, part, endpoints)
                else:  # the common case, inline: one call less per batch
                    result = BatchResult(
                        part.base_offset, part.log_append_time_ms, part.log_start_offset
                    )
                    complete(batch, result)
        for batch in by_key.values():
            self._retry(
                batch,
                KafkaProtocolError(
                    f"the Produce answer did not mention {batch.topic}[{batch.partition}]"
                ),
                now=False,
            )

    def _partition_answer(
        self, batch: ProducerBatch, part: Any, endpoints: list[BrokerInfo]
    ) -> None:
        code = part.error_code
        if code == 0:
            self._acc.complete(
                batch, BatchResult(part.base_offset, part.log_append_time_ms, part.log_start_offset)
            )
            return
        pq = batch.queue
        hint = False
        error_cls = for_code(code)
        if error_cls.invalid_metadata:
            leader = part.current_leader
            if leader.leader_id >= 0:
                hint = self._client.metadata.apply_leader_hint(
                    batch.topic, batch.partition, leader.leader_id, leader.leader_epoch, endpoints
                )
            if not hint:
                self._client.metadata.request_refresh((batch.topic,))
        action = decide(
            code,
            idempotent=self._acc.idempotent,
            first_unresolved=pq.is_first_unresolved(batch),
            leader_hint_applied=hint,
            transactional=self._acc.transactional,
        )
        if action is Action.DONE:
            self._acc.complete(
                batch, BatchResult(part.base_offset, part.log_append_time_ms, part.log_start_offset)
            )
            return
        error = error_cls(_describe(batch, part))
        log.debug(
            "%s: %s -> %s (unresolved %s)",
            batch,
            error_cls.__name__,
            action.value,
            [b.sequence for b in pq.unresolved],
        )
        if action is Action.FAIL:
            if isinstance(error, (MessageTooLargeError, RecordListTooLargeError)):
                size = len(batch.payload or b"")
                if batch.record_count > 1 and size and not batch.future.done():
                    # KIP-126: it was not written; its records go again in smaller
                    # batches, in its place (only a record too large alone fails)
                    pieces = self._acc.split(batch)  # 0: the transaction is failing
                    log.info("%s: %s; split into %d batches", batch, error, pieces)
                    return
                error = error_cls(
                    _describe(batch, part) + f"; the batch had {batch.record_count} record(s) "
                    f"and {size} bytes: "
                    + (
                        "the record alone is over the topic's limit (max.message.bytes)"
                        if batch.record_count == 1
                        else f"lower batch_size ({self._opts.batch_size}) or raise the "
                        "topic's max.message.bytes"
                    )
                )
            if code in _KEEP_SEQUENCE_ERRORS:
                self._acc.fail(batch, error)
            else:
                self._acc.fail_refused(batch, error)  # not written: its sequence is free
            return
        if action is Action.RESET:
            log.info("%s: %s; bumping the producer epoch", batch, error)
            pq.needs_reset = True
        self._retry(batch, error, now=action is Action.RETRY_NOW)

    # -- producer id ----------------------------------------------------------------

    async def init_producer_id(
        self, current: ProducerIdentity, timeout_ms: int
    ) -> ProducerIdentity:
        """InitProducerId (KIP-360: with the current id and epoch), retried while
        retriable within ``timeout_ms``."""
        deadline = self._loop.time() + timeout_ms / 1000
        attempts = 0
        while True:
            attempts += 1
            try:
                response = await self._client.send_any(
                    InitProducerIdRequest(
                        transactional_id=None,
                        transaction_timeout_ms=60_000,
                        producer_id=current.producer_id,
                        producer_epoch=current.epoch,
                    )
                )
                if not response.error_code:
                    return ProducerIdentity(response.producer_id, response.producer_epoch)
                error: KafkaError = for_code(response.error_code)("InitProducerId")
            except KafkaError as exc:
                error = exc
            if not error.retriable:
                raise error
            delay = backoff_s(self._config, attempts)
            if self._loop.time() + delay >= deadline:
                raise KafkaTimeoutError(
                    f"no producer id within {timeout_ms} ms; last error: {error}"
                ) from error
            await asyncio.sleep(delay)

    def _bump_locally(self) -> bool:
        """The next epoch of the current producer id, taken without asking (as the Java
        producer does for an idempotent producer): the partitions reset for it start
        again from sequence 0. One bump serves every partition that failed under the
        old epoch (they adopt the new one once their requests are over): batches
        failing together cost one bump, never a request or a producer id each. False
        when a request is needed: an old broker, or the epoch is at its maximum."""
        current = self._acc.identity
        if not self._kip360 or current.producer_id < 0 or current.epoch >= _MAX_EPOCH:
            return False
        identity = ProducerIdentity(current.producer_id, current.epoch + 1)
        log.info(
            "producer id %s: epoch %s -> %s", identity.producer_id, current.epoch, identity.epoch
        )
        self._acc.set_identity(identity)
        return True

    async def _bump(self) -> None:
        current = self._acc.identity
        attempts = 0
        try:
            while True:
                try:
                    # without a transactional id the broker gives a new producer id
                    # whatever it is told; id and epoch are not sent (v0-v2 cannot
                    # carry them: a broker before 2.5 refused the request)
                    identity = await self.init_producer_id(
                        NO_IDENTITY, self._config.default_api_timeout_ms
                    )
                except KafkaError as exc:
                    if exc.retriable:
                        continue
                    log.error("cannot get a new producer epoch: %s", exc)
                    self.fatal = exc
                    self._on_fatal()
                    self._acc.fail_all(exc)
                    return
                if identity.producer_id == current.producer_id and (
                    identity.epoch <= current.epoch
                ):
                    # not a new epoch (a broken answer): asking again at once would
                    # spin; the partitions waiting for it expire at delivery_timeout_ms
                    attempts += 1
                    self._odd_epoch(
                        f"InitProducerId answered epoch {identity.epoch} for producer "
                        f"{identity.producer_id}, not a newer one than {current.epoch}; "
                        "asking again"
                    )
                    await asyncio.sleep(backoff_s(self._config, attempts))
                    continue
                log.info("producer id %s epoch %s", identity.producer_id, identity.epoch)
                self._acc.set_identity(identity)
                return
        finally:
            self._bump_task = None
            self.wake()


class _Answer:
    """A request ``Sender._produce_now`` wrote: its answer, handled as ``_produce``
    handles one, from the connection's read path (dropped once the sender closed)."""

    __slots__ = ("batches", "names", "node", "sender", "watched")

    def __init__(
        self,
        sender: Sender,
        node: int,
        batches: list[ProducerBatch],
        names: dict[uuid.UUID, str],
        watched: int,
    ) -> None:
        self.sender = sender
        self.node = node
        self.batches = batches
        self.names = names
        self.watched = watched

    def on_answer(self, response: Any, error: KafkaError | None) -> None:
        sender = self.sender
        if self not in sender._answers:
            return  # the sender closed: as for a cancelled request task
        sender._answers.discard(self)
        try:
            if error is not None:
                sender._request_failed(self.batches, error)
            else:
                sender._answered(self.batches, self.names, response)
        except Exception as exc:  # a codec or logic bug: the batches fail, visibly
            sender._unexpected(self.node, self.batches, exc)
        finally:
            sender._request_over(self.node, self.watched)


class _InFlightExpiry:
    """Tells the senders of in-flight batches that ``delivery_timeout_ms`` is over
    while their request is still out (a slow or throttling broker). The batches stay
    in flight for the bookkeeping until the request ends (order, sequences, memory);
    its late answer can no longer change what the caller was told.

    One timer for every request in flight, at the earliest deadline: a request that
    ends leaves it armed, and when it fires with nothing due it re-arms for what is
    still out."""

    __slots__ = ("_loop", "_next", "_requests", "_timeout_ms", "_timer")

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout_ms: int) -> None:
        self._loop = loop
        self._timeout_ms = timeout_ms
        self._requests: dict[int, list[ProducerBatch]] = {}
        self._next = 0
        self._timer = SoonestTimer(self._fire)

    def watch(self, batches: list[ProducerBatch]) -> int:
        """Watch a request's batches until ``done(token)``."""
        token = self._next
        self._next += 1
        self._requests[token] = batches
        first = min((b.deadline for b in batches if not b.future.done()), default=None)
        if first is not None:
            self._timer.arm_by(first)
        return token

    def done(self, token: int) -> None:
        self._requests.pop(token, None)

    def _fire(self) -> None:
        now = self._loop.time()
        soonest: float | None = None
        for batches in self._requests.values():
            for batch in batches:
                if batch.future.done() or batch.split is not None:
                    continue  # a split batch's pieces are watched by their own requests
                if batch.deadline > now:
                    if soonest is None or batch.deadline < soonest:
                        soonest = batch.deadline
                    continue
                batch.future.set_exception(
                    KafkaTimeoutError(
                        f"{batch.record_count} record(s) for {batch.topic}[{batch.partition}] "
                        f"not acknowledged within delivery_timeout_ms={self._timeout_ms} "
                        "(the request is still out: they may or may not have been written)"
                    )
                )
                batch.future.exception()  # a handle may never be awaited
                if batch.parent is not None:
                    settle_parents(batch)
        if soonest is not None:
            self._timer.arm_by(soonest)

    def close(self) -> None:
        self._timer.cancel()
        self._requests.clear()


def _describe(batch: ProducerBatch, part: Any) -> str:
    text = f"{batch.topic}[{batch.partition}]"
    message = getattr(part, "error_message", None)
    if message:
        text += f": {message}"
    for record_error in getattr(part, "record_errors", None) or ():
        text += f"; record {record_error.batch_index}: {record_error.batch_index_error_message}"
    return text
