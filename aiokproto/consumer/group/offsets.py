"""OffsetCommit / OffsetFetch requests and answers for one group (pure).

Version 10 of both APIs names topics by id only; when a topic's id is unknown the
caller drops to version 9, which every broker that speaks 10 also speaks.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

from aiokproto.cluster.snapshot import ZERO_UUID
from aiokproto.protocol.messages import offset_commit as oc
from aiokproto.protocol.messages import offset_fetch as of
from aiokproto.structs import OffsetAndMetadata, TopicPartition

TOPIC_ID_VERSION = 10


def usable_version(best: int, topics: Iterable[str], ids: Mapping[str, uuid.UUID]) -> int:
    """``best`` unless it needs topic ids we lack."""
    if best >= TOPIC_ID_VERSION and any(ids.get(t, ZERO_UUID) == ZERO_UUID for t in topics):
        return TOPIC_ID_VERSION - 1
    return best


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tp in sorted(set(partitions)):
        out.setdefault(tp.topic, []).append(tp.partition)
    return out


def build_commit(
    group_id: str,
    generation: int,
    member_id: str,
    group_instance_id: str | None,
    offsets: Mapping[TopicPartition, OffsetAndMetadata],
    ids: Mapping[str, uuid.UUID],
    version: int,
) -> oc.OffsetCommitRequest:
    return oc.OffsetCommitRequest(
        group_id=group_id,
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        # v7+; older brokers predate static membership (KIP-345)
        group_instance_id=group_instance_id if version >= 7 else None,
        topics=[
            oc.OffsetCommitRequestTopic(
                name=topic,
                topic_id=ids.get(topic, ZERO_UUID),
                partitions=[
                    oc.OffsetCommitRequestPartition(
                        partition_index=p,
                        committed_offset=offsets[TopicPartition(topic, p)].offset,
                        committed_leader_epoch=offsets[TopicPartition(topic, p)].leader_epoch,
                        committed_metadata=offsets[TopicPartition(topic, p)].metadata,
                    )
                    for p in ps
                ],
            )
            for topic, ps in _by_topic(offsets).items()
        ],
    )


def parse_commit(
    response: oc.OffsetCommitResponse, version: int, ids: Mapping[str, uuid.UUID]
) -> dict[TopicPartition, int]:
    """Error code per partition."""
    names = {v: k for k, v in ids.items()}
    out: dict[TopicPartition, int] = {}
    for t in response.topics:
        name = names.get(t.topic_id, "") if version >= TOPIC_ID_VERSION else t.name
        for p in t.partitions:
            out[TopicPartition(name, p.partition_index)] = p.error_code
    return out


def build_fetch(
    group_id: str,
    partitions: Iterable[TopicPartition],
    ids: Mapping[str, uuid.UUID],
    version: int,
    require_stable: bool = True,
) -> of.OffsetFetchRequest:
    by_topic = _by_topic(partitions)
    if version >= 8:
        return of.OffsetFetchRequest(
            groups=[
                of.OffsetFetchRequestGroup(
                    group_id=group_id,
                    topics=[
                        of.OffsetFetchRequestTopics(
                            name=t, topic_id=ids.get(t, ZERO_UUID), partition_indexes=ps
                        )
                        for t, ps in by_topic.items()
                    ],
                )
            ],
            require_stable=require_stable,
        )
    return of.OffsetFetchRequest(
        group_id=group_id,
        topics=[
            of.OffsetFetchRequestTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()
        ],
        require_stable=require_stable and version >= 7,
    )


def parse_fetch(
    response: of.OffsetFetchResponse, version: int, ids: Mapping[str, uuid.UUID]
) -> tuple[int, dict[TopicPartition, tuple[int, OffsetAndMetadata | None]]]:
    """(group-level error code, per partition (error code, committed or None))."""
    names = {v: k for k, v in ids.items()}
    topics: list[of.OffsetFetchResponseTopic] | list[of.OffsetFetchResponseTopics]
    if version >= 8:
        if not response.groups:
            return 0, {}
        group = response.groups[0]
        code, topics = group.error_code, group.topics
    else:
        code, topics = response.error_code, response.topics
    out: dict[TopicPartition, tuple[int, OffsetAndMetadata | None]] = {}
    for t in topics:
        if version >= TOPIC_ID_VERSION and isinstance(t, of.OffsetFetchResponseTopics):
            name = names.get(t.topic_id, "")
        else:
            name = t.name
        for p in t.partitions:
            committed = (
                OffsetAndMetadata(p.committed_offset, p.metadata or "", p.committed_leader_epoch)
                if p.committed_offset >= 0
                else None
            )
            out[TopicPartition(name, p.partition_index)] = (p.error_code, committed)
    return code, out
