"""The range assignor: each topic's partitions split into contiguous runs, per topic."""

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


class RangeAssignor(Assignor):
    """Per topic: members in order, the first ``count % members`` get one extra.

    Members subscribed to the same topics get the same partition numbers of every
    topic, which is what co-partitioned joins want.
    """

    name = "range"

    def assign(
        self, partitions_per_topic: Mapping[str, int], members: Mapping[str, GroupMember]
    ) -> dict[str, Assignment]:
        chosen: dict[str, list[TopicPartition]] = {}
        for topic, subscribed in sorted(
            subscribers_by_topic(partitions_per_topic, members).items()
        ):
            count = partitions_per_topic[topic]
            share, extra = divmod(count, len(subscribed))
            start = 0
            for i, member in enumerate(subscribed):
                n = share + (1 if i < extra else 0)
                chosen.setdefault(member.member_id, []).extend(
                    TopicPartition(topic, p) for p in range(start, start + n)
                )
                start += n
        return to_assignments(members, chosen)


#: aiokafka's name for the same assignor (its class can be passed as in aiokafka).
RangePartitionAssignor = RangeAssignor
