"""Immutable views of cluster metadata (``ClusterSnapshot``), and the pure rules for
updating them.

The metadata actor is the only writer; everyone else reads the snapshot it last
published. Updates never move a partition back to an older leader epoch for the same
topic id (a lagging broker's answer must not undo a newer one), while a changed topic
id means the topic was deleted and recreated, so its old partitions are dropped whole.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

ZERO_UUID = uuid.UUID(int=0)


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int
    leader_epoch: int = -1
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    offline_replicas: tuple[int, ...] = ()
    error_code: int = 0


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, PartitionInfo]
    is_internal: bool = False
    error_code: int = 0


def _frozen(d: dict[int, PartitionInfo]) -> Mapping[int, PartitionInfo]:
    return MappingProxyType(d)


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """What the client knows about the cluster at one moment."""

    brokers: Mapping[int, BrokerInfo] = field(default_factory=lambda: MappingProxyType({}))
    topics: Mapping[str, TopicInfo] = field(default_factory=lambda: MappingProxyType({}))
    controller_id: int = -1
    cluster_id: str | None = None
    version: int = 0  # bumps on every published change

    def leader_for(self, topic: str, partition: int) -> int | None:
        """Node id leading the partition, or None when unknown or leaderless."""
        info = self.topics.get(topic)
        if info is None:
            return None
        part = info.partitions.get(partition)
        if part is None or part.leader < 0:
            return None
        return part.leader

    def partition(self, topic: str, partition: int) -> PartitionInfo | None:
        info = self.topics.get(topic)
        return None if info is None else info.partitions.get(partition)

    def partitions_for(self, topic: str) -> tuple[int, ...]:
        info = self.topics.get(topic)
        return () if info is None else tuple(sorted(info.partitions))

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        for info in self.topics.values():
            if info.topic_id == topic_id:
                return info.name
        return None


def usable_broker(broker: BrokerInfo) -> bool:
    """A broker entry a client could connect to (answers are untrusted input)."""
    return bool(broker.host) and 0 < broker.port < 65536 and broker.node_id >= 0


def merge_topic(old: TopicInfo | None, new: TopicInfo) -> TopicInfo:
    """Combine a fresh answer with what we had, never regressing a leader epoch."""
    if old is None or old.topic_id != new.topic_id or new.topic_id == ZERO_UUID:
        return new
    merged: dict[int, PartitionInfo] = {}
    for index, part in new.partitions.items():
        prev = old.partitions.get(index)
        if prev is not None and part.leader_epoch < prev.leader_epoch:
            merged[index] = prev
        else:
            merged[index] = part
    return replace(new, partitions=_frozen(merged))


def apply_metadata(
    old: ClusterSnapshot,
    brokers: Iterable[BrokerInfo],
    topics: Iterable[TopicInfo],
    *,
    missing: Iterable[str] = (),
    controller_id: int,
    cluster_id: str | None,
    full: bool,
) -> ClusterSnapshot:
    """A new snapshot from a Metadata answer.

    ``full``: the answer covers every topic, so topics absent from it are gone.
    ``missing``: topics the broker said do not exist; they are dropped.
    """
    new_topics: dict[str, TopicInfo] = {} if full else dict(old.topics)
    for topic in topics:
        new_topics[topic.name] = merge_topic(old.topics.get(topic.name), topic)
    for name in missing:
        new_topics.pop(name, None)
    return ClusterSnapshot(
        brokers=MappingProxyType({b.node_id: b for b in brokers}),
        topics=MappingProxyType(new_topics),
        controller_id=controller_id,
        cluster_id=cluster_id,
        version=old.version + 1,
    )


def apply_leader_hint(
    old: ClusterSnapshot,
    topic: str,
    partition: int,
    leader: int,
    leader_epoch: int,
    endpoints: Iterable[BrokerInfo] = (),
) -> ClusterSnapshot | None:
    """KIP-951: a Produce/Fetch answer named the new leader; apply it if newer.

    Returns None when the hint changes nothing (unknown topic, older epoch).
    """
    info = old.topics.get(topic)
    part = None if info is None else info.partitions.get(partition)
    if info is None or part is None or leader < 0 or leader_epoch <= part.leader_epoch:
        return None
    brokers = dict(old.brokers)
    for endpoint in endpoints:
        if usable_broker(endpoint):  # an answer's endpoints are as untrusted as Metadata
            brokers[endpoint.node_id] = endpoint
    if leader not in brokers:
        return None  # a leader nobody can reach: wait for Metadata instead
    parts = dict(info.partitions)
    parts[partition] = replace(part, leader=leader, leader_epoch=leader_epoch, error_code=0)
    topics = dict(old.topics)
    topics[topic] = replace(info, partitions=_frozen(parts))
    return replace(
        old,
        topics=MappingProxyType(topics),
        brokers=MappingProxyType(brokers),
        version=old.version + 1,
    )
