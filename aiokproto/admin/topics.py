"""Admin topic methods: create, delete, list, describe topics; create partitions."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from aiokproto.admin import codecs
from aiokproto.admin._batch import no_result
from aiokproto.admin.base import _TOPIC_GONE, MISSING_AFTER, AdminBase, Outcome, _error, _operations
from aiokproto.admin.types import (
    CreatedTopic,
    NewPartitions,
    NewTopic,
    PartitionDescription,
    TopicDescription,
)
from aiokproto.cluster.snapshot import ZERO_UUID
from aiokproto.errors import KafkaConfigError, UnknownTopicIdError, UnsupportedVersionError
from aiokproto.protocol.base import Request
from aiokproto.protocol.messages import metadata as m_metadata


class TopicsMixin(AdminBase):
    """Topic administration."""

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
        CT = codecs.create_topics

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
                asked = topics.get(r.name)
                if asked is None or r.name not in names:
                    # The broker's answer is trusted only for what was asked; an asked
                    # topic it does not answer for fails with NoResult (a KafkaError).
                    continue
                if r.error_code:
                    out[r.name] = _error(r.error_code, r.error_message, f"topic {r.name!r}")
                    continue
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
        DT = codecs.delete_topics

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
            dtp_key = codecs.describe_topic_partitions.DescribeTopicPartitionsRequest.API_KEY
            if dtp_key in conn.api_versions:
                found = await self._describe_topic_partitions(node, list(names), ops)
            else:
                found = await self._describe_by_metadata(node, list(names), ops)
            for name, key in names.items():
                out[key] = found.get(name, no_result(name))
            return out

        return await self._batch(
            "describe_topics", keys, attempt, timeout, final=_TOPIC_GONE, final_after=MISSING_AFTER
        )

    async def _describe_topic_partitions(
        self, node: int, names: list[str], ops: bool
    ) -> Outcome[str, TopicDescription]:
        D = codecs.describe_topic_partitions
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
        CP = codecs.create_partitions

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
