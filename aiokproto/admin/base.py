"""Admin plumbing: lifecycle, batching, and routing to controller, leaders and coordinators.

The area mixins (topics, configs, groups...) subclass ``AdminBase`` for these helpers.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, Unpack

from aiokproto.admin._batch import run_batch
from aiokproto.admin.batch_error import AdminBatchError
from aiokproto.admin.types import AclOperation, TopicPartition
from aiokproto.cluster.client import ClusterClient
from aiokproto.cluster.coordinators import GROUP
from aiokproto.cluster.snapshot import BrokerInfo
from aiokproto.config import ClientConfig, split_options
from aiokproto.errors import (
    CoordinatorNotAvailableError,
    IllegalStateError,
    KafkaConfigError,
    KafkaConnectionError,
    KafkaError,
    LeaderNotAvailableError,
    NotCoordinatorError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
    for_code,
)
from aiokproto.metrics.connections import ConnectionMetrics
from aiokproto.metrics.registry import MetricsRegistry, MetricsSnapshot
from aiokproto.protocol.base import Request
from aiokproto.protocol.messages import metadata as m_metadata
from aiokproto.reprs import client_repr, connection_fields
from aiokproto.telemetry.reporter import TelemetryReporter

if TYPE_CHECKING:
    import aiokproto.options  # TypedDicts for annotations only: ~2 ms to build

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
Outcome = dict[K, V | KafkaError]

_NO_OPERATIONS = -(2**31)  # "authorized operations not requested"
_TOPIC_GONE = (UnknownTopicOrPartitionError, UnknownTopicIdError)
# A broker of a cluster learns of a topic the controller created a moment ago a little
# later than the controller says so (CI: list_offsets right after create_topics was told
# UNKNOWN_TOPIC_OR_PARTITION), so a missing topic is believed after this many answers in
# a row: about 0.7 s with the default back-off, far below the call's timeout.
MISSING_AFTER = 4


def _error(code: int, message: str | None, what: str) -> KafkaError:
    return for_code(code)(f"{what}: {message}" if message else what)


def _operations(bits: int, requested: bool) -> frozenset[AclOperation] | None:
    if not requested or bits == _NO_OPERATIONS:
        return None
    return frozenset(op for op in AclOperation if op.value > 0 and bits & (1 << op.value))


def _leader_epoch(epoch: int) -> int | None:
    return None if epoch < 0 else epoch


def _wire_epoch(epoch: int | None) -> int:
    return -1 if epoch is None else epoch


class AdminBase:
    """Lifecycle and request routing shared by the Admin mixins."""

    def __init__(self, **options: Unpack[aiokproto.options.AdminOptions]) -> None:
        """Check every option now (``KafkaConfigError`` names a wrong one); connect on
        ``start()`` or ``async with``."""
        config, _ = split_options(options, (), "Admin")
        # Admin lookups of a topic must never create it.
        self.config: ClientConfig = dataclasses.replace(config, allow_auto_create_topics=False)
        self._client: ClusterClient | None = None
        self._starting: ClusterClient | None = None  # close() during start() closes it
        self._registry = MetricsRegistry(
            config.client_id,
            window_ms=config.metrics_sample_window_ms,
            num_samples=config.metrics_num_samples,
        )
        self._conn_metrics = ConnectionMetrics(self._registry, "admin-client")
        self._telemetry: TelemetryReporter | None = None  # KIP-714 metrics push

    def __repr__(self) -> str:
        return client_repr(
            self,
            lambda: ["started" if self._client is not None else "stopped",
                     *connection_fields(self.config)],
        )

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Connect to the cluster and learn its metadata."""
        if self._client is not None:
            return
        client = self._starting = ClusterClient(self.config, self._conn_metrics)
        try:
            await client.start()
        finally:
            closed, self._starting = self._starting is None, None
        if closed:  # close() was called while the cluster answered
            await client.close()
            raise IllegalStateError("the Admin was closed while starting")
        self._client = client
        self._telemetry = TelemetryReporter(client, self._registry, "admin", self.config)
        await self._telemetry.start()

    async def close(self) -> None:
        """Close the connections, after pushing the last client metrics (KIP-714)."""
        starting, self._starting = self._starting, None
        if starting is not None:  # start() waits for the cluster: it ends now
            await starting.close()
        client, self._client = self._client, None
        if client is not None:
            if self._telemetry is not None:
                await self._telemetry.close()  # the terminating push, briefly bounded
            await client.close()

    stop = close
    """The same as ``close()`` (the name the Producer and Consumer use)."""

    def metrics(self) -> MetricsSnapshot:
        """The admin client's metrics now, under Java's names (``admin-client-metrics``:
        ``request-rate``, ``request-latency-avg``, ``connection-count``...; per broker in
        ``admin-client-node-metrics``)."""
        return self._registry.snapshot()

    def client_instance_id(self) -> uuid.UUID | None:
        """The id the broker gave this client for KIP-714 metrics (Java's
        ``clientInstanceId()``); None until a broker answered, when no broker supports
        client metrics, or with ``enable_metrics_push=False``."""
        return None if self._telemetry is None else self._telemetry.client_instance_id()

    # == plumbing ======================================================================

    @property
    def cluster(self) -> ClusterClient:
        if self._client is None:
            raise IllegalStateError("the Admin is not started; use 'async with' or start()")
        return self._client

    def _timeout(self, timeout_ms: int | None) -> int:
        if timeout_ms is None:
            return self.config.default_api_timeout_ms
        if timeout_ms <= 0:
            raise KafkaConfigError(f"timeout_ms must be positive, not {timeout_ms}")
        return timeout_ms

    def _request_timeout(self, timeout_ms: int) -> int:
        """The broker-side timeout field: no longer than the call or the socket allow."""
        return min(timeout_ms, self.config.request_timeout_ms)

    async def _batch(
        self,
        operation: str,
        keys: Iterable[K],
        attempt: Callable[[list[K]], Awaitable[Outcome[K, V]]],
        timeout_ms: int,
        final: tuple[type[KafkaError], ...] = (),
        final_after: int = 1,
    ) -> dict[K, V]:
        return await run_batch(
            operation,
            keys,
            attempt,
            timeout_ms=timeout_ms,
            backoff_ms=self.config.retry_backoff_ms,
            backoff_max_ms=self.config.retry_backoff_max_ms,
            final=final,
            final_after=final_after,
            on_stale_metadata=self.cluster.metadata.refresh,
        )

    async def _single(self, operation: str, call: Callable[[], Awaitable[V]], timeout_ms: int) -> V:
        """A call with one outcome: retried like a batch of one, raised plainly."""

        async def attempt(keys: list[str]) -> Outcome[str, V]:
            return {operation: await call()}

        try:
            return (await self._batch(operation, [operation], attempt, timeout_ms))[operation]
        except AdminBatchError as exc:
            raise exc.errors[operation] from None

    async def _send(
        self,
        node: int,
        request_cls: type[Request],
        build: Callable[[int], Request],
        min_version: int = 0,
    ) -> tuple[int, Any]:
        """Send the request ``build(version)`` at the best common version."""
        conn = await self.cluster.connection(node)
        version = conn.version_for(request_cls, min_version)
        return version, await conn.send(build(version), version)

    def _controller(self) -> int:
        snap = self.cluster.metadata.snapshot
        if snap.controller_id in snap.brokers:
            return snap.controller_id
        return self.cluster.least_loaded_node()

    async def _brokers(self) -> list[int]:
        await self.cluster.metadata.refresh()
        return sorted(self.cluster.metadata.snapshot.brokers) or self.cluster.known_nodes()

    async def _per_node(
        self,
        routes: Mapping[int, list[K]],
        send: Callable[[int, list[K]], Awaitable[Outcome[K, V]]],
        on_error: Callable[[KafkaError, list[K]], None] | None = None,
    ) -> Outcome[K, V]:
        """Run ``send`` for every node concurrently; a failed node fails its keys."""

        async def one(node: int, keys: list[K]) -> Outcome[K, V]:
            try:
                return await send(node, keys)
            except KafkaError as exc:
                if on_error is not None:
                    on_error(exc, keys)
                return dict.fromkeys(keys, exc)

        out: Outcome[K, V] = {}
        for part in await asyncio.gather(*(one(n, ks) for n, ks in routes.items())):
            out.update(part)
        return out

    async def _route_to_leaders(
        self, partitions: Iterable[TopicPartition]
    ) -> tuple[dict[int, list[TopicPartition]], Outcome[TopicPartition, Any]]:
        """Partitions grouped by leader, plus the ones that cannot be routed now."""
        md = self.cluster.metadata
        parts = list(partitions)
        if any(md.snapshot.leader_for(*tp) is None for tp in parts):
            await md.refresh()
        snap = md.snapshot
        routes: dict[int, list[TopicPartition]] = defaultdict(list)
        failed: Outcome[TopicPartition, Any] = {}
        for tp in parts:
            info = snap.topics.get(tp.topic)
            code = md.topic_errors.get(tp.topic, 0)
            if info is None or tp.partition not in info.partitions:
                if info is None and code and code != UnknownTopicOrPartitionError.errno:
                    failed[tp] = _error(code, None, f"metadata for {tp.topic!r}")
                else:
                    failed[tp] = UnknownTopicOrPartitionError(f"{tp.topic}-{tp.partition}")
                continue
            leader = snap.leader_for(*tp)
            if leader is None:
                failed[tp] = LeaderNotAvailableError(f"{tp.topic}-{tp.partition} has no leader")
            else:
                routes[leader].append(tp)
        return routes, failed

    async def _leader_batch(
        self,
        operation: str,
        partitions: Iterable[TopicPartition],
        send: Callable[[int, list[TopicPartition]], Awaitable[Outcome[TopicPartition, V]]],
        timeout_ms: int,
    ) -> dict[TopicPartition, V]:
        parts = list(dict.fromkeys(partitions))
        for tp in parts:
            if not isinstance(tp, tuple) or len(tp) != 2:
                raise KafkaConfigError(f"{operation}: {tp!r} is not a TopicPartition")
        topics = {tp.topic for tp in parts}
        md = self.cluster.metadata
        md.track(topics)

        async def attempt(pending: list[TopicPartition]) -> Outcome[TopicPartition, V]:
            routes, failed = await self._route_to_leaders(pending)
            out = await self._per_node(routes, send)
            out.update(failed)
            return out

        try:
            return await self._batch(
                operation, parts, attempt, timeout_ms, final=_TOPIC_GONE, final_after=MISSING_AFTER
            )
        finally:
            md.untrack(topics)

    async def _route_to_coordinators(
        self, groups: Iterable[str]
    ) -> tuple[dict[int, list[str]], Outcome[str, Any]]:
        coordinators = self.cluster.coordinators

        async def find(group: str) -> BrokerInfo | KafkaError:
            try:
                return await coordinators.find(GROUP, group)
            except KafkaError as exc:
                return exc

        names = list(groups)
        routes: dict[int, list[str]] = defaultdict(list)
        failed: Outcome[str, Any] = {}
        for group, found in zip(names, await asyncio.gather(*map(find, names)), strict=True):
            if isinstance(found, KafkaError):
                failed[group] = found
            else:
                routes[found.node_id].append(group)
        return routes, failed

    def _group_error(self, group: str, code: int, message: str | None = None) -> KafkaError:
        error = _error(code, message, f"group {group!r}")
        if isinstance(error, NotCoordinatorError | CoordinatorNotAvailableError):
            self.cluster.coordinators.invalidate(GROUP, group)
        return error

    def _forget_coordinators(self, error: KafkaError, groups: list[str]) -> None:
        if isinstance(error, KafkaConnectionError):
            for group in groups:
                self.cluster.coordinators.invalidate(GROUP, group)

    async def _group_batch(
        self,
        operation: str,
        groups: Iterable[str],
        send: Callable[[int, list[str]], Awaitable[Outcome[str, V]]],
        timeout_ms: int,
    ) -> dict[str, V]:
        names = list(dict.fromkeys(groups))
        for group in names:
            if not isinstance(group, str) or not group:
                raise KafkaConfigError(f"{operation}: group id must be a non-empty string")

        async def attempt(pending: list[str]) -> Outcome[str, V]:
            routes, failed = await self._route_to_coordinators(pending)
            out = await self._per_node(routes, send, self._forget_coordinators)
            out.update(failed)
            return out

        return await self._batch(operation, names, attempt, timeout_ms)

    async def _coordinator_call(
        self, group_id: str, call: Callable[[int], Awaitable[V]], timeout_ms: int
    ) -> V:
        """One request to the group's coordinator, retried on coordinator errors."""
        if not isinstance(group_id, str) or not group_id:
            raise KafkaConfigError("group id must be a non-empty string")

        async def attempt() -> V:
            node = (await self.cluster.coordinators.find(GROUP, group_id)).node_id
            try:
                return await call(node)
            except KafkaConnectionError:
                self.cluster.coordinators.invalidate(GROUP, group_id)
                raise

        return await self._single(f"group {group_id!r}", attempt, timeout_ms)

    async def _all_topics(self) -> list[Any]:
        """Every topic's Metadata entry (a direct request: the cache tracks few topics)."""

        def build(version: int) -> Request:
            return m_metadata.MetadataRequest(topics=None, allow_auto_topic_creation=False)

        node = self.cluster.least_loaded_node()
        _, response = await self._send(node, m_metadata.MetadataRequest, build, min_version=1)
        return [t for t in response.topics if t.name is not None]

    async def _topic_ids(self) -> tuple[dict[str, uuid.UUID], dict[uuid.UUID, str]]:
        by_name = {t.name: t.topic_id for t in await self._all_topics() if not t.error_code}
        return by_name, {tid: name for name, tid in by_name.items()}

    def _any_node(self) -> int:
        return self.cluster.least_loaded_node()
