"""Admin partition methods: list offsets, delete records, elect leaders, log dirs."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from aiokproto.admin import codecs
from aiokproto.admin.base import _TOPIC_GONE, AdminBase, Outcome, _error, _leader_epoch
from aiokproto.admin.batch_error import AdminBatchError
from aiokproto.admin.types import (
    DeletedRecords,
    ElectionType,
    IsolationLevel,
    ListOffsetsResult,
    LogDirDescription,
    OffsetSpec,
    ReplicaInfo,
    TopicPartition,
)
from aiokproto.errors import (
    ElectionNotNeededError,
    KafkaConfigError,
    KafkaError,
    UnsupportedVersionError,
)
from aiokproto.protocol.base import Request


class PartitionsMixin(AdminBase):
    """Partition-scoped requests, sent to each partition's leader."""

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
        LO = codecs.list_offsets

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
        DR = codecs.delete_records

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
        EL = codecs.elect_leaders

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
        DL = codecs.describe_log_dirs

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
