"""The share consumer's fetching: one task per broker that leads an assigned partition
or has acknowledgements due, run by a ``BrokerTasks`` (``cluster/broker_tasks.py``, the
per-broker supervisor the regular fetcher uses too) and started by a supervisor task
that follows the assignment and the leaders.

Each broker's task runs that broker's share session: a ShareFetch (carrying the
acknowledgements due for that broker) whenever nothing acquired from it is left
undelivered, a ShareAcknowledge when only acknowledgements are due (a ``commit()``),
and ShareAcknowledge with epoch -1 at the end. One request in flight per broker:
session epochs are sequential.

Acquired records wait in ``buffer`` until the consumer takes them (``take``); ``book``
(``AckBook``) holds what each broker acquired for us and the acknowledgements due.
A task's failure is fatal: every call of the application raises it.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aiokproto.cluster.backoff import Backoff
from aiokproto.cluster.broker_tasks import BrokerTasks
from aiokproto.cluster.client import ClusterClient
from aiokproto.config import ClientConfig
from aiokproto.errors import (
    ConsumerStoppedError,
    GroupAuthorizationFailedError,
    IllegalStateError,
    InvalidShareSessionEpochError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    ShareSessionNotFoundError,
    TopicAuthorizationFailedError,
    UnsupportedVersionError,
    for_code,
)
from aiokproto.metrics.consumer import ShareFetchMetrics
from aiokproto.protocol.messages.share_acknowledge import (
    ShareAcknowledgeRequest,
    ShareAcknowledgeRequestAcknowledgementBatch,
    ShareAcknowledgeRequestAcknowledgePartition,
    ShareAcknowledgeRequestAcknowledgeTopic,
)
from aiokproto.protocol.messages.share_fetch import (
    ShareFetchRequest,
    ShareFetchRequestAcknowledgementBatch,
    ShareFetchRequestFetchPartition,
    ShareFetchRequestFetchTopic,
    ShareFetchRequestForgottenTopic,
)
from aiokproto.share.acks import AckBook, AcknowledgeType, to_batches
from aiokproto.share.driver import ShareGroupDriver
from aiokproto.share.records import Acquired, ShareRecord, acquired_records
from aiokproto.share.session import CLOSE_EPOCH, SessionStep, ShareSession
from aiokproto.share.share_config import ShareConfig
from aiokproto.share.signals import Signals
from aiokproto.structs import TopicPartition

# the share consumer's documented logger (docs/guides/logging.md), for all its parts
log = logging.getLogger("aiokproto.share.consumer")

AckResults = dict[TopicPartition, Exception | None]
#: (partition, leader, records, when their acquisition lock runs out: monotonic
#: seconds, None if the broker gave no duration)
Buffered = tuple[TopicPartition, int, list[ShareRecord], float | None]

_SESSION_ERRORS = frozenset({ShareSessionNotFoundError.errno, InvalidShareSessionEpochError.errno})


class _Outcome(enum.Enum):
    """How one exchange with a broker went, for the fetch loop's back-off."""

    OK = "ok"
    PARTITION_ERRORS = "partition errors"
    FAILED = "failed"


#: ShareFetch errors the application must see (the others start a new session)
_FATAL_FETCH = frozenset(
    {
        GroupAuthorizationFailedError.errno,
        TopicAuthorizationFailedError.errno,
        UnsupportedVersionError.errno,
    }
)


@dataclass(slots=True)
class Flush:
    """A ``commit()`` waiting for one broker's acknowledgement answers."""

    future: asyncio.Future[AckResults]
    results: AckResults


class ShareFetcher:
    """Acquires records for the assigned partitions and carries the acknowledgements."""

    def __init__(
        self,
        config: ShareConfig,
        client_config: ClientConfig,
        driver: ShareGroupDriver,
        signals: Signals,
        metrics: ShareFetchMetrics,
        *,
        running: Callable[[], bool],
        dropped: Callable[[], None],
    ) -> None:
        """``running()``: whether the consumer still runs (else the loops end);
        ``dropped()``: records acquired from a broker were dropped with its session."""
        self._config = config
        self._client_config = client_config
        self._driver = driver
        self._signals = signals
        self._metrics = metrics
        self._running = running
        self._dropped = dropped
        self._client: ClusterClient | None = None
        self._task: asyncio.Task[None] | None = None  # the supervisor
        self._node_tasks = BrokerTasks(
            "aiokproto-share-fetch",
            failed=self._broker_failed,
            release=signals.notify,
            logger=log,
        )
        self._sessions: dict[int, ShareSession] = {}
        self.book = AckBook()
        self.buffer: deque[Buffered] = deque()
        self._buffered: dict[int, int] = {}  # records not handed out, per leader node
        self._flushes: dict[int, list[Flush]] = {}
        #: per broker, the commits answered by the request in flight with acknowledgements
        self._inflight: dict[int, list[Flush]] = {}
        #: the brokers' acquisition lock duration (from the last ShareFetch answer)
        self.lock_timeout_ms: int | None = None

    def start(self, client: ClusterClient) -> None:
        self._client = client
        self._task = asyncio.get_running_loop().create_task(
            self._supervise(), name=f"aiokproto-share-fetchers-{self._config.group_id}"
        )

    @property
    def dead(self) -> bool:
        """Whether fetching stopped for good (a task of ours failed)."""
        return (self._task is not None and self._task.done()) or (
            self._node_tasks.failure is not None
        )

    def _broker_failed(self, node: int, exc: BaseException) -> None:
        # a defect, not a broker answer: every poll raises it from now on (fetching
        # has stopped), never an endless quiet
        self._signals.fail_fatal(KafkaError(f"share fetcher for broker {node} failed: {exc!r}"))

    def _require_client(self) -> ClusterClient:
        if self._client is None:
            raise IllegalStateError("the share consumer is not started")
        return self._client

    # -- what the consumer asks -------------------------------------------------------

    def take(self, limit: int) -> list[tuple[TopicPartition, list[ShareRecord]]]:
        """Up to ``limit`` buffered records, in the order acquired, each chunk with its
        partition; drops those whose leader moved or whose lock ran out."""
        out: list[tuple[TopicPartition, list[ShareRecord]]] = []
        left = limit
        now = time.monotonic()
        while self.buffer and left > 0:
            tp, node, records, expires = self.buffer[0]
            if self.book.node_of(tp) != node:  # its leader moved: no longer ours
                self.buffer.popleft()
                self._buffered[node] = self._buffered.get(node, 0) - len(records)
                continue
            if expires is not None and now >= expires:
                # waited here past their lock: handing them out would let two members
                # work on one record
                self.buffer.popleft()
                self._buffered[node] = self._buffered.get(node, 0) - len(records)
                self.book.expire(tp, [r.offset for r in records])
                self._metrics.not_handed_out(tp.topic for _ in records)
                log.info(
                    "share group %r: %d records of %s waited past their acquisition "
                    "lock; not handed out (the broker delivers them again)",
                    self._config.group_id,
                    len(records),
                    tp,
                )
                continue
            chunk, rest = records[:left], records[left:]
            if rest:
                self.buffer[0] = (tp, node, rest, expires)
            else:
                self.buffer.popleft()
            self._buffered[node] = self._buffered.get(node, 0) - len(chunk)
            left -= len(chunk)
            out.append((tp, chunk))
        return out

    def flush(self) -> list[Flush]:
        """``commit()``: a future per broker with acknowledgements due or in flight,
        answered when the broker answers them; [] when there are none."""
        nodes = self.book.nodes_with_pending()
        if not nodes and not self._inflight:
            return []
        loop = asyncio.get_running_loop()
        flushes = []
        # acknowledgements already on their way (piggybacked on a fetch): wait for them too
        for inflight in self._inflight.values():
            flush = Flush(loop.create_future(), {})
            inflight.append(flush)
            flushes.append(flush)
        for node in nodes:
            flush = Flush(loop.create_future(), {})
            self._flushes.setdefault(node, []).append(flush)
            flushes.append(flush)
        self._signals.notify()
        return flushes

    def release_buffered(self) -> None:
        """``stop()``: release what was never handed out (unless its lock ran out)."""
        now = time.monotonic()
        for tp, _, records, expires in self.buffer:
            if expires is not None and now >= expires:  # the broker took them back
                self.book.expire(tp, [r.offset for r in records])
                continue
            for r in records:
                if self.book.holds(tp, r.offset):
                    self.book.acknowledge(tp, r.offset, AcknowledgeType.RELEASE)
        self.buffer.clear()
        self._buffered.clear()

    async def close(self) -> None:
        """Stop every task; a ``commit()`` still waiting raises ConsumerStoppedError."""
        task = self._task
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        await self._node_tasks.close()
        for flushes in self._flushes.values():
            for flush in flushes:
                if not flush.future.done():
                    flush.future.set_exception(ConsumerStoppedError("the share consumer stopped"))
        self._flushes.clear()
        for flushes in self._inflight.values():
            for flush in flushes:
                if not flush.future.done():
                    flush.future.set_exception(ConsumerStoppedError("stopped"))
        self._inflight.clear()

    # -- the supervisor and the broker tasks ------------------------------------------

    def _leaders(self) -> dict[int, frozenset[TopicPartition]]:
        """Assigned partitions by leader (those with a known leader)."""
        client = self._require_client()
        snap = client.metadata.snapshot
        out: dict[int, set[TopicPartition]] = {}
        for tp in self._driver.assigned:
            leader = snap.leader_for(tp.topic, tp.partition)
            if leader is not None and leader >= 0:
                out.setdefault(leader, set()).add(tp)
        return {n: frozenset(tps) for n, tps in out.items()}

    async def _supervise(self) -> None:
        try:
            await self._start_brokers()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("share group %r: the fetch supervisor failed", self._config.group_id)
            self._signals.fail_fatal(KafkaError(f"share fetch supervisor failed: {exc!r}"))

    async def _start_brokers(self) -> None:
        """Runs a fetch task for every broker that leads an assigned partition or has
        acknowledgements due; refreshes the assignment when metadata changes. Ends when
        a broker's task failed (``_broker_failed`` made it fatal)."""
        client = self._require_client()
        version = -1
        while self._running() and self._node_tasks.failure is None:
            if client.metadata.snapshot.version != version:
                version = client.metadata.snapshot.version
                self._driver.set_assignment()
            nodes = set(self._leaders()) | self.book.nodes_with_pending() | set(self._flushes)
            for node in nodes:
                self._node_tasks.start(node, self._node_loop)
            await self._signals.wait(0.5)

    def _node_wants(self, node: int) -> bool:
        if not self._running():
            return False
        if self._flushes.get(node) or self.book.has_pending(node):
            return True
        return bool(self._leaders().get(node)) and not self._buffered.get(node, 0)

    async def _node_loop(self, node: int) -> None:
        session = self._sessions.setdefault(node, ShareSession())
        gid = self._config.group_id
        cfg = self._client_config
        backoff = Backoff.for_retries(cfg)
        while True:
            while not self._node_wants(node):
                if not self._running():
                    return
                if not self._leaders().get(node) and not self.book.has_pending(node):
                    return  # nothing here any more; the supervisor restarts one if needed
                await self._signals.wait(1.0)
            if not self._driver.member.joined:
                await self._signals.wait(0.2)
                continue
            try:
                outcome = await self._exchange(node, session)
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                log.info("share group %r: broker %d: %r; new session", gid, node, exc)
                self._session_lost(node, session, exc)
                # the broker may be gone: learn the partitions' new leaders
                self._require_client().metadata.request_refresh()
                outcome = _Outcome.FAILED
            # Errors back off, or a broker that keeps answering one got about 10,000
            # ShareFetches a second: a partition error (leader moved) waits
            # retry_backoff_ms, not growing, so the node's other partitions go on;
            # a failed request or session waits longer each time in a row.
            if outcome is _Outcome.OK:
                backoff.succeeded()
            elif outcome is _Outcome.PARTITION_ERRORS:
                await self._pause(node, cfg.retry_backoff_ms / 1000)
            else:
                backoff.failed(0.0)
                await self._pause(node, backoff.delay_s())

    async def _pause(self, node: int, seconds: float) -> None:
        """Back off, but not past a stop() or a commit() waiting for ``node``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while self._running() and not self._flushes.get(node):
            left = deadline - loop.time()
            if left <= 0:
                return
            await self._signals.wait(left)

    async def _exchange(self, node: int, session: ShareSession) -> _Outcome:
        """One request to ``node``: a ShareFetch when its records are all handed out,
        else a ShareAcknowledge with what is due."""
        wanted = self._leaders().get(node, frozenset())
        fetch = bool(wanted) and not self._buffered.get(node, 0)
        flushes = self._flushes.pop(node, [])
        if not session.is_open:
            # acknowledgements need the session they were acquired in
            self._fail_acks(node, ShareSessionNotFoundError("the share session was reset"), flushes)
            flushes = []
        acks = self.book.pending_for(node) if session.is_open else {}
        if not fetch and not acks:
            for flush in flushes:
                if not flush.future.done():
                    flush.future.set_result(flush.results)
            return _Outcome.OK
        # the broker refuses (INVALID_REQUEST) renewals piggybacked on a fetch: a
        # ShareAcknowledge carries them, as in Java's share consumer
        renewing = any(AcknowledgeType.RENEW in a.values() for a in acks.values())
        if acks:
            self._inflight[node] = flushes
        try:
            if fetch and not renewing:
                return await self._share_fetch(node, session, wanted, acks, flushes)
            await self._share_acknowledge(node, session, acks, flushes, session.epoch)
            return _Outcome.OK
        except BaseException as exc:
            self._report(acks, flushes, exc if isinstance(exc, Exception) else None, lost=True)
            raise
        finally:
            if self._inflight.get(node) is flushes:
                del self._inflight[node]

    def _fetch_request(
        self, step: SessionStep, acks: Mapping[TopicPartition, Mapping[int, AcknowledgeType]]
    ) -> ShareFetchRequest:
        topics: dict[uuid.UUID, list[ShareFetchRequestFetchPartition]] = {}
        snap = self._require_client().metadata.snapshot
        for tp in sorted(step.add | frozenset(acks)):
            info = snap.topics.get(tp.topic)
            if info is None:
                continue
            batches = [
                ShareFetchRequestAcknowledgementBatch(
                    first_offset=b.first, last_offset=b.last, acknowledge_types=list(b.types)
                )
                for b in to_batches(acks.get(tp, {}))
            ]
            topics.setdefault(info.topic_id, []).append(
                ShareFetchRequestFetchPartition(
                    partition_index=tp.partition, acknowledgement_batches=batches
                )
            )
        forgotten: dict[uuid.UUID, list[int]] = {}
        for tp in step.forget:
            info = snap.topics.get(tp.topic)
            if info is not None:
                forgotten.setdefault(info.topic_id, []).append(tp.partition)
        opts = self._config
        renew = any(AcknowledgeType.RENEW in a.values() for a in acks.values())
        return ShareFetchRequest(
            group_id=opts.group_id,
            member_id=self._driver.member.member_id,
            share_session_epoch=step.epoch,
            max_wait_ms=opts.fetch_max_wait_ms,
            min_bytes=opts.fetch_min_bytes,
            max_bytes=opts.fetch_max_bytes,
            max_records=opts.max_poll_records,
            batch_size=opts.max_poll_records,
            is_renew_ack=renew,
            topics=[
                ShareFetchRequestFetchTopic(topic_id=t, partitions=ps) for t, ps in topics.items()
            ],
            forgotten_topics_data=[
                ShareFetchRequestForgottenTopic(topic_id=t, partitions=sorted(ps))
                for t, ps in forgotten.items()
            ],
        )

    async def _share_fetch(
        self,
        node: int,
        session: ShareSession,
        wanted: frozenset[TopicPartition],
        acks: dict[TopicPartition, dict[int, AcknowledgeType]],
        flushes: list[Flush],
    ) -> _Outcome:
        client = self._require_client()
        step = session.plan(wanted, frozenset(acks))
        request = self._fetch_request(step, acks)
        timeout_ms = self._client_config.request_timeout_ms + self._config.fetch_max_wait_ms
        sent_at = time.monotonic()
        response = await client.send(node, request, purpose="fetch", timeout_ms=timeout_ms)
        fetched_bytes = 0
        if response.error_code:
            error = for_code(response.error_code)(response.error_message)
            self._session_lost(node, session, error)
            self._report(acks, flushes, error, lost=True)
            if response.error_code not in _SESSION_ERRORS:
                # e.g. UNKNOWN_SERVER_ERROR for a session naming a deleted topic: a new
                # session names only what is assigned now; authorization errors and
                # the like are the application's
                log.warning(
                    "share group %r: ShareFetch to %d: %r; new session",
                    self._config.group_id,
                    node,
                    error,
                )
                if response.error_code in _FATAL_FETCH:
                    self._signals.fail(error)
                return _Outcome.FAILED
            # a session error on an established session: a new one at once; on a new
            # session (epoch 0) it is the broker's state, and waiting is all we can do
            return _Outcome.FAILED if step.epoch == 0 else _Outcome.OK
        session.succeeded(step)
        if response.acquisition_lock_timeout_ms > 0:
            self.lock_timeout_ms = response.acquisition_lock_timeout_ms
        # The locks started no earlier than the request left: a record still buffered
        # at sent_at + lock is no longer this member's (the broker may have handed it
        # to another), whatever the broker's clock says.
        lock_ms = self.lock_timeout_ms
        expires = None if lock_ms is None else sent_at + lock_ms / 1000
        results: AckResults = {}
        refresh = False
        for topic in response.responses:
            name = self._driver.ids.get(topic.topic_id) or client.metadata.snapshot.topic_name(
                topic.topic_id
            )
            if name is None:
                refresh = True
                continue
            for part in topic.partitions:
                tp = TopicPartition(name, part.partition_index)
                if tp in acks:
                    results[tp] = self._ack_error(
                        part.acknowledge_error_code, part.acknowledge_error_message
                    )
                if part.error_code:
                    refresh = True
                    log.info(
                        "share group %r: fetching %s from %d: %s",
                        self._config.group_id,
                        tp,
                        node,
                        for_code(part.error_code).__name__,
                    )
                    continue
                if part.records:
                    fetched_bytes += len(part.records)
                    self._metrics.partition_fetched(tp.topic, len(part.records))
                self._acquired(tp, node, part.records, part.acquired_records, expires)
        self._metrics.fetched(time.monotonic() - sent_at, fetched_bytes, response.throttle_time_ms)
        for tp in acks:
            results.setdefault(tp, None)
        self._report_results(acks, flushes, results)
        self._signals.notify()
        if refresh:
            client.metadata.request_refresh()
            return _Outcome.PARTITION_ERRORS
        return _Outcome.OK

    def _acquired(
        self,
        tp: TopicPartition,
        node: int,
        data: bytes | memoryview | None,
        ranges: Any,
        expires: float | None,
    ) -> None:
        spans = [Acquired(a.first_offset, a.last_offset, a.delivery_count) for a in ranges]
        if not spans:
            return
        records, gaps, undecodable = acquired_records(
            data, spans, tp.topic, tp.partition, check_crc=self._config.check_crcs
        )
        self.book.acquired(tp, node, [r.offset for r in records])
        self.book.acquired(tp, node, gaps)
        for offset in gaps:
            self.book.acknowledge(tp, offset, AcknowledgeType.GAP)
        for bad in undecodable:
            # Rejected, not released: the bytes are the broker's, so every member
            # fails on them the same way (a bad CRC, a codec id no Kafka defines, a
            # record cut short); released, they would bounce between members, an
            # error each time, until the delivery count limit archived them anyway.
            self.book.acquired(tp, node, bad.offsets)
            for offset in bad.offsets:
                self.book.acknowledge(tp, offset, AcknowledgeType.REJECT)
            log.warning("share group %r: %s", self._config.group_id, bad.error)
            self._signals.fail(bad.error)
        if records:
            self.buffer.append((tp, node, records, expires))
            self._buffered[node] = self._buffered.get(node, 0) + len(records)

    async def _share_acknowledge(
        self,
        node: int,
        session: ShareSession,
        acks: dict[TopicPartition, dict[int, AcknowledgeType]],
        flushes: list[Flush],
        epoch: int,
    ) -> None:
        client = self._require_client()
        snap = client.metadata.snapshot
        topics: dict[uuid.UUID, list[ShareAcknowledgeRequestAcknowledgePartition]] = {}
        for tp, offsets in sorted(acks.items()):
            info = snap.topics.get(tp.topic)
            if info is None:
                continue
            topics.setdefault(info.topic_id, []).append(
                ShareAcknowledgeRequestAcknowledgePartition(
                    partition_index=tp.partition,
                    acknowledgement_batches=[
                        ShareAcknowledgeRequestAcknowledgementBatch(
                            first_offset=b.first,
                            last_offset=b.last,
                            acknowledge_types=list(b.types),
                        )
                        for b in to_batches(offsets)
                    ],
                )
            )
        request = ShareAcknowledgeRequest(
            group_id=self._config.group_id,
            member_id=self._driver.member.member_id,
            share_session_epoch=epoch,
            is_renew_ack=any(AcknowledgeType.RENEW in a.values() for a in acks.values()),
            topics=[
                ShareAcknowledgeRequestAcknowledgeTopic(topic_id=t, partitions=ps)
                for t, ps in topics.items()
            ],
        )
        response = await client.send(node, request, purpose="fetch")
        if response.error_code:
            error = for_code(response.error_code)(response.error_message)
            if response.error_code in _SESSION_ERRORS:
                self._session_lost(node, session, error)
            self._report(acks, flushes, error, lost=True)
            return
        if epoch == CLOSE_EPOCH:
            session.reset()
        else:
            session.acknowledged()
        results: AckResults = {}
        for topic in response.responses:
            name = self._driver.ids.get(topic.topic_id) or snap.topic_name(topic.topic_id)
            for part in topic.partitions:
                if name is not None:
                    tp = TopicPartition(name, part.partition_index)
                    results[tp] = self._ack_error(part.error_code, part.error_message)
        for tp in acks:
            results.setdefault(tp, None)
        self._report_results(acks, flushes, results)

    @staticmethod
    def _ack_error(code: int, message: str | None) -> Exception | None:
        return None if code == 0 else for_code(code)(message)

    def _report_results(
        self,
        acks: Mapping[TopicPartition, Mapping[int, AcknowledgeType]],
        flushes: list[Flush],
        results: AckResults,
    ) -> None:
        if acks:
            sent = sum(len(o) for o in acks.values())
            failed = sum(len(o) for tp, o in acks.items() if results.get(tp) is not None)
            self._metrics.acknowledged(sent, failed)
        callback = self._config.acknowledgement_commit_callback
        if callback is not None and acks:
            by_error: dict[int, tuple[Exception | None, dict[TopicPartition, frozenset[int]]]] = {}
            for tp, offsets in acks.items():
                err = results.get(tp)
                entry = by_error.setdefault(id(err), (err, {}))
                entry[1][tp] = frozenset(
                    o for o, t in offsets.items() if t is not AcknowledgeType.GAP
                )
            for err, parts in by_error.values():
                try:
                    callback(parts, err)
                except Exception:
                    log.exception(
                        "share group %r: acknowledgement callback raised", self._config.group_id
                    )
        for flush in flushes:
            flush.results.update(results)
            if not flush.future.done():
                flush.future.set_result(flush.results)

    def _report(
        self,
        acks: Mapping[TopicPartition, Mapping[int, AcknowledgeType]],
        flushes: list[Flush],
        error: Exception | None,
        *,
        lost: bool,
    ) -> None:
        """The request carrying ``acks`` failed: each partition's result is ``error``."""
        failure = error or KafkaError("the request was cancelled")
        self._report_results(acks, flushes, dict.fromkeys(acks, failure))

    def _fail_acks(self, node: int, error: Exception, flushes: list[Flush]) -> None:
        lost = self.book.forget_node(node)
        self._report(lost, flushes, error, lost=True)

    def _session_lost(self, node: int, session: ShareSession, error: Exception) -> None:
        """The session (and what was acquired in it) is gone: start a new one."""
        session.reset()
        self._fail_acks(node, error, self._flushes.pop(node, []))
        self._drop_buffered(node)

    def _drop_buffered(self, node: int) -> None:
        kept = deque(item for item in self.buffer if item[1] != node)
        self.buffer = kept
        self._buffered[node] = 0
        self._dropped()

    async def close_sessions(self) -> None:
        """``stop()``: let every fetch in flight finish (the loops end once the consumer
        no longer runs), then ShareAcknowledge with epoch -1: the last
        acknowledgements, and the session closed."""
        await self._node_tasks.join()
        for node, session in self._sessions.items():
            acks = self.book.pending_for(node) if session.is_open else {}
            if not session.is_open:
                continue
            try:
                await self._share_acknowledge(
                    node, session, acks, self._flushes.pop(node, []), CLOSE_EPOCH
                )
            except KafkaError as exc:
                self._report(acks, [], exc, lost=True)
                log.info(
                    "share group %r: closing the session with %d: %r",
                    self._config.group_id,
                    node,
                    exc,
                )
