"""``ShareConsumer``: a member of a share group (KIP-932, queues for Kafka). A heartbeat
task (``ShareMember``, ShareGroupHeartbeat), a supervisor task (one fetch task per
leader broker), the buffer of acquired records, implicit/explicit acknowledgement,
``commit()``, ``stop()``.

Tasks, all owned by the consumer and stopped by ``stop()``:

- the heartbeat task keeps the membership (``ShareMember``) with ShareGroupHeartbeat on
  the group coordinator, at the interval the broker returns;
- one fetch task per leader broker runs that broker's share session: a ShareFetch
  (carrying the acknowledgements due for that broker) whenever nothing acquired from
  it is left undelivered, a ShareAcknowledge when only acknowledgements are due (a
  ``commit()``), and ShareAcknowledge with epoch -1 at the end. One request in flight
  per broker: session epochs are sequential.

Acquired records wait in a buffer until ``getmany()`` / ``async for`` hands them out.
Implicit mode accepts what the previous poll handed out when the next poll comes (or
at ``commit()``/``stop()``); explicit mode takes ``acknowledge()`` per record and
refuses a poll while a handed-out record is unacknowledged, as Java's
``KafkaShareConsumer`` does. ``stop()`` accepts (implicit) or releases (explicit) what
was handed out, releases what was never handed out, and leaves the group.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal, Self, Unpack, overload

from aiokproto._generic import K, T, U, V
from aiokproto.cluster.backoff import Backoff
from aiokproto.cluster.client import ClusterClient
from aiokproto.cluster.coordinators import GROUP
from aiokproto.config import split_options
from aiokproto.consumer.errors import RecordDeserializationError
from aiokproto.consumer.group.consumer_driver import new_member_id
from aiokproto.errors import (
    ConsumerStoppedError,
    GroupAuthorizationFailedError,
    IllegalStateError,
    InvalidShareSessionEpochError,
    KafkaConfigError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    ShareSessionNotFoundError,
    TopicAuthorizationFailedError,
    UnsupportedVersionError,
    for_code,
)
from aiokproto.metrics.connections import ConnectionMetrics
from aiokproto.metrics.consumer import SHARE_GROUP, PollMetrics, ShareFetchMetrics
from aiokproto.metrics.registry import MetricsRegistry, MetricsSnapshot
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
from aiokproto.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from aiokproto.reprs import client_repr, connection_fields
from aiokproto.share.acks import AckBook, AcknowledgeType, ack_type, to_batches
from aiokproto.share.member import Answer, ShareMember, classify
from aiokproto.share.records import Acquired, ShareRecord, acquired_records
from aiokproto.share.session import CLOSE_EPOCH, SessionStep, ShareSession
from aiokproto.structs import TopicPartition
from aiokproto.telemetry.reporter import TelemetryReporter

if TYPE_CHECKING:
    import aiokproto.options  # TypedDicts for annotations only: ~2 ms to build

log = logging.getLogger(__name__)

#: ``acknowledgement_commit_callback(offsets, error)``: per partition, the offsets whose
#: acknowledgements the broker answered, and None or the error it answered with
AckCallback = Callable[[Mapping[TopicPartition, frozenset[int]], Exception | None], None]
AckResults = dict[TopicPartition, Exception | None]
Mode = Literal["implicit", "explicit"]

_SHARE_OPTIONS = frozenset(
    {
        "group_id",
        "acknowledgement_mode",
        "acknowledgement_commit_callback",
        "max_poll_records",
        "fetch_max_wait_ms",
        "fetch_min_bytes",
        "fetch_max_bytes",
        "client_rack",
        "check_crcs",
        "key_deserializer",
        "value_deserializer",
    }
)
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
class _Options:
    group_id: str
    acknowledgement_mode: Mode = "implicit"
    acknowledgement_commit_callback: AckCallback | None = None
    max_poll_records: int = 500
    fetch_max_wait_ms: int = 500
    fetch_min_bytes: int = 1
    fetch_max_bytes: int = 52_428_800
    client_rack: str | None = None
    check_crcs: bool = True
    key_deserializer: Callable[[bytes | None], Any] | None = None
    value_deserializer: Callable[[bytes | None], Any] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.group_id, str) or not self.group_id:
            raise KafkaConfigError(
                f"ShareConsumer needs group_id, a non-empty str: {self.group_id!r}"
            )
        if self.acknowledgement_mode not in ("implicit", "explicit"):
            raise KafkaConfigError(
                "acknowledgement_mode must be 'implicit' or 'explicit', "
                f"not {self.acknowledgement_mode!r}"
            )
        for name in ("max_poll_records", "fetch_max_bytes", "fetch_min_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value < 2**31:
                raise KafkaConfigError(f"{name} must be an int in [1, 2**31), not {value!r}")
        wait = self.fetch_max_wait_ms
        if not isinstance(wait, int) or isinstance(wait, bool) or not 0 <= wait < 2**31:
            raise KafkaConfigError(f"fetch_max_wait_ms must be an int >= 0, not {wait!r}")
        for name in ("acknowledgement_commit_callback", "key_deserializer", "value_deserializer"):
            value = getattr(self, name)
            if value is not None and not callable(value):
                raise KafkaConfigError(f"{name} must be callable or None, not {value!r}")
        if self.client_rack is not None and not isinstance(self.client_rack, str):
            raise KafkaConfigError(f"client_rack must be a str or None, not {self.client_rack!r}")


@dataclass(slots=True)
class _Flush:
    """A ``commit()`` waiting for one broker's acknowledgement answers."""

    future: asyncio.Future[AckResults]
    results: AckResults


class ShareConsumer(Generic[K, V]):
    """A share group member: records are acquired by one member at a time and
    acknowledged one by one (Kafka as a work queue).

    ``ShareConsumer(*topics, bootstrap_servers=..., group_id=...)``; options as Java's
    share consumer configs in snake_case, plus ``acknowledgement_mode`` ("implicit" or
    "explicit") and ``acknowledgement_commit_callback``, typed and documented in
    ``aiokproto.options.ShareConsumerOptions``. ``ShareConsumer[K, V]`` hands out
    ``ShareRecord[K, V]``: K and V are what the deserializers return, ``bytes | None``
    without one.
    """

    # The overloads tell a type checker K and V from the deserializers given.
    @overload
    def __init__(
        self: ShareConsumer[bytes | None, bytes | None],
        *topics: str,
        key_deserializer: None = None,
        value_deserializer: None = None,
        **options: Unpack[aiokproto.options.ShareConsumerOptions],
    ) -> None: ...

    @overload
    def __init__(
        self: ShareConsumer[T, bytes | None],
        *topics: str,
        key_deserializer: Callable[[bytes | None], T],
        value_deserializer: None = None,
        **options: Unpack[aiokproto.options.ShareConsumerOptions],
    ) -> None: ...

    @overload
    def __init__(
        self: ShareConsumer[bytes | None, U],
        *topics: str,
        key_deserializer: None = None,
        value_deserializer: Callable[[bytes | None], U],
        **options: Unpack[aiokproto.options.ShareConsumerOptions],
    ) -> None: ...

    @overload
    def __init__(
        self: ShareConsumer[T, U],
        *topics: str,
        key_deserializer: Callable[[bytes | None], T],
        value_deserializer: Callable[[bytes | None], U],
        **options: Unpack[aiokproto.options.ShareConsumerOptions],
    ) -> None: ...

    def __init__(
        self,
        *topics: str,
        key_deserializer: Callable[[bytes | None], Any] | None = None,
        value_deserializer: Callable[[bytes | None], Any] | None = None,
        **options: Any,
    ) -> None:
        """Check every option now (``KafkaConfigError`` names a wrong one); connect and
        join on ``start()`` or ``async with``."""
        if key_deserializer is not None:
            options["key_deserializer"] = key_deserializer
        if value_deserializer is not None:
            options["value_deserializer"] = value_deserializer
        self._client_config, own = split_options(options, _SHARE_OPTIONS, "ShareConsumer")
        if "group_id" not in own:
            raise KafkaConfigError("ShareConsumer needs group_id")
        try:
            self._opts = _Options(**own)
        except TypeError as exc:
            raise KafkaConfigError(f"ShareConsumer: {exc}") from None
        self._topics = self._check_topics(topics)
        self._client: ClusterClient | None = None
        cc = self._client_config
        self._registry = MetricsRegistry(
            cc.client_id, window_ms=cc.metrics_sample_window_ms, num_samples=cc.metrics_num_samples
        )
        self._conn_metrics = ConnectionMetrics(self._registry, "consumer-share")
        self._fetch_metrics = ShareFetchMetrics(self._registry)
        self._poll_metrics = PollMetrics(self._registry, SHARE_GROUP)
        self._registry.gauge(
            "assigned-partitions",
            "consumer-share-coordinator-metrics",
            lambda: len(self._assigned),
            "partitions the share group assigned us",
        )
        self._telemetry: TelemetryReporter | None = None  # KIP-714 metrics push
        self._member = ShareMember(new_member_id(), self._opts.client_rack)
        self._state: Literal["new", "running", "stopping", "stopped"] = "new"
        self._tasks: list[asyncio.Task[None]] = []
        self._node_tasks: dict[int, asyncio.Task[None]] = {}
        self._sessions: dict[int, ShareSession] = {}
        self._book = AckBook()
        self._assigned: frozenset[TopicPartition] = frozenset()
        self._ids: dict[uuid.UUID, str] = {}
        # (partition, leader, records, when their acquisition lock runs out: monotonic
        # seconds, None if the broker gave no duration)
        self._buffer: deque[tuple[TopicPartition, int, list[ShareRecord], float | None]] = deque()
        self._buffered: dict[int, int] = {}  # records not handed out, per leader node
        self._handed: dict[tuple[TopicPartition, int], ShareRecord] = {}  # unacknowledged
        self._flushes: dict[int, list[_Flush]] = {}
        #: per broker, the commits answered by the request in flight with acknowledgements
        self._inflight: dict[int, list[_Flush]] = {}
        self._errors: list[KafkaError] = []
        self._fatal: KafkaError | None = None
        self._changed = asyncio.Event()
        self._wake_heartbeat = asyncio.Event()
        self._lock_timeout_ms: int | None = None
        self._iter: deque[ShareRecord[Any, Any]] = deque()
        self._stopped = asyncio.Event()

    def __repr__(self) -> str:
        return client_repr(
            self,
            lambda: [
                self._state,
                *connection_fields(self._client_config),
                f"group_id={self._opts.group_id!r}",
                f"topics={sorted(self._topics)}",
                f"assigned={len(self._assigned)}",
            ],
        )

    # -- lifecycle --------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def start(self) -> None:
        """Connect and join the share group when subscribed; ``async with`` calls it."""
        if self._state != "new":
            if self._state == "running":
                return
            raise ConsumerStoppedError(f"the share consumer is {self._state}")
        self._changed = asyncio.Event()
        self._wake_heartbeat = asyncio.Event()
        self._client = ClusterClient(self._client_config, self._conn_metrics)
        # a subscribed topic that does not exist: say so once (else nothing is assigned)
        self._client.metadata.add_refresh_listener(self._warn_missing_topics)
        self._telemetry = TelemetryReporter(
            self._client,
            self._registry,
            "share-consumer",
            self._client_config,
            resource={"group_id": self._opts.group_id, "client_rack": self._opts.client_rack},
        )
        try:
            await self._client.start()
            if self._client.closed:  # stop() was called while the cluster answered
                raise ConsumerStoppedError("the share consumer was stopped while starting")
            await self._telemetry.start()
        except BaseException:
            await self._telemetry.close()
            await self._client.close()
            self._state = "stopped"
            raise
        loop = asyncio.get_running_loop()
        gid = self._opts.group_id
        self._tasks = [
            loop.create_task(self._heartbeats(), name=f"aiokproto-share-heartbeat-{gid}"),
            loop.create_task(self._supervise(), name=f"aiokproto-share-fetchers-{gid}"),
        ]
        self._state = "running"
        if self._topics:
            self.subscribe(self._topics)

    async def stop(self, *, timeout_ms: int | None = None) -> None:
        """Settle what this member holds (accept what was handed out in implicit mode,
        release the rest), close the share sessions, leave the group; bounded by
        ``timeout_ms`` (``default_api_timeout_ms``)."""
        if self._state in ("new", "stopped"):
            client = self._client if self._state == "new" else None
            self._state = "stopped"
            if client is not None:  # start() waits for the cluster: it ends now
                await client.close()
            return
        if self._state == "stopping":
            while not self._stopped.is_set():
                await self._wait_change(0.1)
            return
        self._state = "stopping"
        self._notify()
        limit = (timeout_ms or self._client_config.default_api_timeout_ms) / 1000
        try:
            async with asyncio.timeout(limit):
                self._settle_for_stop()
                await self._close_sessions()
                await self._leave()
        except (TimeoutError, KafkaError) as exc:
            log.warning("share group %r: stop did not finish cleanly: %r", self._opts.group_id, exc)
        finally:
            tasks = [*self._tasks, *self._node_tasks.values()]
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            self._fail_flushes(ConsumerStoppedError("the share consumer stopped"))
            for flushes in self._inflight.values():
                for flush in flushes:
                    if not flush.future.done():
                        flush.future.set_exception(ConsumerStoppedError("stopped"))
            self._inflight.clear()
            if self._client is not None:
                self._client.metadata.untrack(self._member.topics)
                try:
                    if self._telemetry is not None:
                        await self._telemetry.close()  # the terminating push, bounded
                finally:
                    await self._client.close()
            self._state = "stopped"
            self._stopped.set()
            self._notify()

    # -- subscription -----------------------------------------------------------------

    @staticmethod
    def _check_topics(topics: Iterable[str]) -> frozenset[str]:
        if isinstance(topics, str):
            topics = (topics,)
        try:
            names = list(topics)
        except TypeError:
            raise KafkaConfigError(f"topics must be an iterable of str, not {topics!r}") from None
        for t in names:
            if not isinstance(t, str) or not t:
                raise KafkaConfigError(f"topic names must be non-empty strings, not {t!r}")
        return frozenset(names)

    def _warn_missing_topics(self) -> None:
        if self._client is not None:
            owner = f"share group {self._opts.group_id!r}"
            self._client.metadata.warn_missing_subscribed(self._member.topics, log, owner)

    def subscribe(self, topics: Iterable[str]) -> None:
        """Subscribe to ``topics`` (replaces the previous subscription; empty leaves)."""
        self._check_running("subscribe()")
        names = self._check_topics(topics)
        client = self._require_client()
        old = self._member.topics
        if old - names:
            client.metadata.untrack(old - names)
        if names - old:
            client.metadata.track(names - old)
        self._member.subscribe(names)
        self._member.leaving = False
        # a new subscription after a fatal group error joins afresh (a dead task of
        # ours stays fatal)
        if self._fatal is not None and not any(t.done() for t in self._tasks):
            self._fatal = None
            self._member.fenced()
        self._wake_heartbeat.set()

    def unsubscribe(self) -> None:
        """Subscribe to nothing: the member leaves the share group (``subscribe(())``)."""
        self.subscribe(())

    def subscription(self) -> frozenset[str]:
        """The subscribed topics."""
        return self._member.topics

    def assignment(self) -> frozenset[TopicPartition]:
        """The partitions the share group assigned this member (other members may share them)."""
        return self._assigned

    @property
    def member_id(self) -> str:
        """This member's id in the share group (chosen by the client, KIP-1082)."""
        return self._member.member_id

    @property
    def acquisition_lock_timeout_ms(self) -> int | None:
        """The brokers' acquisition lock duration (from the last ShareFetch answer)."""
        return self._lock_timeout_ms

    # -- consuming --------------------------------------------------------------------

    def client_instance_id(self) -> uuid.UUID | None:
        """The id the broker gave this client for KIP-714 metrics; None until a broker
        answered, when no broker supports client metrics, or with
        ``enable_metrics_push=False``."""
        return None if self._telemetry is None else self._telemetry.client_instance_id()

    def metrics(self) -> MetricsSnapshot:
        """The share consumer's metrics now, under Java's names
        (``consumer-share-fetch-manager-metrics``: ``records-consumed-rate``,
        ``fetch-latency-avg``, ``acknowledgements-send-rate``...; ``consumer-share-metrics``;
        ``consumer-share-node-metrics`` per broker)."""
        return self._registry.snapshot()

    async def getmany(
        self, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[ShareRecord[K, V]]]:
        """Records acquired for this member, up to ``max_records`` (``max_poll_records``);
        waits up to ``timeout_ms`` for some. Implicit mode first accepts everything the
        previous call handed out."""
        self._check_running("getmany()")
        self._poll_metrics.polled()
        limit = self._opts.max_poll_records if max_records is None else max_records
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise KafkaConfigError(f"max_records must be an int >= 1, not {max_records!r}")
        if not isinstance(timeout_ms, (int, float)) or isinstance(timeout_ms, bool):
            raise KafkaConfigError(f"timeout_ms must be a number, not {timeout_ms!r}")
        self._before_poll()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0, timeout_ms) / 1000
        while True:
            while not self._buffer:
                self._raise_errors()
                left = deadline - loop.time()
                if left <= 0:
                    return {}
                await self._wait_change(left)
                if self._state != "running":
                    raise ConsumerStoppedError("the share consumer stopped")
            taken = self._take(limit)
            if taken:  # else all it had waited past its lock: wait on for more
                return taken  # type: ignore[return-value]  # deserialized: K, V

    def __aiter__(self) -> AsyncIterator[ShareRecord[K, V]]:
        return self

    async def __anext__(self) -> ShareRecord[K, V]:
        while not self._iter:
            if self._state != "running":
                raise StopAsyncIteration
            try:
                batch = await self.getmany(timeout_ms=1000)
            except ConsumerStoppedError:
                raise StopAsyncIteration from None
            for records in batch.values():
                self._iter.extend(records)
        return self._iter.popleft()

    def acknowledge(
        self, record: ShareRecord[Any, Any], kind: str | AcknowledgeType = "accept"
    ) -> None:
        """Explicit mode: "accept", "release", "reject" or "renew" one handed-out record.
        Sent with the next fetch, or at once by ``commit()``."""
        if self._opts.acknowledgement_mode != "explicit":
            raise IllegalStateError(
                "acknowledge() needs acknowledgement_mode='explicit' (implicit mode "
                "accepts every record at the next poll)"
            )
        t = ack_type(kind)
        self._check_running("acknowledge()")
        if not isinstance(record, ShareRecord):
            raise KafkaConfigError(f"acknowledge() takes a ShareRecord, not {record!r}")
        tp = TopicPartition(record.topic, record.partition)
        key = (tp, record.offset)
        if key not in self._handed:
            raise IllegalStateError(
                f"{tp}@{record.offset} is not a record this consumer handed out and still "
                "holds (acknowledged already, or from before a rebalance)"
            )
        self._book.acknowledge(tp, record.offset, t)
        if t is not AcknowledgeType.RENEW:
            del self._handed[key]
        else:
            self._wake_node_of(tp)

    async def commit(self, *, timeout_ms: int | None = None) -> AckResults:
        """Send every pending acknowledgement now and wait for the brokers' answers:
        per partition, None or the error (as Java's ``commitSync``)."""
        self._check_running("commit()")
        if self._opts.acknowledgement_mode == "implicit":
            self._accept_handed()
        nodes = self._book.nodes_with_pending()
        if not nodes and not self._inflight:
            return {}
        loop = asyncio.get_running_loop()
        flushes = []
        # acknowledgements already on their way (piggybacked on a fetch): wait for them too
        for inflight in self._inflight.values():
            flush = _Flush(loop.create_future(), {})
            inflight.append(flush)
            flushes.append(flush)
        for node in nodes:
            flush = _Flush(loop.create_future(), {})
            self._flushes.setdefault(node, []).append(flush)
            flushes.append(flush)
        self._notify()
        limit = (timeout_ms or self._client_config.default_api_timeout_ms) / 1000
        results: AckResults = {}
        try:
            async with asyncio.timeout(limit):
                for flush in flushes:
                    results.update(await asyncio.shield(flush.future))
        except TimeoutError:
            raise KafkaTimeoutError(
                f"commit: no answer to the acknowledgements within {limit:.1f} s"
            ) from None
        return results

    # -- what polls do ----------------------------------------------------------------

    def _before_poll(self) -> None:
        self._raise_errors()
        if self._opts.acknowledgement_mode == "implicit":
            self._accept_handed()
        elif self._handed:
            some = sorted(self._handed)[:3]
            raise IllegalStateError(
                f"{len(self._handed)} handed-out records are not acknowledged (e.g. "
                f"{', '.join(f'{tp}@{o}' for tp, o in some)}); acknowledge() each before "
                "the next poll"
            )

    def _accept_handed(self) -> None:
        """Implicit mode: accept what was handed out, except the records ``async for``
        took in a batch but has not yielded yet (those stay handed out)."""
        unseen = {(TopicPartition(r.topic, r.partition), r.offset): r for r in self._iter}
        for key in self._handed:
            if key not in unseen and self._book.holds(*key):
                self._book.acknowledge(*key, AcknowledgeType.ACCEPT)
        if len(self._handed) > len(unseen):
            self._handed = {k: r for k, r in self._handed.items() if k in unseen}
            self._notify()

    def _take(self, limit: int) -> dict[TopicPartition, list[ShareRecord]]:
        out: dict[TopicPartition, list[ShareRecord]] = {}
        left = limit
        now = time.monotonic()
        while self._buffer and left > 0:
            tp, node, records, expires = self._buffer[0]
            if self._book.node_of(tp) != node:  # its leader moved: no longer ours
                self._buffer.popleft()
                self._buffered[node] = self._buffered.get(node, 0) - len(records)
                continue
            if expires is not None and now >= expires:
                # waited here past their lock: handing them out would let two members
                # work on one record
                self._buffer.popleft()
                self._buffered[node] = self._buffered.get(node, 0) - len(records)
                self._book.expire(tp, [r.offset for r in records])
                self._fetch_metrics.not_handed_out(tp.topic for _ in records)
                log.info(
                    "share group %r: %d records of %s waited past their acquisition "
                    "lock; not handed out (the broker delivers them again)",
                    self._opts.group_id,
                    len(records),
                    tp,
                )
                continue
            chunk, rest = records[:left], records[left:]
            if rest:
                self._buffer[0] = (tp, node, rest, expires)
            else:
                self._buffer.popleft()
            self._buffered[node] = self._buffered.get(node, 0) - len(chunk)
            left -= len(chunk)
            delivered = self._deserialized(tp, chunk)
            out.setdefault(tp, []).extend(delivered)
            for r in delivered:
                self._handed[(tp, r.offset)] = r
            self._fetch_metrics.handed_out(tp.topic, len(delivered), None, None)
        if out:
            self._fetch_metrics.drained(limit - left)
        self._notify()  # a broker whose records are all handed out fetches again
        return out

    def _deserialized(self, tp: TopicPartition, records: list[ShareRecord]) -> list[ShareRecord]:
        kd, vd = self._opts.key_deserializer, self._opts.value_deserializer
        if kd is None and vd is None:
            return records
        out = []
        for r in records:
            try:
                key = r.key if kd is None else kd(r.key)
                value = r.value if vd is None else vd(r.value)
            except Exception as exc:
                # released, not rejected: another member may read it; the delivery
                # count limit archives a record nobody can
                self._book.acknowledge(tp, r.offset, AcknowledgeType.RELEASE)
                self._errors.append(RecordDeserializationError(tp, r.offset, exc))
                continue
            out.append(r._replace(key=key, value=value))
        return out

    # -- the heartbeat task -----------------------------------------------------------

    async def _heartbeats(self) -> None:
        m = self._member
        client = self._require_client()
        backoff = Backoff.for_retries(self._client_config)
        while True:
            if not m.topics and m.epoch == 0:
                self._set_assignment()
                self._wake_heartbeat.clear()
                await self._wake_heartbeat.wait()
                continue
            if self._fatal is not None:
                self._wake_heartbeat.clear()
                await self._wake_heartbeat.wait()
                continue
            if not m.topics:
                m.leaving = True
            joining = m.epoch == 0
            answer = await self._heartbeat_once(client)
            if m.left:
                m.leaving = False
                m.left = False
                self._set_assignment()
                continue
            if answer is Answer.OK:
                backoff.succeeded()
                wait = m.interval_ms / 1000 if m.interval_ms else 1.0
            elif answer is Answer.FENCED and not joining:
                wait = 0.0  # rejoin at once; a join fenced again backs off (10k/s before)
            else:
                backoff.failed(0.0)
                wait = backoff.delay_s()
            self._wake_heartbeat.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._wake_heartbeat.wait()

    async def _heartbeat_once(self, client: ClusterClient) -> Answer:
        m, gid = self._member, self._opts.group_id
        fields = m.next_heartbeat()
        request = ShareGroupHeartbeatRequest(
            group_id=gid,
            member_id=m.member_id,
            member_epoch=fields.member_epoch,
            rack_id=fields.rack_id,
            subscribed_topic_names=fields.subscribed_topic_names,
        )
        try:
            node = (await client.coordinators.find(GROUP, gid)).node_id
            response = await client.send(node, request, purpose="group")
        except KafkaError as exc:
            log.info("share group %r: heartbeat failed: %r", gid, exc)
            client.coordinators.invalidate(GROUP, gid)
            m.failed()
            return Answer.RETRY
        m.sent(fields)
        answer = classify(response.error_code)
        if answer is Answer.OK:
            assignment = None
            if response.assignment is not None:
                assignment = {
                    tp.topic_id: tp.partitions for tp in response.assignment.topic_partitions
                }
            m.answered(response.member_epoch, response.heartbeat_interval_ms, assignment)
            self._set_assignment()
            return answer
        error = for_code(response.error_code)(
            f"ShareGroupHeartbeat for group {gid!r}: {response.error_message or ''}".rstrip(": ")
        )
        m.failed()
        if answer is Answer.FENCED:
            log.info("share group %r: fenced (%s); joining again", gid, type(error).__name__)
            m.fenced()
            self._set_assignment()
        elif answer is Answer.COORDINATOR:
            client.coordinators.invalidate(GROUP, gid)
        elif answer is Answer.FATAL:
            log.error("share group %r: %s", gid, error)
            if m.leaving:
                m.left = True
            else:
                self._fatal = error
                self._errors.append(error)
                m.fenced()
                self._set_assignment()
            self._notify()
        return answer

    def _set_assignment(self) -> None:
        client = self._client
        if client is None:
            return
        snap = client.metadata.snapshot
        self._ids = {info.topic_id: name for name, info in snap.topics.items()}
        assigned, unknown = self._member.resolve(self._ids)
        if unknown:
            client.metadata.request_refresh()
        new = frozenset(assigned)
        if new != self._assigned:
            log.info(
                "share group %r: epoch %d assigned %s",
                self._opts.group_id,
                self._member.epoch,
                ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(new)) or "nothing",
            )
            self._assigned = new
            self._notify()

    # -- fetching ---------------------------------------------------------------------

    def _leaders(self) -> dict[int, frozenset[TopicPartition]]:
        """Assigned partitions by leader (those with a known leader)."""
        client = self._require_client()
        snap = client.metadata.snapshot
        out: dict[int, set[TopicPartition]] = {}
        for tp in self._assigned:
            leader = snap.leader_for(tp.topic, tp.partition)
            if leader is not None and leader >= 0:
                out.setdefault(leader, set()).add(tp)
        return {n: frozenset(tps) for n, tps in out.items()}

    async def _supervise(self) -> None:
        """Runs a fetch task for every broker that leads an assigned partition or has
        acknowledgements due; refreshes the assignment when metadata changes."""
        client = self._require_client()
        loop = asyncio.get_running_loop()
        version = -1
        while self._state == "running":
            if client.metadata.snapshot.version != version:
                version = client.metadata.snapshot.version
                self._set_assignment()
            nodes = set(self._leaders()) | self._book.nodes_with_pending() | set(self._flushes)
            for node in nodes:
                task = self._node_tasks.get(node)
                if task is None or task.done():
                    if task is not None and task.done() and not task.cancelled():
                        exc = task.exception()
                        if exc is not None:
                            # a defect, not a broker answer: every poll raises it from
                            # now on (fetching has stopped), never an endless quiet
                            error = KafkaError(f"share fetcher for broker {node} failed: {exc!r}")
                            self._fatal = error
                            self._fail(error)
                            return
                    self._node_tasks[node] = loop.create_task(
                        self._node_loop(node), name=f"aiokproto-share-fetch-{node}"
                    )
            await self._wait_change(0.5)

    def _node_wants(self, node: int) -> bool:
        if self._state != "running":
            return False
        if self._flushes.get(node) or self._book.has_pending(node):
            return True
        return bool(self._leaders().get(node)) and not self._buffered.get(node, 0)

    async def _node_loop(self, node: int) -> None:
        session = self._sessions.setdefault(node, ShareSession())
        gid = self._opts.group_id
        cfg = self._client_config
        backoff = Backoff.for_retries(cfg)
        while True:
            while not self._node_wants(node):
                if self._state != "running":
                    return
                if not self._leaders().get(node) and not self._book.has_pending(node):
                    return  # nothing here any more; the supervisor restarts one if needed
                await self._wait_change(1.0)
            if not self._member.joined:
                await self._wait_change(0.2)
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
        while self._state == "running" and not self._flushes.get(node):
            left = deadline - loop.time()
            if left <= 0:
                return
            await self._wait_change(left)

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
        acks = self._book.pending_for(node) if session.is_open else {}
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
        opts = self._opts
        renew = any(AcknowledgeType.RENEW in a.values() for a in acks.values())
        return ShareFetchRequest(
            group_id=opts.group_id,
            member_id=self._member.member_id,
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
        flushes: list[_Flush],
    ) -> _Outcome:
        client = self._require_client()
        step = session.plan(wanted, frozenset(acks))
        request = self._fetch_request(step, acks)
        timeout_ms = self._client_config.request_timeout_ms + self._opts.fetch_max_wait_ms
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
                    self._opts.group_id,
                    node,
                    error,
                )
                if response.error_code in _FATAL_FETCH:
                    self._fail(error)
                return _Outcome.FAILED
            # a session error on an established session: a new one at once; on a new
            # session (epoch 0) it is the broker's state, and waiting is all we can do
            return _Outcome.FAILED if step.epoch == 0 else _Outcome.OK
        session.succeeded(step)
        if response.acquisition_lock_timeout_ms > 0:
            self._lock_timeout_ms = response.acquisition_lock_timeout_ms
        # The locks started no earlier than the request left: a record still buffered
        # at sent_at + lock is no longer this member's (the broker may have handed it
        # to another), whatever the broker's clock says.
        lock_ms = self._lock_timeout_ms
        expires = None if lock_ms is None else sent_at + lock_ms / 1000
        results: AckResults = {}
        refresh = False
        for topic in response.responses:
            name = self._ids.get(topic.topic_id) or client.metadata.snapshot.topic_name(
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
                        self._opts.group_id,
                        tp,
                        node,
                        for_code(part.error_code).__name__,
                    )
                    continue
                if part.records:
                    fetched_bytes += len(part.records)
                    self._fetch_metrics.partition_fetched(tp.topic, len(part.records))
                self._acquired(tp, node, part.records, part.acquired_records, expires)
        self._fetch_metrics.fetched(
            time.monotonic() - sent_at, fetched_bytes, response.throttle_time_ms
        )
        for tp in acks:
            results.setdefault(tp, None)
        self._report_results(acks, flushes, results)
        self._notify()
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
        records, gaps = acquired_records(
            data, spans, tp.topic, tp.partition, check_crc=self._opts.check_crcs
        )
        self._book.acquired(tp, node, [r.offset for r in records])
        self._book.acquired(tp, node, gaps)
        for offset in gaps:
            self._book.acknowledge(tp, offset, AcknowledgeType.GAP)
        if records:
            self._buffer.append((tp, node, records, expires))
            self._buffered[node] = self._buffered.get(node, 0) + len(records)

    async def _share_acknowledge(
        self,
        node: int,
        session: ShareSession,
        acks: dict[TopicPartition, dict[int, AcknowledgeType]],
        flushes: list[_Flush],
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
            group_id=self._opts.group_id,
            member_id=self._member.member_id,
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
            name = self._ids.get(topic.topic_id) or snap.topic_name(topic.topic_id)
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
        flushes: list[_Flush],
        results: AckResults,
    ) -> None:
        if acks:
            sent = sum(len(o) for o in acks.values())
            failed = sum(len(o) for tp, o in acks.items() if results.get(tp) is not None)
            self._fetch_metrics.acknowledged(sent, failed)
        callback = self._opts.acknowledgement_commit_callback
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
                        "share group %r: acknowledgement callback raised", self._opts.group_id
                    )
        for flush in flushes:
            flush.results.update(results)
            if not flush.future.done():
                flush.future.set_result(flush.results)

    def _report(
        self,
        acks: Mapping[TopicPartition, Mapping[int, AcknowledgeType]],
        flushes: list[_Flush],
        error: Exception | None,
        *,
        lost: bool,
    ) -> None:
        """The request carrying ``acks`` failed: each partition's result is ``error``."""
        failure = error or KafkaError("the request was cancelled")
        self._report_results(acks, flushes, dict.fromkeys(acks, failure))

    def _fail_acks(self, node: int, error: Exception, flushes: list[_Flush]) -> None:
        lost = self._book.forget_node(node)
        self._report(lost, flushes, error, lost=True)

    def _session_lost(self, node: int, session: ShareSession, error: Exception) -> None:
        """The session (and what was acquired in it) is gone: start a new one."""
        session.reset()
        self._fail_acks(node, error, self._flushes.pop(node, []))
        self._drop_buffered(node)

    def _drop_buffered(self, node: int) -> None:
        kept = deque(item for item in self._buffer if item[1] != node)
        self._buffer = kept
        self._buffered[node] = 0
        self._handed = {
            k: r for k, r in self._handed.items() if self._book.node_of(k[0]) is not None
        }

    # -- stopping ---------------------------------------------------------------------

    def _settle_for_stop(self) -> None:
        if self._opts.acknowledgement_mode == "implicit":
            self._accept_handed()
        self._fetch_metrics.not_handed_out(r.topic for r in self._iter)
        self._iter.clear()  # never yielded: released below
        for tp, offset in list(self._handed):
            if self._book.holds(tp, offset):
                self._book.acknowledge(tp, offset, AcknowledgeType.RELEASE)
        self._handed.clear()
        now = time.monotonic()
        for tp, _, records, expires in self._buffer:
            if expires is not None and now >= expires:  # the broker took them back
                self._book.expire(tp, [r.offset for r in records])
                continue
            for r in records:
                if self._book.holds(tp, r.offset):
                    self._book.acknowledge(tp, r.offset, AcknowledgeType.RELEASE)
        self._buffer.clear()
        self._buffered.clear()

    async def _close_sessions(self) -> None:
        """Let every fetch in flight finish, then ShareAcknowledge with epoch -1: the
        last acknowledgements, and the session closed."""
        for task in list(self._node_tasks.values()):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for node, session in self._sessions.items():
            acks = self._book.pending_for(node) if session.is_open else {}
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
                    self._opts.group_id,
                    node,
                    exc,
                )

    async def _leave(self) -> None:
        m = self._member
        if m.epoch <= 0:
            return
        m.leaving = True
        for task in self._tasks[:1]:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self._heartbeat_once(self._require_client())

    # -- helpers ----------------------------------------------------------------------

    def _wake_node_of(self, tp: TopicPartition) -> None:
        self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def _wait_change(self, timeout_s: float) -> None:
        # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation
        # that lands as the event fires, and stop() then waits on a task that goes on
        event = self._changed
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await event.wait()

    def _fail(self, error: KafkaError) -> None:
        self._errors.append(error)
        self._notify()

    def _fail_flushes(self, error: Exception) -> None:
        for flushes in self._flushes.values():
            for flush in flushes:
                if not flush.future.done():
                    flush.future.set_exception(error)
        self._flushes.clear()

    def _raise_errors(self) -> None:
        if self._errors:
            raise self._errors.pop(0)
        if self._fatal is not None:
            raise self._fatal

    def _check_running(self, what: str) -> None:
        if self._state == "running":
            return
        if self._state in ("stopping", "stopped"):
            raise ConsumerStoppedError(f"{what}: the share consumer is {self._state}")
        raise IllegalStateError(
            f"{what}: the share consumer is not started; use 'async with ShareConsumer(...)'"
        )

    def _require_client(self) -> ClusterClient:
        if self._client is None:
            raise IllegalStateError("the share consumer is not started")
        return self._client
