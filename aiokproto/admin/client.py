"""The Admin client: cluster management over the generated protocol messages.

Routing: topic, ACL, SCRAM and election mutations go to the controller-facing broker
(in KRaft any broker forwards them; NOT_CONTROLLER refreshes metadata and retries);
partition-scoped requests go to each partition's leader, one request per leader, sent
concurrently; group requests go to the group's coordinator; group listings and log
dirs fan out to every broker. Every batch call runs through ``run_batch``: per-item
results, retriable items retried with back-off within the call's timeout.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping
from typing import Any, TypeVar

from aiokproto.admin._batch import no_result, run_batch
from aiokproto.admin.errors import AdminBatchError
from aiokproto.admin.scram import new_salt, salted_password
from aiokproto.admin.types import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AlterConfigOp,
    ClusterDescription,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ConfigSynonym,
    ConfigType,
    ConsumerGroupDescription,
    ConsumerGroupListing,
    CreatedTopic,
    DeletedRecords,
    ElectionType,
    FeatureMetadata,
    FinalizedVersionRange,
    IsolationLevel,
    ListOffsetsResult,
    LogDirDescription,
    MemberDescription,
    NewPartitions,
    NewTopic,
    OffsetAndMetadata,
    OffsetSpec,
    PartitionDescription,
    ReplicaInfo,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    SupportedVersionRange,
    TopicDescription,
    TopicPartition,
    UserScramCredentialDeletion,
    UserScramCredentialsDescription,
    UserScramCredentialUpsertion,
)
from aiokproto.cluster.client import ClusterClient
from aiokproto.cluster.coordinators import GROUP
from aiokproto.cluster.snapshot import ZERO_UUID, BrokerInfo
from aiokproto.config import ClientConfig, split_options
from aiokproto.errors import (
    CoordinatorNotAvailableError,
    ElectionNotNeededError,
    IllegalStateError,
    KafkaConfigError,
    KafkaConnectionError,
    KafkaError,
    LeaderNotAvailableError,
    NotCoordinatorError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
    for_code,
)
from aiokproto.protocol.base import Request
from aiokproto.protocol.messages import api_versions as m_api_versions
from aiokproto.protocol.messages import consumer_protocol_assignment as m_assignment
from aiokproto.protocol.messages import create_acls as m_create_acls
from aiokproto.protocol.messages import create_partitions as m_create_partitions
from aiokproto.protocol.messages import create_topics as m_create_topics
from aiokproto.protocol.messages import delete_acls as m_delete_acls
from aiokproto.protocol.messages import delete_groups as m_delete_groups
from aiokproto.protocol.messages import delete_records as m_delete_records
from aiokproto.protocol.messages import delete_topics as m_delete_topics
from aiokproto.protocol.messages import describe_acls as m_describe_acls
from aiokproto.protocol.messages import describe_cluster as m_describe_cluster
from aiokproto.protocol.messages import describe_configs as m_describe_configs
from aiokproto.protocol.messages import describe_groups as m_describe_groups
from aiokproto.protocol.messages import describe_log_dirs as m_describe_log_dirs
from aiokproto.protocol.messages import describe_topic_partitions as m_dtp
from aiokproto.protocol.messages import describe_user_scram_credentials as m_describe_scram
from aiokproto.protocol.messages import elect_leaders as m_elect_leaders
from aiokproto.protocol.messages import incremental_alter_configs as m_alter_configs
from aiokproto.protocol.messages import list_groups as m_list_groups
from aiokproto.protocol.messages import list_offsets as m_list_offsets
from aiokproto.protocol.messages import metadata as m_metadata
from aiokproto.protocol.messages import offset_commit as m_offset_commit
from aiokproto.protocol.messages import offset_delete as m_offset_delete
from aiokproto.protocol.messages import offset_fetch as m_offset_fetch
from aiokproto.protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsRequestScramCredentialDeletion,
    AlterUserScramCredentialsRequestScramCredentialUpsertion,
)

__all__ = ["Admin"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
Outcome = dict[K, V | KafkaError]

_NO_OPERATIONS = -(2**31)  # "authorized operations not requested"
_TOPIC_GONE = (UnknownTopicOrPartitionError, UnknownTopicIdError)
# Consumer groups are those with the consumer protocol type, or "" (simple groups
# that only commit offsets); share and streams groups are listed by other APIs.
_CONSUMER_PROTOCOL_TYPES = ("consumer", "")


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


class Admin:
    """Kafka cluster administration; an async context manager (or ``start()``/``close()``).

    Options are the shared client options (``bootstrap_servers``, ``client_id``,
    ``request_timeout_ms``, ``default_api_timeout_ms``, ``retry_backoff_ms``...).
    Every method takes ``timeout_ms`` (default ``default_api_timeout_ms``).
    """

    def __init__(self, **options: Any) -> None:
        config, _ = split_options(options, (), "Admin")
        # Admin lookups of a topic must never create it.
        self.config: ClientConfig = dataclasses.replace(config, allow_auto_create_topics=False)
        self._client: ClusterClient | None = None

    async def __aenter__(self) -> Admin:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Connect to the cluster and learn its metadata."""
        if self._client is not None:
            return
        client = ClusterClient(self.config)
        await client.start()
        self._client = client

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    stop = close

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
    ) -> dict[K, V]:
        return await run_batch(
            operation,
            keys,
            attempt,
            timeout_ms=timeout_ms,
            backoff_ms=self.config.retry_backoff_ms,
            backoff_max_ms=self.config.retry_backoff_max_ms,
            final=final,
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
            # An unknown partition is final here: the metadata was refreshed first.
            return await self._batch(operation, parts, attempt, timeout_ms, final=_TOPIC_GONE)
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

    # == topics ========================================================================

    async def create_topics(
        self,
        new_topics: Iterable[NewTopic],
        *,
        validate_only: bool = False,
        timeout_ms: int | None = None,
    ) -> dict[str, CreatedTopic]:
        """Create topics; returns what the broker created, by topic name."""
        timeout = self._timeout(timeout_ms)
        topics: dict[str, NewTopic] = {}
        for topic in new_topics:
            if not isinstance(topic, NewTopic):
                raise KafkaConfigError(f"create_topics takes NewTopic objects, not {topic!r}")
            if topic.name in topics:
                raise KafkaConfigError(f"create_topics: topic {topic.name!r} is given twice")
            topics[topic.name] = topic
        CT = m_create_topics

        def build(names: list[str]) -> Callable[[int], Request]:
            def at(version: int) -> Request:
                return CT.CreateTopicsRequest(
                    topics=[
                        CT.CreateTopicsRequestCreatableTopic(
                            name=t.name,
                            num_partitions=t.num_partitions,
                            replication_factor=t.replication_factor,
                            assignments=[
                                CT.CreateTopicsRequestCreatableReplicaAssignment(
                                    partition_index=p, broker_ids=list(brokers)
                                )
                                for p, brokers in (t.replica_assignments or {}).items()
                            ],
                            configs=[
                                CT.CreateTopicsRequestCreatableTopicConfig(name=k, value=v)
                                for k, v in t.topic_configs.items()
                            ],
                        )
                        for t in (topics[n] for n in names)
                    ],
                    timeout_ms=self._request_timeout(timeout),
                    validate_only=validate_only,
                )

            return at

        async def attempt(names: list[str]) -> Outcome[str, CreatedTopic]:
            version, response = await self._send(
                self._controller(), CT.CreateTopicsRequest, build(names), 1 if validate_only else 0
            )
            out: Outcome[str, CreatedTopic] = {}
            for r in response.topics:
                if r.error_code:
                    out[r.name] = _error(r.error_code, r.error_message, f"topic {r.name!r}")
                    continue
                asked = topics[r.name]
                out[r.name] = CreatedTopic(
                    name=r.name,
                    topic_id=r.topic_id if version >= 7 and r.topic_id != ZERO_UUID else None,
                    num_partitions=r.num_partitions if version >= 5 else asked.num_partitions,
                    replication_factor=(
                        r.replication_factor if version >= 5 else asked.replication_factor
                    ),
                )
            return out

        return await self._batch("create_topics", topics, attempt, timeout)

    async def delete_topics(
        self, topics: Iterable[str | uuid.UUID], *, timeout_ms: int | None = None
    ) -> dict[str | uuid.UUID, None]:
        """Delete topics given by name or by topic id (ids need DeleteTopics v6+)."""
        timeout = self._timeout(timeout_ms)
        keys = list(dict.fromkeys(topics))
        for key in keys:
            if not isinstance(key, str | uuid.UUID) or not key:
                raise KafkaConfigError(f"delete_topics takes topic names or ids, not {key!r}")
        DT = m_delete_topics

        async def attempt(pending: list[str | uuid.UUID]) -> Outcome[str | uuid.UUID, None]:
            node = self._controller()
            conn = await self.cluster.connection(node)
            version = conn.version_for(DT.DeleteTopicsRequest)
            out: Outcome[str | uuid.UUID, None] = {}
            if version >= 6:
                states = [
                    DT.DeleteTopicsRequestDeleteTopicState(name=k, topic_id=ZERO_UUID)
                    if isinstance(k, str)
                    else DT.DeleteTopicsRequestDeleteTopicState(name=None, topic_id=k)
                    for k in pending
                ]
                request = DT.DeleteTopicsRequest(
                    topics=states, timeout_ms=self._request_timeout(timeout)
                )
            else:
                for key in pending:
                    if isinstance(key, uuid.UUID):
                        out[key] = UnsupportedVersionError(
                            f"deleting topic id {key} needs DeleteTopics v6+; the broker "
                            f"supports up to v{version}"
                        )
                request = DT.DeleteTopicsRequest(
                    topic_names=[k for k in pending if isinstance(k, str)],
                    timeout_ms=self._request_timeout(timeout),
                )
            response = await conn.send(request, version)
            for r in response.responses:
                by_id = version >= 6 and r.topic_id in pending
                key = r.topic_id if by_id else r.name
                if key not in pending:
                    continue
                out[key] = (
                    _error(r.error_code, r.error_message, f"topic {key!r}")
                    if r.error_code
                    else None
                )
            return out

        return await self._batch("delete_topics", keys, attempt, timeout, final=_TOPIC_GONE)

    async def list_topics(
        self, *, include_internal: bool = False, timeout_ms: int | None = None
    ) -> list[str]:
        """Names of every topic in the cluster, sorted."""

        async def call() -> list[str]:
            return sorted(
                t.name
                for t in await self._all_topics()
                if not t.error_code and (include_internal or not t.is_internal)
            )

        return await self._single("list_topics", call, self._timeout(timeout_ms))

    async def describe_topics(
        self,
        topics: Iterable[str | uuid.UUID],
        *,
        include_authorized_operations: bool = False,
        timeout_ms: int | None = None,
    ) -> dict[str | uuid.UUID, TopicDescription]:
        """Partitions, leaders, ISR and ids of topics given by name or id.

        Uses DescribeTopicPartitions (paged) where the broker has it, else Metadata.
        """
        timeout = self._timeout(timeout_ms)
        keys = list(dict.fromkeys(topics))
        for key in keys:
            if not isinstance(key, str | uuid.UUID) or not key:
                raise KafkaConfigError(f"describe_topics takes topic names or ids, not {key!r}")
        ops = include_authorized_operations

        async def attempt(pending: list[str | uuid.UUID]) -> Outcome[str | uuid.UUID, Any]:
            out: Outcome[str | uuid.UUID, Any] = {}
            names: dict[str, str | uuid.UUID] = {}  # topic name -> the caller's key
            ids = [k for k in pending if isinstance(k, uuid.UUID)]
            if ids:
                _, id_names = await self._topic_ids()
                for tid in ids:
                    if tid in id_names:
                        names[id_names[tid]] = tid
                    else:
                        out[tid] = UnknownTopicIdError(f"topic id {tid}")
            names.update({k: k for k in pending if isinstance(k, str)})
            if not names:
                return out
            node = self.cluster.least_loaded_node()
            conn = await self.cluster.connection(node)
            if m_dtp.DescribeTopicPartitionsRequest.API_KEY in conn.api_versions:
                found = await self._describe_topic_partitions(node, list(names), ops)
            else:
                found = await self._describe_by_metadata(node, list(names), ops)
            for name, key in names.items():
                out[key] = found.get(name, no_result(name))
            return out

        return await self._batch("describe_topics", keys, attempt, timeout, final=_TOPIC_GONE)

    async def _describe_topic_partitions(
        self, node: int, names: list[str], ops: bool
    ) -> Outcome[str, TopicDescription]:
        D = m_dtp
        out: Outcome[str, TopicDescription] = {}
        heads: dict[str, Any] = {}
        parts: dict[str, list[PartitionDescription]] = defaultdict(list)
        cursor: Any = None
        while True:
            request = D.DescribeTopicPartitionsRequest(
                topics=[D.DescribeTopicPartitionsRequestTopicRequest(name=n) for n in names],
                cursor=cursor,
            )
            conn = await self.cluster.connection(node)
            response = await conn.send(request, 0)
            for t in response.topics:
                if t.name is None:
                    continue
                if t.error_code:
                    out[t.name] = _error(t.error_code, None, f"topic {t.name!r}")
                    continue
                heads[t.name] = t
                parts[t.name].extend(
                    PartitionDescription(
                        partition=p.partition_index,
                        leader=p.leader_id if p.leader_id >= 0 else None,
                        leader_epoch=p.leader_epoch,
                        replicas=tuple(p.replica_nodes),
                        isr=tuple(p.isr_nodes),
                        offline_replicas=tuple(p.offline_replicas),
                        eligible_leader_replicas=(
                            None
                            if p.eligible_leader_replicas is None
                            else tuple(p.eligible_leader_replicas)
                        ),
                    )
                    for p in t.partitions
                )
            nxt = response.next_cursor
            if nxt is None:
                break
            # The broker resumes at the cursor; the topic list stays the same.
            cursor = D.DescribeTopicPartitionsRequestCursor(
                topic_name=nxt.topic_name, partition_index=nxt.partition_index
            )
        for name, t in heads.items():
            out[name] = TopicDescription(
                name=name,
                topic_id=t.topic_id,
                is_internal=t.is_internal,
                partitions=tuple(sorted(parts[name], key=lambda p: p.partition)),
                authorized_operations=_operations(t.topic_authorized_operations, ops),
            )
        return out

    async def _describe_by_metadata(
        self, node: int, names: list[str], ops: bool
    ) -> Outcome[str, TopicDescription]:
        M = m_metadata

        def build(version: int) -> Request:
            request = M.MetadataRequest(
                topics=[M.MetadataRequestTopic(name=n) for n in names],
                allow_auto_topic_creation=False,
            )
            if version >= 8:
                request.include_topic_authorized_operations = ops
            return request

        version, response = await self._send(node, M.MetadataRequest, build, min_version=1)
        out: Outcome[str, TopicDescription] = {}
        for t in response.topics:
            if t.name is None:
                continue
            if t.error_code:
                out[t.name] = _error(t.error_code, None, f"topic {t.name!r}")
                continue
            out[t.name] = TopicDescription(
                name=t.name,
                topic_id=t.topic_id if version >= 10 and t.topic_id != ZERO_UUID else None,
                is_internal=t.is_internal,
                partitions=tuple(
                    sorted(
                        (
                            PartitionDescription(
                                partition=p.partition_index,
                                leader=p.leader_id if p.leader_id >= 0 else None,
                                leader_epoch=p.leader_epoch,
                                replicas=tuple(p.replica_nodes),
                                isr=tuple(p.isr_nodes),
                                offline_replicas=tuple(p.offline_replicas),
                            )
                            for p in t.partitions
                        ),
                        key=lambda p: p.partition,
                    )
                ),
                authorized_operations=_operations(t.topic_authorized_operations, ops),
            )
        return out

    async def create_partitions(
        self,
        new_partitions: Mapping[str, NewPartitions],
        *,
        validate_only: bool = False,
        timeout_ms: int | None = None,
    ) -> dict[str, None]:
        """Grow topics to more partitions."""
        timeout = self._timeout(timeout_ms)
        for name, spec in new_partitions.items():
            if not isinstance(spec, NewPartitions) or not name:
                raise KafkaConfigError(
                    f"create_partitions takes {{topic: NewPartitions}}, got {name!r}: {spec!r}"
                )
        CP = m_create_partitions

        async def attempt(names: list[str]) -> Outcome[str, None]:
            def build(version: int) -> Request:
                return CP.CreatePartitionsRequest(
                    topics=[
                        CP.CreatePartitionsTopic(
                            name=n,
                            count=new_partitions[n].total_count,
                            assignments=(
                                None
                                if new_partitions[n].new_assignments is None
                                else [
                                    CP.CreatePartitionsAssignment(broker_ids=list(b))
                                    for b in new_partitions[n].new_assignments or ()
                                ]
                            ),
                        )
                        for n in names
                    ],
                    timeout_ms=self._request_timeout(timeout),
                    validate_only=validate_only,
                )

            _, response = await self._send(self._controller(), CP.CreatePartitionsRequest, build)
            return {
                r.name: (
                    _error(r.error_code, r.error_message, f"topic {r.name!r}")
                    if r.error_code
                    else None
                )
                for r in response.results
            }

        return await self._batch(
            "create_partitions", new_partitions, attempt, timeout, final=_TOPIC_GONE
        )

    # == configs =======================================================================

    async def describe_configs(
        self,
        resources: Iterable[ConfigResource],
        *,
        include_synonyms: bool = False,
        include_documentation: bool = False,
        timeout_ms: int | None = None,
    ) -> dict[ConfigResource, dict[str, ConfigEntry]]:
        """Configs of topics, brokers and other resources, by resource then name.

        Broker resources are asked of that broker (only it knows its static configs).
        """
        timeout = self._timeout(timeout_ms)
        keys = list(dict.fromkeys(resources))
        for res in keys:
            if not isinstance(res, ConfigResource):
                raise KafkaConfigError(f"describe_configs takes ConfigResource, not {res!r}")
            res.broker_id  # noqa: B018 - validates a broker resource's name
        DC = m_describe_configs

        async def send(node: int, pending: list[ConfigResource]) -> Outcome[ConfigResource, Any]:
            def build(version: int) -> Request:
                request = DC.DescribeConfigsRequest(
                    resources=[
                        DC.DescribeConfigsResource(
                            resource_type=r.type.value,
                            resource_name=r.name,
                            configuration_keys=None,
                        )
                        for r in pending
                    ]
                )
                if version >= 1:
                    request.include_synonyms = include_synonyms
                if version >= 3:
                    request.include_documentation = include_documentation
                return request

            version, response = await self._send(node, DC.DescribeConfigsRequest, build)
            by_key = {(r.type.value, r.name): r for r in pending}
            out: Outcome[ConfigResource, Any] = {}
            for r in response.results:
                res = by_key.get((r.resource_type, r.resource_name))
                if res is None:
                    continue
                if r.error_code:
                    out[res] = _error(r.error_code, r.error_message, repr(res))
                    continue
                out[res] = {
                    c.name: ConfigEntry(
                        name=c.name,
                        value=c.value,
                        source=ConfigSource.from_code(c.config_source),
                        is_read_only=c.read_only,
                        is_sensitive=c.is_sensitive,
                        synonyms=tuple(
                            ConfigSynonym(s.name, s.value, ConfigSource.from_code(s.source))
                            for s in (c.synonyms if version >= 1 else ())
                        ),
                        type=ConfigType.from_code(c.config_type),
                        documentation=c.documentation,
                    )
                    for c in r.configs
                }
            return out

        async def attempt(pending: list[ConfigResource]) -> Outcome[ConfigResource, Any]:
            return await self._per_node(self._route_configs(pending, self._any_node()), send)

        return await self._batch("describe_configs", keys, attempt, timeout, final=_TOPIC_GONE)

    def _any_node(self) -> int:
        return self.cluster.least_loaded_node()

    @staticmethod
    def _route_configs(
        resources: list[ConfigResource], default_node: int
    ) -> dict[int, list[ConfigResource]]:
        routes: dict[int, list[ConfigResource]] = defaultdict(list)
        for res in resources:
            broker = res.broker_id
            routes[default_node if broker is None else broker].append(res)
        return routes

    async def incremental_alter_configs(
        self,
        configs: Mapping[ConfigResource, Iterable[AlterConfigOp]],
        *,
        validate_only: bool = False,
        timeout_ms: int | None = None,
    ) -> dict[ConfigResource, None]:
        """SET / DELETE / APPEND / SUBTRACT config values of resources."""
        timeout = self._timeout(timeout_ms)
        ops: dict[ConfigResource, list[AlterConfigOp]] = {}
        for res, changes in configs.items():
            if not isinstance(res, ConfigResource):
                raise KafkaConfigError(
                    f"incremental_alter_configs keys are ConfigResource: {res!r}"
                )
            res.broker_id  # noqa: B018 - validates a broker resource's name
            ops[res] = list(changes)
            for op in ops[res]:
                if not isinstance(op, AlterConfigOp):
                    raise KafkaConfigError(f"{res!r}: {op!r} is not an AlterConfigOp")
        IA = m_alter_configs

        async def send(node: int, pending: list[ConfigResource]) -> Outcome[ConfigResource, None]:
            def build(version: int) -> Request:
                return IA.IncrementalAlterConfigsRequest(
                    resources=[
                        IA.IncrementalAlterConfigsRequestAlterConfigsResource(
                            resource_type=r.type.value,
                            resource_name=r.name,
                            configs=[
                                IA.IncrementalAlterConfigsRequestAlterableConfig(
                                    name=op.name, config_operation=op.op_type.value, value=op.value
                                )
                                for op in ops[r]
                            ],
                        )
                        for r in pending
                    ],
                    validate_only=validate_only,
                )

            _, response = await self._send(node, IA.IncrementalAlterConfigsRequest, build)
            by_key = {(r.type.value, r.name): r for r in pending}
            out: Outcome[ConfigResource, None] = {}
            for r in response.responses:
                res = by_key.get((r.resource_type, r.resource_name))
                if res is not None:
                    out[res] = (
                        _error(r.error_code, r.error_message, repr(res)) if r.error_code else None
                    )
            return out

        async def attempt(pending: list[ConfigResource]) -> Outcome[ConfigResource, None]:
            return await self._per_node(self._route_configs(pending, self._controller()), send)

        return await self._batch(
            "incremental_alter_configs", ops, attempt, timeout, final=_TOPIC_GONE
        )

    # == consumer groups ===============================================================

    async def list_consumer_groups(
        self,
        *,
        states: Iterable[str] | None = None,
        types: Iterable[str] | None = None,
        timeout_ms: int | None = None,
    ) -> list[ConsumerGroupListing]:
        """Consumer groups known to any broker (every broker is asked).

        ``states`` (e.g. "Stable", "Empty") needs ListGroups v4+, ``types`` ("classic",
        "consumer") v5+; both filter on the broker.
        """
        timeout = self._timeout(timeout_ms)
        state_filter = sorted(set(states)) if states is not None else []
        type_filter = sorted(set(types)) if types is not None else []
        LG = m_list_groups

        async def send(node: int, keys: list[int]) -> Outcome[int, list[ConsumerGroupListing]]:
            def build(version: int) -> Request:
                if (state_filter and version < 4) or (type_filter and version < 5):
                    raise UnsupportedVersionError(
                        f"filtering groups by state needs ListGroups v4+ and by type v5+; "
                        f"broker {node} supports v{version}"
                    )
                request = LG.ListGroupsRequest()
                if version >= 4:
                    request.states_filter = state_filter
                if version >= 5:
                    request.types_filter = type_filter
                return request

            version, response = await self._send(node, LG.ListGroupsRequest, build)
            if response.error_code:
                return {node: _error(response.error_code, None, f"ListGroups on broker {node}")}
            return {
                node: [
                    ConsumerGroupListing(
                        group_id=g.group_id,
                        protocol_type=g.protocol_type,
                        state=g.group_state if version >= 4 else None,
                        type=g.group_type if version >= 5 else None,
                        is_simple_consumer_group=g.protocol_type == "",
                    )
                    for g in response.groups
                    if g.protocol_type in _CONSUMER_PROTOCOL_TYPES
                ]
            }

        async def attempt(nodes: list[int]) -> Outcome[int, list[ConsumerGroupListing]]:
            return await self._per_node({n: [n] for n in nodes}, send)

        per_broker = await self._batch(
            "list_consumer_groups", await self._brokers(), attempt, timeout
        )
        listings: dict[str, ConsumerGroupListing] = {}
        for found in per_broker.values():
            for listing in found:
                listings.setdefault(listing.group_id, listing)
        return sorted(listings.values(), key=lambda g: g.group_id)

    async def describe_consumer_groups(
        self,
        group_ids: Iterable[str],
        *,
        include_authorized_operations: bool = False,
        timeout_ms: int | None = None,
    ) -> dict[str, ConsumerGroupDescription]:
        """Members, assignments and state of groups (DescribeGroups to each coordinator)."""
        timeout = self._timeout(timeout_ms)
        ops = include_authorized_operations
        DG = m_describe_groups

        async def send(node: int, groups: list[str]) -> Outcome[str, ConsumerGroupDescription]:
            def build(version: int) -> Request:
                request = DG.DescribeGroupsRequest(groups=groups)
                if version >= 3:
                    request.include_authorized_operations = ops
                return request

            version, response = await self._send(node, DG.DescribeGroupsRequest, build)
            coordinator = self._broker_info(node)
            out: Outcome[str, ConsumerGroupDescription] = {}
            for g in response.groups:
                if g.error_code:
                    message = g.error_message if version >= 6 else None
                    out[g.group_id] = self._group_error(g.group_id, g.error_code, message)
                    continue
                consumer = g.protocol_type == "consumer"
                out[g.group_id] = ConsumerGroupDescription(
                    group_id=g.group_id,
                    is_simple_consumer_group=g.protocol_type == "",
                    members=tuple(
                        MemberDescription(
                            member_id=m.member_id,
                            group_instance_id=m.group_instance_id,
                            client_id=m.client_id,
                            host=m.client_host,
                            assignment=_assignment(m.member_assignment) if consumer else (),
                        )
                        for m in g.members
                    ),
                    partition_assignor=g.protocol_data,
                    state=g.group_state,
                    coordinator=coordinator,
                    authorized_operations=_operations(g.authorized_operations, ops),
                )
            return out

        return await self._group_batch("describe_consumer_groups", group_ids, send, timeout)

    def _broker_info(self, node: int) -> BrokerInfo:
        known = self.cluster.metadata.snapshot.brokers.get(node)
        if known is not None:
            return known
        host, port = self.cluster.address_of(node)
        return BrokerInfo(node, host, port)

    async def delete_consumer_groups(
        self, group_ids: Iterable[str], *, timeout_ms: int | None = None
    ) -> dict[str, None]:
        """Delete empty groups (and their committed offsets)."""
        DG = m_delete_groups

        async def send(node: int, groups: list[str]) -> Outcome[str, None]:
            _, response = await self._send(
                node, DG.DeleteGroupsRequest, lambda v: DG.DeleteGroupsRequest(groups_names=groups)
            )
            return {
                r.group_id: self._group_error(r.group_id, r.error_code) if r.error_code else None
                for r in response.results
            }

        return await self._group_batch(
            "delete_consumer_groups", group_ids, send, self._timeout(timeout_ms)
        )

    async def list_consumer_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        require_stable: bool = False,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Committed offsets of a group (all partitions, or the given ones).

        Partitions without a committed offset are left out.
        """
        timeout = self._timeout(timeout_ms)
        wanted = None if partitions is None else sorted(set(partitions))
        OF = m_offset_fetch

        async def call(node: int) -> dict[TopicPartition, OffsetAndMetadata]:
            conn = await self.cluster.connection(node)
            version = conn.version_for(OF.OffsetFetchRequest)
            ids: dict[str, uuid.UUID] = {}
            names: dict[uuid.UUID, str] = {}
            if version >= 10:
                ids, names = await self._topic_ids()
            by_topic: dict[str, list[int]] = defaultdict(list)
            for tp in wanted or ():
                by_topic[tp.topic].append(tp.partition)
            if version >= 8:
                topics = None
                if wanted is not None:
                    topics = [
                        OF.OffsetFetchRequestTopics(
                            name=t, topic_id=ids.get(t, ZERO_UUID), partition_indexes=ps
                        )
                        for t, ps in by_topic.items()
                    ]
                request = OF.OffsetFetchRequest(
                    groups=[OF.OffsetFetchRequestGroup(group_id=group_id, topics=topics)],
                    require_stable=require_stable,
                )
            else:
                request = OF.OffsetFetchRequest(
                    group_id=group_id,
                    topics=None
                    if wanted is None
                    else [
                        OF.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
                        for t, ps in by_topic.items()
                    ],
                )
                if version >= 7:
                    request.require_stable = require_stable
            response = await conn.send(request, version)
            if version >= 8:
                group = response.groups[0]
                code, topics_out = group.error_code, group.topics
            else:
                code, topics_out = response.error_code, response.topics
            if code:
                raise self._group_error(group_id, code)
            out: dict[TopicPartition, OffsetAndMetadata] = {}
            for t in topics_out:
                name = names.get(t.topic_id, "") if version >= 10 else t.name
                for p in t.partitions:
                    if p.error_code:
                        raise _error(p.error_code, None, f"{name}-{p.partition_index}")
                    if p.committed_offset < 0 or not name:
                        continue
                    out[TopicPartition(name, p.partition_index)] = OffsetAndMetadata(
                        p.committed_offset,
                        p.metadata or "",
                        _leader_epoch(p.committed_leader_epoch),
                    )
            return out

        return await self._coordinator_call(group_id, call, timeout)

    async def alter_consumer_group_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
        *,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, None]:
        """Commit offsets for a group that has no active members."""
        timeout = self._timeout(timeout_ms)
        commits = {
            tp: o if isinstance(o, OffsetAndMetadata) else OffsetAndMetadata(o)
            for tp, o in offsets.items()
        }
        for tp, o in commits.items():
            if not isinstance(tp, tuple) or o.offset < 0:
                raise KafkaConfigError(f"alter_consumer_group_offsets: bad entry {tp!r}: {o!r}")
        OC = m_offset_commit

        async def send(node: int, pending: list[TopicPartition]) -> Outcome[TopicPartition, None]:
            conn = await self.cluster.connection(node)
            version = conn.version_for(OC.OffsetCommitRequest)
            ids: dict[str, uuid.UUID] = {}
            names: dict[uuid.UUID, str] = {}
            out: Outcome[TopicPartition, None] = {}
            if version >= 10:
                ids, names = await self._topic_ids()
            by_topic: dict[str, list[TopicPartition]] = defaultdict(list)
            for tp in pending:
                if version >= 10 and tp.topic not in ids:
                    out[tp] = UnknownTopicOrPartitionError(f"{tp.topic}-{tp.partition}")
                else:
                    by_topic[tp.topic].append(tp)
            if not by_topic:
                return out
            request = OC.OffsetCommitRequest(
                group_id=group_id,
                generation_id_or_member_epoch=-1,
                member_id="",
                topics=[
                    OC.OffsetCommitRequestTopic(
                        name=t,
                        topic_id=ids.get(t, ZERO_UUID),
                        partitions=[
                            OC.OffsetCommitRequestPartition(
                                partition_index=tp.partition,
                                committed_offset=commits[tp].offset,
                                committed_leader_epoch=_wire_epoch(commits[tp].leader_epoch),
                                committed_metadata=commits[tp].metadata,
                            )
                            for tp in tps
                        ],
                    )
                    for t, tps in by_topic.items()
                ],
            )
            response = await conn.send(request, version)
            for t in response.topics:
                name = names.get(t.topic_id, "") if version >= 10 else t.name
                for p in t.partitions:
                    tp = TopicPartition(name, p.partition_index)
                    out[tp] = self._group_error(group_id, p.error_code) if p.error_code else None
            return out

        return await self._group_partitions_batch(
            "alter_consumer_group_offsets", group_id, list(commits), send, timeout
        )

    async def _group_partitions_batch(
        self,
        operation: str,
        group_id: str,
        partitions: list[TopicPartition],
        send: Callable[[int, list[TopicPartition]], Awaitable[Outcome[TopicPartition, None]]],
        timeout_ms: int,
    ) -> dict[TopicPartition, None]:
        """Partition-keyed results from one group's coordinator."""
        if not isinstance(group_id, str) or not group_id:
            raise KafkaConfigError(f"{operation}: group id must be a non-empty string")

        async def attempt(pending: list[TopicPartition]) -> Outcome[TopicPartition, None]:
            try:
                node = (await self.cluster.coordinators.find(GROUP, group_id)).node_id
                return await send(node, pending)
            except KafkaConnectionError:
                self.cluster.coordinators.invalidate(GROUP, group_id)
                raise

        return await self._batch(operation, partitions, attempt, timeout_ms, final=_TOPIC_GONE)

    async def delete_consumer_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition],
        *,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, None]:
        """Forget a group's committed offsets for partitions it no longer consumes."""
        OD = m_offset_delete

        async def send(node: int, pending: list[TopicPartition]) -> Outcome[TopicPartition, None]:
            by_topic: dict[str, list[int]] = defaultdict(list)
            for tp in pending:
                by_topic[tp.topic].append(tp.partition)

            def build(version: int) -> Request:
                return OD.OffsetDeleteRequest(
                    group_id=group_id,
                    topics=[
                        OD.OffsetDeleteRequestTopic(
                            name=t,
                            partitions=[
                                OD.OffsetDeleteRequestPartition(partition_index=p) for p in ps
                            ],
                        )
                        for t, ps in by_topic.items()
                    ],
                )

            _, response = await self._send(node, OD.OffsetDeleteRequest, build)
            if response.error_code:
                error = self._group_error(group_id, response.error_code)
                return dict.fromkeys(pending, error)
            return {
                TopicPartition(t.name, p.partition_index): (
                    self._group_error(group_id, p.error_code) if p.error_code else None
                )
                for t in response.topics
                for p in t.partitions
            }

        return await self._group_partitions_batch(
            "delete_consumer_group_offsets",
            group_id,
            list(dict.fromkeys(partitions)),
            send,
            self._timeout(timeout_ms),
        )

    # == partitions ====================================================================

    async def list_offsets(
        self,
        specs: Mapping[TopicPartition, OffsetSpec],
        *,
        isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, ListOffsetsResult]:
        """Earliest / latest / by-timestamp / max-timestamp offsets, asked of each leader."""
        timeout = self._timeout(timeout_ms)
        for tp, spec in specs.items():
            if not isinstance(spec, OffsetSpec):
                raise KafkaConfigError(f"list_offsets: {tp!r} maps to {spec!r}, not an OffsetSpec")
        needs_max = any(s.timestamp == OffsetSpec.MAX_TIMESTAMP for s in specs.values())
        LO = m_list_offsets

        async def send(node: int, pending: list[TopicPartition]) -> Outcome[TopicPartition, Any]:
            by_topic: dict[str, list[TopicPartition]] = defaultdict(list)
            for tp in pending:
                by_topic[tp.topic].append(tp)

            def build(version: int) -> Request:
                request = LO.ListOffsetsRequest(
                    replica_id=-1,
                    topics=[
                        LO.ListOffsetsTopic(
                            name=t,
                            partitions=[
                                LO.ListOffsetsPartition(
                                    partition_index=tp.partition,
                                    timestamp=specs[tp].timestamp,
                                )
                                for tp in tps
                            ],
                        )
                        for t, tps in by_topic.items()
                    ],
                )
                if version >= 2:
                    request.isolation_level = isolation_level.value
                if version >= 10:
                    request.timeout_ms = self._request_timeout(timeout)
                return request

            # MAX_TIMESTAMP (-3) means something only to ListOffsets v7+.
            _, response = await self._send(
                node, LO.ListOffsetsRequest, build, 7 if needs_max else 1
            )
            out: Outcome[TopicPartition, Any] = {}
            for t in response.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    out[tp] = (
                        _error(p.error_code, None, f"{t.name}-{p.partition_index}")
                        if p.error_code
                        else ListOffsetsResult(p.offset, p.timestamp, _leader_epoch(p.leader_epoch))
                    )
            return out

        return await self._leader_batch("list_offsets", specs, send, timeout)

    async def delete_records(
        self,
        before_offsets: Mapping[TopicPartition, int],
        *,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, DeletedRecords]:
        """Delete records below an offset (-1: the high watermark) in each partition."""
        timeout = self._timeout(timeout_ms)
        for tp, offset in before_offsets.items():
            if not isinstance(offset, int) or offset < -1:
                raise KafkaConfigError(f"delete_records: offset for {tp!r} must be >= -1")
        DR = m_delete_records

        async def send(node: int, pending: list[TopicPartition]) -> Outcome[TopicPartition, Any]:
            by_topic: dict[str, list[TopicPartition]] = defaultdict(list)
            for tp in pending:
                by_topic[tp.topic].append(tp)

            def build(version: int) -> Request:
                return DR.DeleteRecordsRequest(
                    topics=[
                        DR.DeleteRecordsTopic(
                            name=t,
                            partitions=[
                                DR.DeleteRecordsPartition(
                                    partition_index=tp.partition, offset=before_offsets[tp]
                                )
                                for tp in tps
                            ],
                        )
                        for t, tps in by_topic.items()
                    ],
                    timeout_ms=self._request_timeout(timeout),
                )

            _, response = await self._send(node, DR.DeleteRecordsRequest, build)
            return {
                TopicPartition(t.name, p.partition_index): (
                    _error(p.error_code, None, f"{t.name}-{p.partition_index}")
                    if p.error_code
                    else DeletedRecords(p.low_watermark)
                )
                for t in response.topics
                for p in t.partitions
            }

        return await self._leader_batch("delete_records", before_offsets, send, timeout)

    async def elect_leaders(
        self,
        election_type: ElectionType,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, None]:
        """Elect preferred (or, unclean, any) leaders for partitions; None means all.

        A partition that already has the wanted leader fails with
        ``ElectionNotNeededError``; with ``partitions=None`` the broker leaves those out.
        """
        timeout = self._timeout(timeout_ms)
        election = ElectionType(election_type)
        wanted = None if partitions is None else list(dict.fromkeys(partitions))
        EL = m_elect_leaders

        def build_for(pending: list[TopicPartition] | None) -> Callable[[int], Request]:
            def build(version: int) -> Request:
                if version < 1 and election is not ElectionType.PREFERRED:
                    raise UnsupportedVersionError("unclean elections need ElectLeaders v1+")
                by_topic: dict[str, list[int]] = defaultdict(list)
                for tp in pending or ():
                    by_topic[tp.topic].append(tp.partition)
                request = EL.ElectLeadersRequest(
                    topic_partitions=None
                    if pending is None
                    else [
                        EL.ElectLeadersRequestTopicPartitions(topic=t, partitions=ps)
                        for t, ps in by_topic.items()
                    ],
                    timeout_ms=self._request_timeout(timeout),
                )
                if version >= 1:
                    request.election_type = election.value
                return request

            return build

        async def send(pending: list[TopicPartition] | None) -> Outcome[TopicPartition, None]:
            version, response = await self._send(
                self._controller(), EL.ElectLeadersRequest, build_for(pending)
            )
            if version >= 1 and response.error_code:
                raise _error(response.error_code, None, "ElectLeaders")
            return {
                TopicPartition(r.topic, p.partition_id): (
                    _error(p.error_code, p.error_message, f"{r.topic}-{p.partition_id}")
                    if p.error_code
                    else None
                )
                for r in response.replica_election_results
                for p in r.partition_result
            }

        final = (*_TOPIC_GONE, ElectionNotNeededError)
        if wanted is not None:
            return await self._batch("elect_leaders", wanted, send, timeout, final=final)
        # All partitions: the answer decides the keys, so retry the call as a whole.
        outcome = await self._single("elect_leaders", lambda: send(None), timeout)
        errors = {k: v for k, v in outcome.items() if isinstance(v, KafkaError)}
        results = {k: None for k, v in outcome.items() if not isinstance(v, KafkaError)}
        if errors:
            raise AdminBatchError("elect_leaders", results, errors)
        return results

    async def describe_log_dirs(
        self,
        brokers: Iterable[int] | None = None,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        timeout_ms: int | None = None,
    ) -> dict[int, dict[str, LogDirDescription]]:
        """Log dirs of each broker (all brokers by default): replicas, sizes, lag."""
        timeout = self._timeout(timeout_ms)
        nodes = sorted(set(brokers)) if brokers is not None else await self._brokers()
        wanted = None if partitions is None else sorted(set(partitions))
        DL = m_describe_log_dirs

        async def send(node: int, _: list[int]) -> Outcome[int, dict[str, LogDirDescription]]:
            def build(version: int) -> Request:
                by_topic: dict[str, list[int]] = defaultdict(list)
                for tp in wanted or ():
                    by_topic[tp.topic].append(tp.partition)
                return DL.DescribeLogDirsRequest(
                    topics=None
                    if wanted is None
                    else [
                        DL.DescribeLogDirsRequestDescribableLogDirTopic(topic=t, partitions=ps)
                        for t, ps in by_topic.items()
                    ]
                )

            version, response = await self._send(node, DL.DescribeLogDirsRequest, build)
            if version >= 3 and response.error_code:
                return {node: _error(response.error_code, None, f"log dirs of broker {node}")}
            dirs: dict[str, LogDirDescription] = {}
            for r in response.results:
                dirs[r.log_dir] = LogDirDescription(
                    path=r.log_dir,
                    error=_error(r.error_code, None, r.log_dir) if r.error_code else None,
                    replicas={
                        TopicPartition(t.name, p.partition_index): ReplicaInfo(
                            p.partition_size, p.offset_lag, p.is_future_key
                        )
                        for t in r.topics
                        for p in t.partitions
                    },
                    total_bytes=r.total_bytes if version >= 4 and r.total_bytes >= 0 else None,
                    usable_bytes=r.usable_bytes if version >= 4 and r.usable_bytes >= 0 else None,
                )
            return {node: dirs}

        async def attempt(pending: list[int]) -> Outcome[int, dict[str, LogDirDescription]]:
            return await self._per_node({n: [n] for n in pending}, send)

        return await self._batch("describe_log_dirs", nodes, attempt, timeout)

    # == cluster =======================================================================

    async def describe_cluster(
        self, *, include_authorized_operations: bool = False, timeout_ms: int | None = None
    ) -> ClusterDescription:
        """Cluster id, controller and brokers (DescribeCluster, or Metadata on old brokers)."""
        ops = include_authorized_operations
        DC = m_describe_cluster

        async def call() -> ClusterDescription:
            node = self._any_node()
            conn = await self.cluster.connection(node)
            if DC.DescribeClusterRequest.API_KEY not in conn.api_versions:
                snap = await self.cluster.metadata.refresh()
                return ClusterDescription(
                    snap.cluster_id,
                    snap.controller_id if snap.controller_id >= 0 else None,
                    tuple(snap.brokers[b] for b in sorted(snap.brokers)),
                )
            _, response = await self._send(
                node,
                DC.DescribeClusterRequest,
                lambda v: DC.DescribeClusterRequest(include_cluster_authorized_operations=ops),
            )
            if response.error_code:
                raise _error(response.error_code, response.error_message, "DescribeCluster")
            return ClusterDescription(
                cluster_id=response.cluster_id,
                controller_id=response.controller_id if response.controller_id >= 0 else None,
                brokers=tuple(
                    sorted(
                        (BrokerInfo(b.broker_id, b.host, b.port, b.rack) for b in response.brokers),
                        key=lambda b: b.node_id,
                    )
                ),
                authorized_operations=_operations(response.cluster_authorized_operations, ops),
            )

        return await self._single("describe_cluster", call, self._timeout(timeout_ms))

    async def describe_features(self, *, timeout_ms: int | None = None) -> FeatureMetadata:
        """Finalized and supported feature versions (ApiVersions v3+)."""
        AV = m_api_versions

        async def call() -> FeatureMetadata:
            conn = await self.cluster.connection(self._any_node())
            version = conn.version_for(AV.ApiVersionsRequest)
            if version < 3:
                raise UnsupportedVersionError("describing features needs ApiVersions v3+")
            response = await conn.send(
                AV.ApiVersionsRequest(
                    client_software_name="aiokproto", client_software_version="0.1.0"
                ),
                version,
            )
            if response.error_code:
                raise _error(response.error_code, None, "ApiVersions")
            epoch = response.finalized_features_epoch
            return FeatureMetadata(
                finalized_features={
                    f.name: FinalizedVersionRange(f.min_version_level, f.max_version_level)
                    for f in response.finalized_features
                },
                finalized_features_epoch=epoch if epoch >= 0 else None,
                supported_features={
                    f.name: SupportedVersionRange(f.min_version, f.max_version)
                    for f in response.supported_features
                },
            )

        return await self._single("describe_features", call, self._timeout(timeout_ms))

    # == ACLs ==========================================================================

    async def create_acls(
        self, acls: Iterable[AclBinding], *, timeout_ms: int | None = None
    ) -> dict[AclBinding, None]:
        """Create ACL bindings (needs an authorizer on the brokers)."""
        keys = list(dict.fromkeys(acls))
        for acl in keys:
            if not isinstance(acl, AclBinding):
                raise KafkaConfigError(f"create_acls takes AclBinding, not {acl!r}")
        CA = m_create_acls

        async def attempt(pending: list[AclBinding]) -> Outcome[AclBinding, None]:
            def build(version: int) -> Request:
                return CA.CreateAclsRequest(
                    creations=[
                        CA.CreateAclsRequestAclCreation(
                            resource_type=a.resource_type.value,
                            resource_name=a.name,
                            resource_pattern_type=a.pattern_type.value,
                            principal=a.principal,
                            host=a.host,
                            operation=a.operation.value,
                            permission_type=a.permission_type.value,
                        )
                        for a in pending
                    ]
                )

            _, response = await self._send(self._controller(), CA.CreateAclsRequest, build)
            # Results come back in the order of the creations.
            return {
                acl: _error(r.error_code, r.error_message, "ACL") if r.error_code else None
                for acl, r in zip(pending, response.results, strict=False)
            }

        return await self._batch("create_acls", keys, attempt, self._timeout(timeout_ms))

    async def describe_acls(
        self, acl_filter: AclBindingFilter | None = None, *, timeout_ms: int | None = None
    ) -> list[AclBinding]:
        """ACL bindings matching ``acl_filter`` (all of them by default)."""
        f = acl_filter or AclBindingFilter.any()
        DA = m_describe_acls

        async def call() -> list[AclBinding]:
            def build(version: int) -> Request:
                return DA.DescribeAclsRequest(
                    resource_type_filter=f.resource_type.value,
                    resource_name_filter=f.name,
                    pattern_type_filter=f.pattern_type.value,
                    principal_filter=f.principal,
                    host_filter=f.host,
                    operation=f.operation.value,
                    permission_type=f.permission_type.value,
                )

            _, response = await self._send(self._any_node(), DA.DescribeAclsRequest, build)
            if response.error_code:
                raise _error(response.error_code, response.error_message, "DescribeAcls")
            return [
                _binding(
                    r.resource_type,
                    r.resource_name,
                    r.pattern_type,
                    a.principal,
                    a.host,
                    a.operation,
                    a.permission_type,
                )
                for r in response.resources
                for a in r.acls
            ]

        return await self._single("describe_acls", call, self._timeout(timeout_ms))

    async def delete_acls(
        self, filters: Iterable[AclBindingFilter], *, timeout_ms: int | None = None
    ) -> dict[AclBindingFilter, list[AclBinding]]:
        """Delete the ACLs matching each filter; returns what each filter deleted."""
        keys = list(dict.fromkeys(filters))
        for f in keys:
            if not isinstance(f, AclBindingFilter):
                raise KafkaConfigError(f"delete_acls takes AclBindingFilter, not {f!r}")
        DA = m_delete_acls

        async def attempt(pending: list[AclBindingFilter]) -> Outcome[AclBindingFilter, Any]:
            def build(version: int) -> Request:
                return DA.DeleteAclsRequest(
                    filters=[
                        DA.DeleteAclsFilter(
                            resource_type_filter=f.resource_type.value,
                            resource_name_filter=f.name,
                            pattern_type_filter=f.pattern_type.value,
                            principal_filter=f.principal,
                            host_filter=f.host,
                            operation=f.operation.value,
                            permission_type=f.permission_type.value,
                        )
                        for f in pending
                    ]
                )

            _, response = await self._send(self._controller(), DA.DeleteAclsRequest, build)
            out: Outcome[AclBindingFilter, Any] = {}
            for f, r in zip(pending, response.filter_results, strict=False):
                if r.error_code:
                    out[f] = _error(r.error_code, r.error_message, "DeleteAcls filter")
                    continue
                failed = [m for m in r.matching_acls if m.error_code]
                if failed:
                    out[f] = _error(failed[0].error_code, failed[0].error_message, "deleting ACL")
                    continue
                out[f] = [
                    _binding(
                        m.resource_type,
                        m.resource_name,
                        m.pattern_type,
                        m.principal,
                        m.host,
                        m.operation,
                        m.permission_type,
                    )
                    for m in r.matching_acls
                ]
            return out

        return await self._batch("delete_acls", keys, attempt, self._timeout(timeout_ms))

    # == SCRAM =========================================================================

    async def describe_user_scram_credentials(
        self, users: Iterable[str] | None = None, *, timeout_ms: int | None = None
    ) -> dict[str, UserScramCredentialsDescription]:
        """SCRAM mechanisms and iteration counts per user (all users by default)."""
        timeout = self._timeout(timeout_ms)
        names = None if users is None else list(dict.fromkeys(users))
        DS = m_describe_scram

        async def send(pending: list[str] | None) -> Outcome[str, Any]:
            def build(version: int) -> Request:
                return DS.DescribeUserScramCredentialsRequest(
                    users=None
                    if pending is None
                    else [DS.DescribeUserScramCredentialsRequestUserName(name=u) for u in pending]
                )

            _, response = await self._send(
                self._any_node(), DS.DescribeUserScramCredentialsRequest, build
            )
            if response.error_code:
                raise _error(response.error_code, response.error_message, "SCRAM credentials")
            return {
                r.user: (
                    _error(r.error_code, r.error_message, f"user {r.user!r}")
                    if r.error_code
                    else UserScramCredentialsDescription(
                        r.user,
                        tuple(
                            ScramCredentialInfo(ScramMechanism.from_code(c.mechanism), c.iterations)
                            for c in r.credential_infos
                        ),
                    )
                )
                for r in response.results
            }

        if names is not None:
            return await self._batch("describe_user_scram_credentials", names, send, timeout)
        outcome = await self._single("describe_user_scram_credentials", lambda: send(None), timeout)
        return {k: v for k, v in outcome.items() if not isinstance(v, KafkaError)}

    async def alter_user_scram_credentials(
        self,
        alterations: Iterable[UserScramCredentialUpsertion | UserScramCredentialDeletion],
        *,
        timeout_ms: int | None = None,
    ) -> dict[str, None]:
        """Upsert or delete SCRAM credentials; results by user.

        The password never leaves this process: only the salted password is sent.
        """
        timeout = self._timeout(timeout_ms)
        upserts: list[AlterUserScramCredentialsRequestScramCredentialUpsertion] = []
        deletes: list[AlterUserScramCredentialsRequestScramCredentialDeletion] = []
        for alt in alterations:
            if isinstance(alt, UserScramCredentialUpsertion):
                info = alt.credential_info
                salt = alt.salt or new_salt()
                upserts.append(
                    AlterUserScramCredentialsRequestScramCredentialUpsertion(
                        name=alt.user,
                        mechanism=info.mechanism.value,
                        iterations=info.iterations,
                        salt=salt,
                        salted_password=salted_password(
                            info.mechanism, alt.password, salt, info.iterations
                        ),
                    )
                )
            elif isinstance(alt, UserScramCredentialDeletion):
                deletes.append(
                    AlterUserScramCredentialsRequestScramCredentialDeletion(
                        name=alt.user, mechanism=alt.mechanism.value
                    )
                )
            else:
                raise KafkaConfigError(f"not a SCRAM upsertion or deletion: {alt!r}")
        # The broker takes one alteration per user per request (DUPLICATE_RESOURCE
        # otherwise), so a user's second alteration goes in a second round.
        per_user: dict[str, list[Any]] = defaultdict(list)
        for deletion in deletes:
            per_user[deletion.name].append(deletion)
        for upsertion in upserts:
            per_user[upsertion.name].append(upsertion)
        results: dict[str, None] = {}
        errors: dict[str, KafkaError] = {}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout / 1000
        for round_no in range(max((len(v) for v in per_user.values()), default=0)):
            batch = {
                user: alts[round_no]
                for user, alts in per_user.items()
                if round_no < len(alts) and user not in errors
            }
            if not batch:
                break
            left_ms = max(1, int((deadline - loop.time()) * 1000))
            try:
                results.update(await self._scram_round(batch, left_ms))
            except AdminBatchError as exc:
                results.update(exc.results)
                errors.update(exc.errors)
        for user in errors:
            results.pop(user, None)
        if errors:
            raise AdminBatchError("alter_user_scram_credentials", results, errors)
        return results

    async def _scram_round(self, batch: dict[str, Any], timeout_ms: int) -> dict[str, None]:
        Upsertion = AlterUserScramCredentialsRequestScramCredentialUpsertion

        async def attempt(pending: list[str]) -> Outcome[str, None]:
            wires = [batch[user] for user in pending]
            request = AlterUserScramCredentialsRequest(
                upsertions=[w for w in wires if isinstance(w, Upsertion)],
                deletions=[w for w in wires if not isinstance(w, Upsertion)],
            )
            _, response = await self._send(
                self._controller(), AlterUserScramCredentialsRequest, lambda v: request
            )
            return {
                r.user: (
                    _error(r.error_code, r.error_message, f"user {r.user!r}")
                    if r.error_code
                    else None
                )
                for r in response.results
            }

        return await self._batch("alter_user_scram_credentials", batch, attempt, timeout_ms)


def _binding(
    resource_type: int,
    name: str,
    pattern_type: int,
    principal: str,
    host: str,
    operation: int,
    permission_type: int,
) -> AclBinding:
    return AclBinding(
        ResourceType.from_code(resource_type),
        name,
        ResourcePatternType.from_code(pattern_type),
        principal,
        host,
        AclOperation.from_code(operation),
        AclPermissionType.from_code(permission_type),
    )


def _assignment(data: bytes | memoryview | None) -> tuple[TopicPartition, ...]:
    """Decode a consumer member's assignment (int16 version + ConsumerProtocolAssignment)."""
    if not data or len(data) < 2:
        return ()
    raw = bytes(data)
    version = int.from_bytes(raw[:2], "big", signed=True)
    cls = m_assignment.ConsumerProtocolAssignment
    try:
        decoded = cls.decode_from(raw, 2, min(version, cls.MAX_VERSION))[0]
    except KafkaError:
        return ()  # a custom assignor's bytes: not ours to interpret
    return tuple(
        TopicPartition(t.topic, p) for t in decoded.assigned_partitions for p in t.partitions
    )
