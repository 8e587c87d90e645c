"""The round-robin assignor: all partitions dealt in turn to the members."""

from __future__ import annotations

from collections.abc import Mapping

from aiokproto.consumer.group.assignors.base import (
    Assignor,
    GroupMember,
    subscribers_by_topic,
    to_assignments,
)
from aiokproto.consumer.group.protocol import Assignment
from aiokproto.structs import TopicPartition


class RoundRobinAssignor(Assignor):
    """Partitions in (topic, partition) order go to members in a circle, skipping
    members not subscribed to the partition's topic."""

    name = "roundrobin"

    def assign(
        self, partitions_per_topic: Mapping[str, int], members: Mapping[str, GroupMember]
    ) -> dict[str, Assignment]:
        by_topic = subscribers_by_topic(partitions_per_topic, members)
        ring = sorted(
            {m.member_id: m for subscribed in by_topic.values() for m in subscribed}.values(),
            key=GroupMember.sort_key,
        )
        chosen: dict[str, list[TopicPartition]] = {}
        cursor = 0
        for topic in sorted(by_topic):
            wanted = {m.member_id for m in by_topic[topic]}
            for partition in range(partitions_per_topic[topic]):
                # Someone in the ring wants this topic, so this stops within one lap.
                while ring[cursor % len(ring)].member_id not in wanted:
                    cursor += 1
                chosen.setdefault(ring[cursor % len(ring)].member_id, []).append(
                    TopicPartition(topic, partition)
                )
                cursor += 1
        return to_assignments(members, chosen)


#: aiokafka's name for the same assignor (its class can be passed as in aiokafka).
RoundRobinPartitionAssignor = RoundRobinAssignor
