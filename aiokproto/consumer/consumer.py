"""The ``Consumer``: the application's view of fetching, positions and the group.
Positions resolve from the committed offset, then ``auto_offset_reset``; without a
group, a subscription covers all partitions of its topics.

It owns a ``ClusterClient``, a ``SubscriptionState``, a ``Fetcher`` and (with
``group_id``) a ``ClassicGroupDriver``; every call runs on the caller's task, and
background failures surface on the next call. Without ``group_id`` a subscription to
topics (or a pattern) is served by assigning every partition of them to this consumer.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import re
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Generic, Self, Unpack, overload

from aiokproto._generic import K, T, U, V
from aiokproto.awaitables import DONE
from aiokproto.cluster.broker_tasks import wait_event
from aiokproto.cluster.client import ClusterClient
from aiokproto.config import split_options
from aiokproto.consumer.consumer_config import CONSUMER_OPTIONS, ConsumerConfig, group_option_names
from aiokproto.consumer.errors import (
    ConsumerStoppedError,
    NoGroupError,
    NoOffsetForPartitionError,
    RecordDeserializationError,
)
from aiokproto.consumer.fetcher import Fetcher
from aiokproto.consumer.listener import ConsumerRebalanceListener
from aiokproto.consumer.offsets import EARLIEST, LATEST, OffsetClient
from aiokproto.consumer.record import ConsumerRecord, OffsetAndTimestamp
from aiokproto.consumer.subscription import PartitionState, SubscriptionState
from aiokproto.errors import (
    IllegalStateError,
    KafkaConfigError,
    KafkaError,
    KafkaTimeoutError,
)
from aiokproto.lifecycle import StartStop, check_loop
from aiokproto.metrics.connections import ConnectionMetrics
from aiokproto.metrics.consumer import CoordinatorMetrics, FetchMetrics, PollMetrics
from aiokproto.metrics.registry import MetricsRegistry, MetricsSnapshot
from aiokproto.reprs import client_repr, connection_fields
from aiokproto.serialization import (
    ContextDeserializer,
    deserialize_records,
    deserializers_in_context,
)
from aiokproto.structs import ConsumerGroupMetadata, OffsetAndMetadata, TopicPartition
from aiokproto.telemetry.reporter import TelemetryReporter

if TYPE_CHECKING:
    import aiokproto.options  # TypedDicts for annotations only: ~2 ms to build
    from aiokproto.consumer.group.classic_driver import ClassicGroupDriver
    from aiokproto.consumer.group.consumer_driver import ConsumerGroupDriver

    Group = ClassicGroupDriver | ConsumerGroupDriver

log = logging.getLogger(__name__)


def _log_stop_failure(task: asyncio.Task[None]) -> None:
    # the shutdown's error reaches every stop() caller; this keeps a stop requested from
    # a rebalance listener (nobody awaits it) from failing silently
    if not task.cancelled() and task.exception() is not None:
        log.error("stopping the consumer failed: %r", task.exception())


def _all_done(tasks: Iterable[asyncio.Task[None]]) -> asyncio.Future[None]:
    """A future that resolves once every task is done (cancelling it cancels none)."""
    out: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    pending = set(tasks)

    def one_done(task: asyncio.Task[None]) -> None:
        pending.discard(task)
        if not pending and not out.done():
            out.set_result(None)

    for task in list(pending):
        task.add_done_callback(one_done)
    return out


def _check_tp(tp: object) -> TopicPartition:
    if not isinstance(tp, tuple) or len(tp) != 2:
        raise KafkaConfigError(f"expected TopicPartition(topic, partition), not {tp!r}")
    topic, partition = tp
    if not isinstance(topic, str) or not topic:
        raise KafkaConfigError(f"{tp!r}: topic must be a non-empty str")
    if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
        raise KafkaConfigError(f"{tp!r}: partition must be an int >= 0")
    return TopicPartition(topic, partition)


def _check_tps(partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
    return [_check_tp(tp) for tp in partitions]


def _is_int(value: object, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value < high


def _commit_offset(tp: TopicPartition, value: object) -> OffsetAndMetadata:
    """A ``commit()`` value as an ``OffsetAndMetadata``, every field checked: an offset,
    aiokafka's (offset, metadata) pair or an ``OffsetAndMetadata``."""
    if isinstance(value, OffsetAndMetadata):
        offset, metadata, epoch = value
    elif isinstance(value, int) and not isinstance(value, bool):
        offset, metadata, epoch = value, "", -1
    elif isinstance(value, tuple) and len(value) == 2:
        (offset, metadata), epoch = value, -1
    else:
        raise KafkaConfigError(
            f"commit: {tp} maps to {value!r}, not an offset, an (offset, metadata) pair "
            "or an OffsetAndMetadata"
        )
    if not _is_int(offset, 0, 2**63):
        raise KafkaConfigError(f"commit: the offset for {tp} must be an int in [0, 2**63)")
    if not isinstance(metadata, str):
        raise KafkaConfigError(f"commit: the metadata for {tp} must be a str, not {metadata!r}")
    if not _is_int(epoch, -1, 2**31):
        raise KafkaConfigError(f"commit: the leader epoch for {tp} must be an int32 >= -1")
    return OffsetAndMetadata(offset, metadata, epoch)


class Consumer(StartStop, Generic[K, V]):
    """An asyncio Kafka consumer; ``async with Consumer("topic", bootstrap_servers=...)``.

    ``Consumer(*topics, **options)`` subscribes to ``topics`` (a group member with
    ``group_id``, else all their partitions); with no topics, call ``subscribe()`` or
    ``assign()``. Options are Java's consumer configs in snake_case, typed and
    documented in ``aiokproto.options.ConsumerOptions`` (the configuration reference
    lists them). ``Consumer[K, V]`` hands out ``ConsumerRecord[K, V]``: K and V are
    what ``key_deserializer`` and ``value_deserializer`` return, ``bytes | None``
    without one.
    """

    # The overloads tell a type checker K and V from the deserializers given.
    @overload
    def __init__(
        self: Consumer[bytes | None, bytes | None],
        *topics: str,
        key_deserializer: None = None,
        value_deserializer: None = None,
        **options: Unpack[aiokproto.options.ConsumerOptions],
    ) -> None: ...

    @overload
    def __init__(
        self: Consumer[T, bytes | None],
        *topics: str,
        key_deserializer: Callable[[bytes | None], T] | ContextDeserializer[T],
        value_deserializer: None = None,
        **options: Unpack[aiokproto.options.ConsumerOptions],
    ) -> None: ...

    @overload
    def __init__(
        self: Consumer[bytes | None, U],
        *topics: str,
        key_deserializer: None = None,
        value_deserializer: Callable[[bytes | None], U] | ContextDeserializer[U],
        **options: Unpack[aiokproto.options.ConsumerOptions],
    ) -> None: ...

    @overload
    def __init__(
        self: Consumer[T, U],
        *topics: str,
        key_deserializer: Callable[[bytes | None], T] | ContextDeserializer[T],
        value_deserializer: Callable[[bytes | None], U] | ContextDeserializer[U],
        **options: Unpack[aiokproto.options.ConsumerOptions],
    ) -> None: ...

    def __init__(
        self,
        *topics: str,
        key_deserializer: Callable[[bytes | None], Any] | ContextDeserializer[Any] | None = None,
        value_deserializer: Callable[[bytes | None], Any] | ContextDeserializer[Any] | None = None,
        **options: Any,
    ) -> None:
        """Check every option now (``KafkaConfigError`` names a wrong one); connect on
        ``start()`` or ``async with``."""
        if key_deserializer is not None:
            options["key_deserializer"] = key_deserializer
        if value_deserializer is not None:
            options["value_deserializer"] = value_deserializer
        group_names = group_option_names()
        client_config, own = split_options(options, CONSUMER_OPTIONS | group_names, "Consumer")
        try:
            self._config = ConsumerConfig(**{k: v for k, v in own.items() if k in CONSUMER_OPTIONS})
        except TypeError as exc:
            raise KafkaConfigError(f"Consumer: {exc}") from None
        self._group_options = {k: v for k, v in own.items() if k in group_names}
        # ContextDeserializers are awaited here, after the fetcher hands out raw records
        self._ctx = deserializers_in_context(
            self._config.key_deserializer, self._config.value_deserializer
        )
        if self._ctx is not None:
            kd, vd = self._ctx
            self._config = dataclasses.replace(
                self._config,
                key_deserializer=None if kd is not None else self._config.key_deserializer,
                value_deserializer=None if vd is not None else self._config.value_deserializer,
            )
        self._group_config: Any = None
        if self._group_options.get("group_protocol") == "consumer":
            from aiokproto.consumer.group.group_config import CLASSIC_ONLY_OPTIONS

            refused = sorted(k for k in CLASSIC_ONLY_OPTIONS if k in self._group_options)
            if refused:
                raise KafkaConfigError(
                    f"{', '.join(refused)} cannot be set with group_protocol='consumer': "
                    "the broker decides the session and heartbeat interval, and assigns "
                    "partitions (choose its assignor with group_remote_assignor)"
                )
        if self._config.group_id is not None:
            from aiokproto.consumer.group.group_config import GroupConfig

            self._group_config = GroupConfig(
                group_id=self._config.group_id,
                client_rack=self._config.client_rack,
                **self._group_options,
            )
        self._registry = MetricsRegistry(
            client_config.client_id,
            window_ms=client_config.metrics_sample_window_ms,
            num_samples=client_config.metrics_num_samples,
        )
        self._client = ClusterClient(client_config, ConnectionMetrics(self._registry, "consumer"))
        self._client.metadata.add_refresh_listener(self._warn_missing_topics)
        self._telemetry = TelemetryReporter(  # KIP-714 metrics push
            self._client,
            self._registry,
            "consumer",
            client_config,
            resource={
                "group_id": self._config.group_id,
                "group_instance_id": self._group_options.get("group_instance_id"),
                "client_rack": self._config.client_rack,
            },
        )
        self._subs = SubscriptionState()
        self._subs.use_stored = not self._config.enable_auto_offset_store
        self._subs.not_yet_consumed = self._not_yet_consumed
        self._subs.on_revoking = self._drop_revoking
        self._offsets = OffsetClient(self._client, isolation_level=self._config.isolation)
        fetch_metrics = self._fetch_metrics = FetchMetrics(self._registry)
        fetch_metrics.per_partition(lambda: self._subs.states().items())
        self._poll_metrics = PollMetrics(self._registry)
        self._fetcher = Fetcher(
            self._client, self._subs, self._config, self._offsets, fetch_metrics
        )
        self._group_metrics: CoordinatorMetrics | None = None
        if self._group_config is not None:
            self._group_metrics = CoordinatorMetrics(
                self._registry, lambda: len(self._subs.assigned()) if self._subs.in_group else 0
            )
        self._group: Group | None = None
        self._state = "new"
        # records taken from the fetcher but not yet yielded by async iteration
        self._pending: list[ConsumerRecord[Any, Any]] = []
        self._pending_index = 0
        # first (offset, epoch) per partition of records drained and being awaited
        # through ContextDeserializers: not consumed yet (commits stay in front of them)
        self._in_flight: dict[TopicPartition, tuple[int, int]] = {}
        self._pending_version = 0
        self._positions_version = -1
        self._static_topics: frozenset[str] | None = None
        self._all_topics_wanted = False
        self._stop_task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self._follower: asyncio.Task[None] | None = None
        self._leaving: set[asyncio.Task[None]] = set()  # unsubscribe()s in progress
        self._looked_up: set[str] = set()  # topics partitions_for_topic() asked about
        self._loop: asyncio.AbstractEventLoop | None = None  # the one start() ran in
        if topics:
            self._subs.subscribe(topics)

    def __repr__(self) -> str:
        return client_repr(self, self._repr_fields)

    def _repr_fields(self) -> list[str]:
        fields = [self._state, *connection_fields(self._client.config)]
        if self._config.group_id is not None:
            fields.append(f"group_id={self._config.group_id!r}")
        subs = self._subs
        if subs.kind == "pattern" and subs.pattern is not None:
            fields.append(f"pattern={subs.pattern.pattern!r}")
        elif subs.kind == "topics":
            fields.append(f"topics={sorted(subs.topics)}")
        fields.append(f"assigned={len(subs.assigned())}")
        return fields

    # -- lifecycle ---------------------------------------------------------------

    async def start(self) -> None:
        """Connect, learn the cluster, start fetching (and join the group)."""
        if self._state != "new":
            raise IllegalStateError(f"the consumer was already started (it is {self._state})")
        self._state = "starting"
        try:
            await self._client.start()
            await self._telemetry.start()
            await self._fetcher.start()
            if self._group_config is not None:
                self._group = self._new_group()
                await self._group.start()
            else:
                # no group: a subscription means every partition of the subscribed
                # topics, as metadata shows them (topics created later included)
                self._follower = asyncio.get_running_loop().create_task(
                    self._follow_subscription(), name="aiokproto-consumer-subscription"
                )
        except BaseException:
            await self._shutdown()
            raise
        self._state = "running"
        self._loop = asyncio.get_running_loop()
        if self._group is None and self._subs.in_group:
            self._assign_all_subscribed()

    def _new_group(self) -> Group:
        group: Group
        if self._group_config.group_protocol == "consumer":
            from aiokproto.consumer.group.consumer_driver import ConsumerGroupDriver

            group = ConsumerGroupDriver(self._client, self._subs, self._group_config)
        else:
            from aiokproto.consumer.group.classic_driver import ClassicGroupDriver

            group = ClassicGroupDriver(self._client, self._subs, self._group_config)
        group.set_metrics(self._group_metrics)
        return group

    async def _follow_subscription(self) -> None:
        """Without a group: re-assign every partition of the subscription whenever
        metadata changes, so waiting callers see new topics and partitions."""
        metadata = self._client.metadata
        try:
            while True:
                await metadata.next_change()
                if self._subs.in_group:
                    self._assign_all_subscribed()
        except asyncio.CancelledError:
            raise
        except KafkaError:
            return  # the client closed
        except Exception:  # a bug: reach the caller on the next poll
            log.exception("the subscription follower failed")
            raise

    async def stop(self, *, timeout_ms: int | None = None) -> None:
        """Leave the group (final auto-commit and ``on_partitions_revoked``) and close
        every connection. Concurrent calls all wait for the same shutdown, which goes on
        if a caller is cancelled. Called from a rebalance listener, it returns at once:
        the shutdown waits for the listener to return."""
        if self._state == "new":
            self._state = "stopped"
            return
        task = self._stop_task
        if task is None:
            if self._state == "stopped":
                return
            check_loop(self, self._loop)
            self._drop_pending()
            self._state = "stopping"
            self._stopping.set()
            # Callers waiting for records get their answer now, not when shutdown ends:
            # async for ends, getone()/getmany() raise ConsumerStoppedError.
            self._fetcher.release_waiters()
            task = self._stop_task = asyncio.get_running_loop().create_task(
                self._shutdown(timeout_ms), name="aiokproto-consumer-stop"
            )
            task.add_done_callback(_log_stop_failure)
        if self._group is not None and self._group.in_group_task():
            return  # inside a rebalance listener: waiting here would wait for itself
        await asyncio.shield(task)

    close = stop
    """The same as ``stop()``, under the name other clients use."""

    async def _shutdown(self, timeout_ms: int | None = None) -> None:
        follower, self._follower = self._follower, None
        if follower is not None:
            follower.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await follower
        if self._looked_up:
            self._client.metadata.untrack(self._looked_up)
            self._looked_up.clear()
        try:
            if self._group is not None:
                await self._group.close(timeout_ms=timeout_ms)
        finally:
            # unsubscribe()s in progress end with the group closed (it resolves their
            # leave requests): they finish rather than being cancelled under a caller
            # awaiting them
            for task in list(self._leaving):
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            try:
                await self._fetcher.close()
            finally:
                if self._all_topics_wanted:
                    self._client.metadata.want_all_topics(False)
                    self._all_topics_wanted = False
                try:
                    await self._telemetry.close()  # the terminating push, briefly bounded
                finally:
                    await self._client.close()
                    self._state = "stopped"

    def _check_not_stopped(self, what: str) -> None:
        if self._state in ("stopping", "stopped"):
            raise ConsumerStoppedError(f"{what}: the consumer is {self._state}")

    def _check_running(self, *, while_revoking: bool = False) -> None:
        """``while_revoking``: also allowed while ``stop()`` runs the revoke listener
        (it may save positions and committed offsets)."""
        if while_revoking and self._state == "stopping":
            group = self._group
            if group is not None and group.revoking:
                return
        if self._state != "running":
            if self._state in ("stopping", "stopped"):
                raise ConsumerStoppedError(f"the consumer is {self._state}")
            raise IllegalStateError(
                f"the consumer is {self._state}; use 'async with Consumer(...)' or start()"
            )

    # -- subscription ----------------------------------------------------------------

    def subscribe(
        self,
        topics: Iterable[str] = (),
        pattern: str | re.Pattern[str] | None = None,
        listener: ConsumerRebalanceListener | None = None,
    ) -> None:
        """Subscribe to topics or a regex; replaces the previous subscription."""
        self._check_not_stopped("subscribe()")
        if listener is not None and self._group_config is None:
            raise KafkaConfigError("a rebalance listener needs group_id (no group, no rebalances)")
        # group_protocol="consumer": the broker matches the regex (RE2/J syntax)
        self._subs.subscribe(
            topics,
            pattern=pattern,
            listener=listener,
            broker_regex=self._group_protocol == "consumer",
        )
        if self._group is not None:
            self._group.request_rejoin()
        elif self._state == "running" and self._subs.in_group:
            self._assign_all_subscribed()

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Manual assignment: consume exactly these partitions, no group rebalancing."""
        self._check_not_stopped("assign()")
        self._drop_pending()
        self._subs.assign(_check_tps(partitions))

    def assignment(self) -> frozenset[TopicPartition]:
        """The partitions assigned now: by the group, by ``assign()``, or (a subscription
        without a group) every partition of the subscribed topics."""
        return self._subs.assigned()

    def subscription(self) -> frozenset[str]:
        """The subscribed topics (for a pattern or regex, the topics it matched)."""
        return self._subs.topics

    def unsubscribe(self) -> Awaitable[None]:
        """Drop the subscription or manual assignment now. A group member stops handing
        out records at once and leaves the group in the background (final auto-commit,
        ``on_partitions_revoked`` while it still owns the partitions, LeaveGroup); await
        the result to wait for that (not from a rebalance listener: the leave happens
        after it returns)."""
        self._drop_pending()
        group = self._group
        if self._subs.in_group and group is not None and self._state == "running":
            self._subs.start_revoking(self._subs.assigned())
            self._subs.forget_subscription()
            # posted now, so a subscribe() right after rejoins after the leave
            left = group.leave()
            leaving = asyncio.get_running_loop().create_task(
                self._leave(left), name="aiokproto-consumer-leave"
            )
            self._leaving.add(leaving)
            leaving.add_done_callback(self._leaving.discard)
        elif not (self._subs.kind == "none" and self._leaving):
            self._drop_subscription()
        # else: unsubscribed already, a leave in progress drops what is left
        if not self._leaving or (group is not None and group.in_group_task()):
            return DONE  # (from a listener, awaiting would wait for this very listener)
        # a future of its own: a caller cancelled while waiting does not cancel the leave
        return _all_done(self._leaving)

    async def _leave(self, left: asyncio.Future[None]) -> None:
        try:
            await left
        finally:
            # unless a new subscription or manual assignment came meanwhile (it owns
            # the assignment now), drop what the group being left owned
            if self._subs.kind == "none" and len(self._leaving) <= 1:
                self._drop_subscription()

    def _drop_subscription(self) -> None:
        self._subs.unsubscribe()
        if self._static_topics:
            self._client.metadata.untrack(self._static_topics)
        self._static_topics = None

    # -- positions ---------------------------------------------------------------

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Consume ``partition`` from ``offset`` on the next fetch."""
        self._drop_pending({partition})
        self._subs.seek(partition, offset)

    async def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        """Move to the earliest offset of each partition (all assigned if none given)."""
        await self._seek_to(EARLIEST, partitions)

    async def seek_to_end(self, *partitions: TopicPartition) -> None:
        """Move to the end (high watermark, or last stable offset under read_committed)."""
        await self._seek_to(LATEST, partitions)

    async def _seek_to(self, timestamp: int, partitions: Iterable[TopicPartition]) -> None:
        self._check_running()
        tps = _check_tps(partitions) or sorted(self._subs.assigned())
        for tp in tps:
            if self._subs.state_of(tp) is None:
                raise IllegalStateError(f"{tp} is not assigned to this consumer")
        answers = await self._offsets.list_offsets(
            dict.fromkeys(tps, timestamp), timeout_ms=self._client.config.default_api_timeout_ms
        )
        self._drop_pending(set(tps))
        for tp, answer in answers.items():
            if self._subs.state_of(tp) is not None:
                self._subs.seek(tp, answer.offset)

    async def seek_to_committed(
        self, *partitions: TopicPartition
    ) -> dict[TopicPartition, int | None]:
        """Move each partition (all assigned if none given) to the group's committed
        offset; returns what was found (None: nothing committed, position unchanged)."""
        group = self._need_group("seek_to_committed()")
        check_loop(self, self._loop)
        tps = _check_tps(partitions) or sorted(self._subs.assigned())
        for tp in tps:
            if self._subs.state_of(tp) is None:
                raise IllegalStateError(f"{tp} is not assigned to this consumer")
        committed = await group.fetch_committed(tps)
        self._drop_pending(set(tps))
        out: dict[TopicPartition, int | None] = {}
        for tp in tps:
            om = committed.get(tp)
            out[tp] = None if om is None else om.offset
            if om is not None and self._subs.state_of(tp) is not None:
                self._subs.seek(tp, om.offset, om.leader_epoch)
        return out

    def last_poll_timestamp(self, partition: TopicPartition) -> int | None:
        """When (ms since the epoch) the partition's last fetch answer arrived: the
        moment ``highwater()`` was read (None before one)."""
        return self._state_of(partition).fetched_at_ms

    async def position(self, partition: TopicPartition, *, timeout_ms: int | None = None) -> int:
        """The offset of the next record ``getone``/``getmany`` will hand out."""
        self._check_running(while_revoking=True)
        tp = _check_tp(partition)
        if self._subs.state_of(tp) is None:
            raise IllegalStateError(f"{tp} is not assigned to this consumer")
        timeout = (timeout_ms or self._client.config.default_api_timeout_ms) / 1000
        try:
            async with asyncio.timeout(timeout):
                while True:
                    pending = self._not_yet_consumed().get(tp)
                    if pending is not None:
                        return pending[0]
                    self._fetcher.raise_errors({tp}, data=False)
                    state = self._subs.state_of(tp)
                    if state is None:
                        raise IllegalStateError(f"{tp} is no longer assigned to this consumer")
                    if state.position is not None and state.reset is None:
                        return state.position
                    waiter = self._fetcher.data_waiter()
                    await self._ensure_positions()
                    if state.position is None or state.reset is not None:
                        await waiter.wait()
                        self._check_running(while_revoking=True)
        except TimeoutError:
            raise KafkaTimeoutError(
                f"the position of {tp} was not resolved within {timeout * 1000:.0f} ms"
            ) from None

    def highwater(self, partition: TopicPartition) -> int | None:
        """The partition's high watermark as of the last fetch (None before one)."""
        return self._state_of(partition).highwater

    def last_stable_offset(self, partition: TopicPartition) -> int | None:
        """The last stable offset as of the last fetch (None before one)."""
        return self._state_of(partition).last_stable_offset

    def _state_of(self, partition: TopicPartition) -> PartitionState:
        state = self._subs.state_of(_check_tp(partition))
        if state is None:
            raise IllegalStateError(f"{partition} is not assigned to this consumer")
        return state

    # -- pause / resume --------------------------------------------------------------

    def pause(self, *partitions: TopicPartition) -> None:
        """Stop handing out (and fetching) records of these partitions until resumed."""
        tps = _check_tps(partitions)
        self._drop_pending(set(tps))
        self._subs.pause(*tps)

    def resume(self, *partitions: TopicPartition) -> None:
        """Fetch and hand out ``partitions`` again after ``pause()``."""
        self._subs.resume(*_check_tps(partitions))

    def paused(self) -> frozenset[TopicPartition]:
        """The partitions paused by ``pause()``."""
        return self._subs.paused()

    # -- offsets of the log --------------------------------------------------------------

    async def beginning_offsets(
        self, partitions: Iterable[TopicPartition], *, timeout_ms: int | None = None
    ) -> dict[TopicPartition, int]:
        """The first offset still in the log of each partition (the log start offset)."""
        answers = await self._list(partitions, EARLIEST, timeout_ms)
        return {tp: a.offset for tp, a in answers.items()}

    async def end_offsets(
        self, partitions: Iterable[TopicPartition], *, timeout_ms: int | None = None
    ) -> dict[TopicPartition, int]:
        """High watermarks (last stable offsets under read_committed)."""
        answers = await self._list(partitions, LATEST, timeout_ms)
        return {tp: a.offset for tp, a in answers.items()}

    async def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int], *, timeout_ms: int | None = None
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """The first offset with a timestamp >= each given one (None: no such record)."""
        self._check_running()
        specs: dict[TopicPartition, int] = {}
        for tp, ts in timestamps.items():
            if not isinstance(ts, int) or isinstance(ts, bool) or ts < 0:
                raise KafkaConfigError(f"offsets_for_times: timestamp for {tp} must be an int >= 0")
            specs[_check_tp(tp)] = ts
        answers = await self._offsets.list_offsets(
            specs, timeout_ms=timeout_ms or self._client.config.default_api_timeout_ms
        )
        return {
            tp: None if a.offset < 0 else OffsetAndTimestamp(a.offset, a.timestamp, a.leader_epoch)
            for tp, a in answers.items()
        }

    async def _list(
        self, partitions: Iterable[TopicPartition], timestamp: int, timeout_ms: int | None
    ) -> dict[TopicPartition, Any]:
        self._check_running()
        tps = _check_tps(partitions)
        return await self._offsets.list_offsets(
            dict.fromkeys(tps, timestamp),
            timeout_ms=timeout_ms or self._client.config.default_api_timeout_ms,
        )

    # -- metadata -------------------------------------------------------------------------

    async def topics(self) -> frozenset[str]:
        """Every topic in the cluster."""
        self._check_running()
        metadata = self._client.metadata
        metadata.want_all_topics(True)
        try:
            snap = await metadata.refresh()
        finally:
            metadata.want_all_topics(False)
        return frozenset(snap.topics)

    def partitions_for_topic(self, topic: str) -> frozenset[int] | None:
        """The topic's partition ids as the client's metadata knows them now; None if
        the topic is not known yet (it is then looked up: ask again shortly)."""
        self._check_running(while_revoking=True)
        if not isinstance(topic, str) or not topic:
            raise KafkaConfigError(f"topic must be a non-empty str, not {topic!r}")
        metadata = self._client.metadata
        info = metadata.snapshot.topics.get(topic)
        if info is None:
            if topic not in self._looked_up:
                self._looked_up.add(topic)
                metadata.track([topic])
            metadata.request_refresh()
            return None
        return frozenset(info.partitions)

    # -- the group ----------------------------------------------------------------------

    @property
    def _group_protocol(self) -> str:
        config = self._group_config
        return "classic" if config is None else str(config.group_protocol)

    def _need_group(self, what: str, *, while_revoking: bool = False) -> Group:
        self._check_running(while_revoking=while_revoking)
        if self._group is None:
            raise NoGroupError(f"{what} needs a consumer group; create the Consumer with group_id")
        return self._group

    async def commit(
        self,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None = None,
        *,
        timeout_ms: int | None = None,
    ) -> None:
        """Commit ``offsets`` (next offsets to consume), or every consumed position
        (with ``enable_auto_offset_store=False``: what ``store_offsets()`` stored).

        Works in a rebalance listener (also during ``stop()``): partitions being
        revoked are committed in the generation that still owns them. Without
        ``offsets``, ``CommitFailedError`` names partitions the group took away after
        records of theirs were handed out but before they were committed (what is
        still owned is committed first).
        """
        group = self._need_group("commit()", while_revoking=True)
        check_loop(self, self._loop)
        checked: dict[TopicPartition, OffsetAndMetadata] | None = None
        if offsets is not None:
            checked = {}
            for key, value in offsets.items():
                tp = _check_tp(key)
                checked[tp] = _commit_offset(tp, value)
        await group.commit(checked, timeout_ms=timeout_ms)

    def store_offsets(
        self,
        records: ConsumerRecord[Any, Any] | Iterable[ConsumerRecord[Any, Any]] | None = None,
        *,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None = None,
    ) -> None:
        """Store what a commit without explicit offsets commits, for processing that
        finishes out of order (confluent-kafka's ``store_offsets``; needs
        ``enable_auto_offset_store=False``).

        ``records``: a record or records done with (each stores its offset + 1);
        ``offsets``: next offsets to consume, as for ``commit()``. Auto-commit, the
        commit before a rebalance takes partitions away (or on ``stop()``), and
        ``commit()`` with no argument then commit the stored offsets, never positions;
        a partition with nothing stored is not committed. Each call replaces what was
        stored for its partitions (the last call wins, lower or not). A partition not
        assigned to this consumer is refused (``IllegalStateError``, nothing stored);
        what was stored for a partition is forgotten when it is revoked, after the
        commit that follows ``on_partitions_revoked`` (what the listener stores counts).
        """
        if not self._subs.use_stored:
            raise IllegalStateError(
                "store_offsets() needs a Consumer created with enable_auto_offset_store=False"
            )
        self._need_group("store_offsets()", while_revoking=True)
        wanted: dict[TopicPartition, OffsetAndMetadata] = {}
        if records is not None:
            for r in (records,) if isinstance(records, ConsumerRecord) else records:
                if not isinstance(r, ConsumerRecord):
                    raise KafkaConfigError(f"store_offsets: {r!r} is not a ConsumerRecord")
                tp = TopicPartition(r.topic, r.partition)
                wanted[tp] = _commit_offset(
                    tp, OffsetAndMetadata(r.offset + 1, "", r.leader_epoch)
                )
        for key, value in (offsets or {}).items():
            tp = _check_tp(key)
            wanted[tp] = _commit_offset(tp, value)
        states = self._subs.states()
        missing = sorted(tp for tp in wanted if tp not in states)
        if missing:
            names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in missing)
            raise IllegalStateError(f"store_offsets: {names} not assigned to this consumer")
        for tp, om in wanted.items():
            states[tp].stored = om

    async def committed(
        self, partition: TopicPartition, *, timeout_ms: int | None = None
    ) -> int | None:
        """The group's committed offset for ``partition`` (None if nothing is committed)."""
        group = self._need_group("committed()", while_revoking=True)
        check_loop(self, self._loop)
        tp = _check_tp(partition)
        got = await group.fetch_committed([tp], timeout_ms=timeout_ms)
        om = got.get(tp)
        if om is None:
            return None
        offset: int = om.offset
        return offset

    @property
    def group_coordinator(self) -> Group | None:
        """The group member driving this consumer's membership (None without a group_id)."""
        return self._group

    def client_instance_id(self) -> uuid.UUID | None:
        """The id the broker gave this client for KIP-714 metrics (Java's
        ``clientInstanceId()``); None until a broker answered, when no broker supports
        client metrics, or with ``enable_metrics_push=False``."""
        return self._telemetry.client_instance_id()

    def metrics(self) -> MetricsSnapshot:
        """The consumer's metrics now, under Java's names: ``consumer-fetch-manager-metrics``
        (``records-consumed-rate``, ``fetch-rate``, ``fetch-latency-avg``,
        ``records-lag-max``, per-partition ``records-lag``...),
        ``consumer-coordinator-metrics`` with a group (``rebalance-latency-avg``,
        ``commit-latency-avg``, ``assigned-partitions``...), ``consumer-metrics`` and
        ``consumer-node-metrics`` per broker. Works before start and after stop."""
        return self._registry.snapshot()

    def group_metadata(self) -> ConsumerGroupMetadata:
        """This member's group id, generation, member id and instance id, for
        ``Producer.send_offsets_to_transaction`` (consume-transform-produce)."""
        config = self._group_config
        if config is None:
            raise NoGroupError("group_metadata() needs a consumer group; pass group_id")
        if self._state in ("stopping", "stopped"):
            raise ConsumerStoppedError("group_metadata(): the Consumer is stopped")
        group = self._group
        if group is None:
            return ConsumerGroupMetadata(config.group_id, -1, "", config.group_instance_id)
        return ConsumerGroupMetadata(
            config.group_id, group.generation_id, group.member_id, config.group_instance_id
        )

    # -- consuming -----------------------------------------------------------------------

    async def getmany(
        self,
        *partitions: TopicPartition,
        timeout_ms: int = 0,
        max_records: int | None = None,
    ) -> dict[TopicPartition, list[ConsumerRecord[K, V]]]:
        """Records fetched so far, waiting up to ``timeout_ms`` for some to arrive."""
        self._check_running()
        limit = self._config.max_poll_records if max_records is None else max_records
        if not isinstance(limit, int) or limit < 1:
            raise KafkaConfigError(f"max_records must be an int >= 1, not {max_records!r}")
        only = self._only(partitions)
        if self._pending_index < len(self._pending):
            return self._pending_as_dict(limit, only)
        check_loop(self, self._loop)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        fetcher = self._fetcher
        while True:
            await self._poll_housekeeping()
            self._check_running()
            waiter = fetcher.data_waiter()
            out = fetcher.drain(limit, only)
            if out and self._ctx is not None:
                out = await self._deserialize_in_context(out)
            if out:
                return out  # type: ignore[return-value]  # deserialized: K, V
            remaining = deadline - loop.time()
            if remaining <= 0:
                return {}
            await wait_event(waiter, remaining)
            self._check_running()

    async def getone(self, *partitions: TopicPartition) -> ConsumerRecord[K, V]:
        """The next record (of ``partitions`` if given), waiting as long as it takes."""
        self._check_running()
        only = self._only(partitions)
        if only is None:
            try:
                return await self.__anext__()
            except StopAsyncIteration:
                raise ConsumerStoppedError(f"the consumer is {self._state}") from None
        if self._pending_index < len(self._pending):
            got = self._pending_as_dict(1, only)
            for recs in got.values():
                return recs[0]
        check_loop(self, self._loop)
        while True:
            await self._poll_housekeeping()
            self._check_running()
            waiter = self._fetcher.data_waiter()
            out = self._fetcher.drain(1, only)
            if out and self._ctx is not None:
                out = await self._deserialize_in_context(out)
            for recs in out.values():
                return recs[0]  # type: ignore[return-value]  # deserialized: K, V
            await waiter.wait()
            self._check_running()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> ConsumerRecord[K, V]:
        pending = self._pending
        i = self._pending_index
        if i < len(pending) and self._pending_version == self._subs.assignment_version:
            self._pending_index = i + 1
            return pending[i]
        return await self._refill()

    async def _refill(self) -> ConsumerRecord[K, V]:
        if self._state != "running":
            if self._state == "new":
                self._check_running()
            raise StopAsyncIteration
        check_loop(self, self._loop)
        if self._pending_version != self._subs.assignment_version:
            self._drop_unassigned_pending()
            if self._pending_index < len(self._pending):
                return await self.__anext__()
        fetcher = self._fetcher
        limit = self._config.max_poll_records
        while True:
            try:
                await self._poll_housekeeping()
            except ConsumerStoppedError:
                raise StopAsyncIteration from None
            if self._state != "running":
                raise StopAsyncIteration
            waiter = fetcher.data_waiter()
            out = fetcher.drain(limit)
            if out and self._ctx is not None:
                out = await self._deserialize_in_context(out)
            if out:
                if len(out) == 1:
                    (records,) = out.values()
                else:
                    records = [r for recs in out.values() for r in recs]
                self._pending = records
                self._pending_index = 1
                self._pending_version = self._subs.assignment_version
                return records[0]  # type: ignore[return-value]  # deserialized: K, V
            if self._state != "running":
                raise StopAsyncIteration
            await waiter.wait()
            if self._state != "running":
                raise StopAsyncIteration

    # -- internals --------------------------------------------------------------------------

    async def _deserialize_in_context(
        self, got: dict[TopicPartition, list[ConsumerRecord[Any, Any]]]
    ) -> dict[TopicPartition, list[ConsumerRecord[Any, Any]]]:
        """Await the ContextDeserializers over drained records. A record that fails and
        the rest of its partition are not handed out: the position goes back to it, so
        it fails again (``RecordDeserializationError``) until a seek past it."""
        assert self._ctx is not None
        kd, vd = self._ctx
        out: dict[TopicPartition, list[ConsumerRecord[Any, Any]]] = {}
        error: RecordDeserializationError | None = None
        # an auto-commit while a deserializer awaits must not cover these records
        self._in_flight = {tp: (recs[0][2], recs[0][8]) for tp, recs in got.items() if recs}
        try:
            for tp, recs in got.items():
                done, failed = await deserialize_records(kd, vd, recs)
                if done:
                    out[tp] = done
                if failed is not None:
                    bad = recs[failed[0]]
                    if self._subs.state_of(tp) is not None:
                        self._subs.seek(tp, bad.offset)
                    error = error or RecordDeserializationError(tp, bad.offset, failed[1])
        except BaseException:
            # cancelled (or a bug) while awaiting: none of them was handed out
            for tp, (offset, _) in self._in_flight.items():
                if self._subs.state_of(tp) is not None:
                    self._subs.seek(tp, offset)
            raise
        finally:
            self._in_flight = {}
        if error is not None:
            if not out:
                raise error
            # raised by the next call, as a plain deserializer's error is: dropped,
            # the partition would stop at the record while the others flow on
            self._fetcher.defer_error(error)
        return out

    def _only(self, partitions: tuple[TopicPartition, ...]) -> frozenset[TopicPartition] | None:
        if not partitions:
            return None
        tps = frozenset(_check_tps(partitions))
        missing = tps - self._subs.assigned()
        # With a subscription the assignment is the group's (or the metadata's) and may
        # not have arrived yet: wait for those partitions, as aiokafka does. A manual
        # assignment changes only by the caller's hand, so a partition outside it never
        # gets records.
        if missing and self._subs.kind == "assigned":
            raise IllegalStateError(f"{sorted(missing)} not assigned to this consumer")
        return tps

    def _not_yet_consumed(self) -> dict[TopicPartition, tuple[int, int]]:
        out: dict[TopicPartition, tuple[int, int]] = {}
        pending = self._pending
        for i in range(self._pending_index, len(pending)):
            r = pending[i]
            tp = TopicPartition(r[0], r[1])
            if tp not in out:
                out[tp] = (r[2], r[8])
        for tp, first in self._in_flight.items():
            if tp not in out or first[0] < out[tp][0]:
                out[tp] = first
        return out

    def _drop_pending(self, partitions: set[TopicPartition] | None = None) -> None:
        """Forget iteration records (of ``partitions``), rewinding their positions."""
        if self._pending_index >= len(self._pending):
            return
        first = self._not_yet_consumed()
        for tp, (offset, epoch) in first.items():
            if partitions is None or tp in partitions:
                state = self._subs.state_of(tp)
                if state is not None:
                    state.position = offset
                    state.leader_epoch = epoch
                    if state.handed is not None and state.handed > offset:
                        state.handed = offset  # never reached the application
        rest = self._pending[self._pending_index :]
        if partitions is None:
            dropped, rest = rest, []
        else:
            dropped = [r for r in rest if (r[0], r[1]) in partitions]
            rest = [r for r in rest if (r[0], r[1]) not in partitions]
        self._fetch_metrics.not_handed_out(r[0] for r in dropped)
        self._pending = rest
        self._pending_index = 0

    def _drop_revoking(self, partitions: frozenset[TopicPartition]) -> None:
        """The group takes ``partitions`` back: records of theirs not yet handed out
        are forgotten (positions rewound), so none is handed out after the commit."""
        self._drop_pending(set(partitions))

    def _drop_unassigned_pending(self) -> None:
        assigned = self._subs.assigned()
        rest = self._pending[self._pending_index :]
        self._pending = [r for r in rest if (r[0], r[1]) in assigned]
        self._fetch_metrics.not_handed_out(r[0] for r in rest if (r[0], r[1]) not in assigned)
        self._pending_index = 0
        self._pending_version = self._subs.assignment_version

    def _pending_as_dict(
        self, limit: int, only: frozenset[TopicPartition] | None
    ) -> dict[TopicPartition, list[ConsumerRecord[Any, Any]]]:
        if self._pending_version != self._subs.assignment_version:
            self._drop_unassigned_pending()
        out: dict[TopicPartition, list[ConsumerRecord[Any, Any]]] = {}
        keep: list[ConsumerRecord[Any, Any]] = []
        taken = 0
        for r in self._pending[self._pending_index :]:
            tp = TopicPartition(r[0], r[1])
            if taken < limit and (only is None or tp in only) and tp not in self._subs.paused():
                out.setdefault(tp, []).append(r)
                taken += 1
            else:
                keep.append(r)
        self._pending = keep
        self._pending_index = 0
        return out

    async def _poll_housekeeping(self) -> None:
        self._poll_metrics.polled()
        follower = self._follower
        if follower is not None and follower.done() and not follower.cancelled():
            follower.result()  # raises the bug that stopped it
        group = self._group
        if group is not None:
            group.notify_poll()
            group.raise_if_failed()
        elif self._subs.in_group:
            self._assign_all_subscribed()
        if self._subs.assignment_version != self._positions_version:
            await self._unless_stopping(self._ensure_positions)

    async def _unless_stopping(self, step: Callable[[], Awaitable[None]]) -> None:
        """Run ``step`` (it may wait on the network); ``stop()`` interrupts it with
        ``ConsumerStoppedError`` at once rather than when its requests time out."""
        if self._stopping.is_set():
            raise ConsumerStoppedError(f"the consumer is {self._state}")
        work = asyncio.ensure_future(step())
        stopped = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait((work, stopped), return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
            if not work.done():
                work.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await work
        if work.cancelled():
            raise ConsumerStoppedError(f"the consumer is {self._state}")
        work.result()

    async def _ensure_positions(self) -> None:
        """Give every assigned partition without a position one: the committed offset
        (in a group), else ``auto_offset_reset``."""
        version = self._subs.assignment_version
        missing = self._subs.missing_positions()
        if missing and self._group is not None:
            committed = await self._group.fetch_committed(missing)
            for tp, om in committed.items():
                state = self._subs.state_of(tp)
                if om is not None and state is not None and state.position is None:
                    self._subs.seek(tp, om.offset, om.leader_epoch)
            missing = self._subs.missing_positions()
        if missing:
            strategy = self._config.auto_offset_reset
            if strategy == "none":
                raise NoOffsetForPartitionError(missing, "there is no committed offset")
            for tp in missing:
                self._subs.request_reset(tp, "earliest" if strategy == "earliest" else "latest")
        # Held partitions (the listener is still running) get their positions once
        # released: until then the assignment's positions are not settled.
        if version == self._subs.assignment_version and not self._subs.any_held():
            self._positions_version = version

    def _warn_missing_topics(self) -> None:
        """After each metadata refresh: warn once per subscribed topic the brokers say
        does not exist (the consumer would just be assigned nothing from it)."""
        if self._subs.kind == "topics":
            gid = self._config.group_id
            owner = "consumer" if gid is None else f"group {gid!r}"
            self._client.metadata.warn_missing_subscribed(self._subs.topics, log, owner)

    def _assign_all_subscribed(self) -> None:
        """No group: a subscription means every partition of the subscribed topics."""
        metadata = self._client.metadata
        snap = metadata.snapshot
        pattern = self._subs.pattern
        if pattern is not None:
            if not self._all_topics_wanted:
                metadata.want_all_topics(True)
                self._all_topics_wanted = True
            self._subs.set_matched_topics(
                t
                for t, info in snap.topics.items()
                if pattern.fullmatch(t) and not info.is_internal
            )
        topics = self._subs.topics
        if topics != self._static_topics:
            if self._static_topics:
                metadata.untrack(self._static_topics)
            metadata.track(topics)
            self._static_topics = topics
        tps = [
            TopicPartition(t, p)
            for t in topics
            if t in snap.topics
            for p in snap.topics[t].partitions
        ]
        self._subs.set_group_assignment(tps)
