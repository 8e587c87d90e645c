"""``ShareConsumer``: a member of a share group (KIP-932, queues for Kafka). A heartbeat
task (``ShareMember``, ShareGroupHeartbeat), a supervisor task (one fetch task per
leader broker), the buffer of acquired records, implicit/explicit acknowledgement,
``commit()``, ``stop()``.

Shaped like ``Consumer``: this module is the application's API and the records it
hands out; the membership is ``share/driver.py`` (``ShareGroupDriver``: the heartbeat
task around the pure ``ShareMember``), the fetching ``share/fetcher.py``
(``ShareFetcher``: one task per leader broker running that broker's share session,
on the ``BrokerTasks`` supervisor the regular fetcher uses too). Every task belongs to
them and ends at ``stop()``.

Acquired records wait in the fetcher's buffer until ``getmany()`` / ``async for`` hands
them out. Implicit mode accepts what the previous poll handed out when the next poll
comes (or at ``commit()``/``stop()``); explicit mode takes ``acknowledge()`` per record
and refuses a poll while a handed-out record is unacknowledged, as Java's
``KafkaShareConsumer`` does. ``stop()`` accepts (implicit) or releases (explicit) what
was handed out, releases what was never handed out, and leaves the group.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from typing import TYPE_CHECKING, Any, Generic, Literal, Unpack, overload

from aiokproto._generic import K, T, U, V
from aiokproto.cluster.client import ClusterClient
from aiokproto.config import split_options
from aiokproto.consumer.errors import RecordDeserializationError
from aiokproto.errors import (
    ConsumerStoppedError,
    IllegalStateError,
    KafkaConfigError,
    KafkaError,
    KafkaTimeoutError,
)
from aiokproto.lifecycle import StartStop
from aiokproto.metrics.connections import ConnectionMetrics
from aiokproto.metrics.consumer import SHARE_GROUP, PollMetrics, ShareFetchMetrics
from aiokproto.metrics.registry import MetricsRegistry, MetricsSnapshot
from aiokproto.reprs import client_repr, connection_fields
from aiokproto.serialization import (
    ContextDeserializer,
    deserialize_records,
    deserializers_in_context,
)
from aiokproto.share.acks import AcknowledgeType, ack_type
from aiokproto.share.driver import ShareGroupDriver
from aiokproto.share.fetcher import AckResults, ShareFetcher
from aiokproto.share.records import ShareRecord
from aiokproto.share.share_config import ShareConfig
from aiokproto.share.signals import Signals
from aiokproto.structs import TopicPartition
from aiokproto.telemetry.reporter import TelemetryReporter

if TYPE_CHECKING:
    import aiokproto.options  # TypedDicts for annotations only: ~2 ms to build

log = logging.getLogger(__name__)


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


class ShareConsumer(StartStop, Generic[K, V]):
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
        key_deserializer: Callable[[bytes | None], T] | ContextDeserializer[T],
        value_deserializer: None = None,
        **options: Unpack[aiokproto.options.ShareConsumerOptions],
    ) -> None: ...

    @overload
    def __init__(
        self: ShareConsumer[bytes | None, U],
        *topics: str,
        key_deserializer: None = None,
        value_deserializer: Callable[[bytes | None], U] | ContextDeserializer[U],
        **options: Unpack[aiokproto.options.ShareConsumerOptions],
    ) -> None: ...

    @overload
    def __init__(
        self: ShareConsumer[T, U],
        *topics: str,
        key_deserializer: Callable[[bytes | None], T] | ContextDeserializer[T],
        value_deserializer: Callable[[bytes | None], U] | ContextDeserializer[U],
        **options: Unpack[aiokproto.options.ShareConsumerOptions],
    ) -> None: ...

    def __init__(
        self,
        *topics: str,
        key_deserializer: Callable[[bytes | None], Any] | ContextDeserializer[Any] | None = None,
        value_deserializer: Callable[[bytes | None], Any] | ContextDeserializer[Any] | None = None,
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
            self._opts = ShareConfig(**own)
        except TypeError as exc:
            raise KafkaConfigError(f"ShareConsumer: {exc}") from None
        # ContextDeserializers are awaited in getmany(); plain ones stay in _deserialized
        self._ctx = deserializers_in_context(
            self._opts.key_deserializer, self._opts.value_deserializer
        )
        if self._ctx is not None:
            if self._ctx[0] is not None:
                self._opts.key_deserializer = None
            if self._ctx[1] is not None:
                self._opts.value_deserializer = None
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
            lambda: len(self._driver.assigned),
            "partitions the share group assigned us",
        )
        self._telemetry: TelemetryReporter | None = None  # KIP-714 metrics push
        self._state: Literal["new", "running", "stopping", "stopped"] = "new"
        self._signals = Signals()
        self._driver = ShareGroupDriver(
            self._opts.group_id, self._opts.client_rack, cc, self._signals
        )
        self._member = self._driver.member
        self._fetcher = ShareFetcher(
            self._opts,
            cc,
            self._driver,
            self._signals,
            self._fetch_metrics,
            running=lambda: self._state == "running",
            dropped=self._forget_dropped,
        )
        self._book = self._fetcher.book
        self._handed: dict[tuple[TopicPartition, int], ShareRecord] = {}  # unacknowledged
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
                f"assigned={len(self._driver.assigned)}",
            ],
        )

    # -- lifecycle --------------------------------------------------------------------

    async def start(self) -> None:
        """Connect and join the share group when subscribed; ``async with`` calls it."""
        if self._state != "new":
            if self._state == "running":
                return
            raise ConsumerStoppedError(f"the share consumer is {self._state}")
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
        self._driver.start(self._client)
        self._fetcher.start(self._client)
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
                await self._signals.wait(0.1)
            return
        self._state = "stopping"
        self._signals.notify()
        limit = (timeout_ms or self._client_config.default_api_timeout_ms) / 1000
        try:
            async with asyncio.timeout(limit):
                self._settle_for_stop()
                await self._fetcher.close_sessions()
                await self._driver.leave()
        except (TimeoutError, KafkaError) as exc:
            log.warning("share group %r: stop did not finish cleanly: %r", self._opts.group_id, exc)
        finally:
            await self._driver.close()
            await self._fetcher.close()  # a commit() still waiting raises
            if self._client is not None:
                self._client.metadata.untrack(self._member.topics)
                try:
                    if self._telemetry is not None:
                        await self._telemetry.close()  # the terminating push, bounded
                finally:
                    await self._client.close()
            self._state = "stopped"
            self._stopped.set()
            self._signals.notify()

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
        if self._signals.fatal is not None and not (self._driver.dead or self._fetcher.dead):
            self._signals.fatal = None
            self._member.fenced()
        self._driver.wake()

    def unsubscribe(self) -> None:
        """Subscribe to nothing: the member leaves the share group (``subscribe(())``)."""
        self.subscribe(())

    def subscription(self) -> frozenset[str]:
        """The subscribed topics."""
        return self._member.topics

    def assignment(self) -> frozenset[TopicPartition]:
        """The partitions the share group assigned this member (other members may share them)."""
        return self._driver.assigned

    @property
    def member_id(self) -> str:
        """This member's id in the share group (chosen by the client, KIP-1082)."""
        return self._member.member_id

    @property
    def acquisition_lock_timeout_ms(self) -> int | None:
        """The brokers' acquisition lock duration (from the last ShareFetch answer)."""
        return self._fetcher.lock_timeout_ms

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
            while not self._fetcher.buffer:
                self._signals.raise_errors()
                left = deadline - loop.time()
                if left <= 0:
                    return {}
                await self._signals.wait(left)
                if self._state != "running":
                    raise ConsumerStoppedError("the share consumer stopped")
            taken = self._take(limit)
            if taken and self._ctx is not None:
                taken = await self._deserialize_in_context(taken)
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
            self._signals.notify()  # its broker's task sends the renewal

    async def commit(self, *, timeout_ms: int | None = None) -> AckResults:
        """Send every pending acknowledgement now and wait for the brokers' answers:
        per partition, None or the error (as Java's ``commitSync``)."""
        self._check_running("commit()")
        if self._opts.acknowledgement_mode == "implicit":
            self._accept_handed()
        flushes = self._fetcher.flush()
        if not flushes:
            return {}
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
        self._signals.raise_errors()
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
            self._signals.notify()

    def _take(self, limit: int) -> dict[TopicPartition, list[ShareRecord]]:
        out: dict[TopicPartition, list[ShareRecord]] = {}
        taken = 0
        for tp, chunk in self._fetcher.take(limit):
            taken += len(chunk)
            delivered = self._deserialized(tp, chunk)
            out.setdefault(tp, []).extend(delivered)
            for r in delivered:
                self._handed[(tp, r.offset)] = r
            self._fetch_metrics.handed_out(tp.topic, len(delivered), None, None)
        if out:
            self._fetch_metrics.drained(taken)
        self._signals.notify()  # a broker whose records are all handed out fetches again
        return out

    async def _deserialize_in_context(
        self, taken: dict[TopicPartition, list[ShareRecord]]
    ) -> dict[TopicPartition, list[ShareRecord]]:
        """Await the ContextDeserializers; a record that fails is released and its error
        raised by a later call, as a plain deserializer's (_deserialized)."""
        assert self._ctx is not None
        kd, vd = self._ctx
        try:
            return await self._deserialize_taken(kd, vd, taken)
        except BaseException:
            # cancelled while a deserializer awaited: none was handed out; another
            # member (or this one, later) gets them (implicit mode would accept them)
            for tp, recs in taken.items():
                for r in recs:
                    if self._handed.pop((tp, r.offset), None) is not None:
                        self._book.acknowledge(tp, r.offset, AcknowledgeType.RELEASE)
            raise

    async def _deserialize_taken(
        self,
        kd: ContextDeserializer[Any] | None,
        vd: ContextDeserializer[Any] | None,
        taken: dict[TopicPartition, list[ShareRecord]],
    ) -> dict[TopicPartition, list[ShareRecord]]:
        out: dict[TopicPartition, list[ShareRecord]] = {}
        for tp, recs in taken.items():
            kept: list[ShareRecord] = []
            while recs:
                done, failed = await deserialize_records(kd, vd, recs)
                kept += done
                if failed is None:
                    break
                bad = recs[failed[0]]
                if self._handed.pop((tp, bad.offset), None) is not None:
                    self._book.acknowledge(tp, bad.offset, AcknowledgeType.RELEASE)
                self._signals.errors.append(RecordDeserializationError(tp, bad.offset, failed[1]))
                recs = recs[failed[0] + 1 :]
            for r in kept:
                if (tp, r.offset) in self._handed:  # still ours after the awaits
                    self._handed[(tp, r.offset)] = r
            if kept:
                out[tp] = kept
        return out

    def _forget_dropped(self) -> None:
        """A broker's session ended: what it acquired is not ours to acknowledge."""
        self._handed = {
            k: r for k, r in self._handed.items() if self._book.node_of(k[0]) is not None
        }

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
                self._signals.errors.append(RecordDeserializationError(tp, r.offset, exc))
                continue
            out.append(r._replace(key=key, value=value))
        return out

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
        self._fetcher.release_buffered()

    # -- helpers ----------------------------------------------------------------------

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
