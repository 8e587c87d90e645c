"""Admin share group methods (KIP-932): list, describe, delete groups; describe, alter
and delete their start offsets.

Share groups live on the same group coordinators as consumer groups, so the routing,
retries and ListGroups/DeleteGroups plumbing are ``GroupsMixin``'s.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from aiokproto.admin import codecs
from aiokproto.admin.base import Outcome, _error, _leader_epoch, _operations
from aiokproto.admin.groups import GroupsMixin, _partitions
from aiokproto.admin.types import (
    ShareGroupDescription,
    ShareGroupListing,
    ShareMemberDescription,
    SharePartitionOffset,
    TopicPartition,
)
from aiokproto.errors import KafkaConfigError, KafkaError
from aiokproto.protocol.base import Request

if TYPE_CHECKING:
    _OffsetsGroup = codecs.describe_share_group_offsets.DescribeShareGroupOffsetsResponseGroup

_SHARE = "share"  # ListGroups' group type and protocol type of share groups


class ShareGroupsMixin(GroupsMixin):
    """Share groups, routed to each group's coordinator."""

    async def list_share_groups(
        self, *, states: Iterable[str] | None = None, timeout_ms: int | None = None
    ) -> list[ShareGroupListing]:
        """Share groups known to any broker, sorted by id.

        ``list_consumer_groups`` leaves share groups out (they are not consumer
        groups); this asks ListGroups (v5+) for type "share" only.
        """
        listed = await self._list_groups(
            "list_share_groups", states, [_SHARE], self._timeout(timeout_ms)
        )
        return [ShareGroupListing(g.group_id, g.group_state) for _, g in listed]

    async def describe_share_groups(
        self,
        group_ids: Iterable[str],
        *,
        include_authorized_operations: bool = False,
        timeout_ms: int | None = None,
    ) -> dict[str, ShareGroupDescription]:
        """State, epochs and members of share groups (ShareGroupDescribe).

        A group that does not exist, or is not a share group, fails with
        ``GroupIdNotFoundError``.
        """
        ops = include_authorized_operations
        SGD = codecs.share_group_describe

        async def send(node: int, groups: list[str]) -> Outcome[str, ShareGroupDescription]:
            _, response = await self._send(
                node,
                SGD.ShareGroupDescribeRequest,
                lambda v: SGD.ShareGroupDescribeRequest(
                    group_ids=groups, include_authorized_operations=ops
                ),
            )
            names = await self._names_of_unnamed_topics(
                t for g in response.groups for m in g.members for t in m.assignment.topic_partitions
            )
            coordinator = self._broker_info(node)
            out: Outcome[str, ShareGroupDescription] = {}
            for g in response.groups:
                if g.error_code:
                    out[g.group_id] = self._group_error(g.group_id, g.error_code, g.error_message)
                else:
                    out[g.group_id] = ShareGroupDescription(
                        group_id=g.group_id,
                        state=g.group_state,
                        group_epoch=g.group_epoch,
                        assignment_epoch=g.assignment_epoch,
                        assignor=g.assignor_name,
                        members=tuple(_member(m, names) for m in g.members),
                        coordinator=coordinator,
                        authorized_operations=_operations(g.authorized_operations, ops),
                    )
            return out

        return await self._group_batch(
            "describe_share_groups", group_ids, send, self._timeout(timeout_ms)
        )

    async def describe_share_group_offsets(
        self,
        groups: Mapping[str, Iterable[TopicPartition] | None],
        *,
        timeout_ms: int | None = None,
    ) -> dict[str, dict[TopicPartition, SharePartitionOffset]]:
        """Start offsets of share groups: of the given partitions, or (None) of every
        partition the group has state for. Partitions without a start offset (never
        consumed by the group) are left out; a partition's error fails its group.

        The broker answers an unknown group id with no partitions, not an error (use
        ``describe_share_groups`` to tell). Kafka 4.3 answers a request naming a
        partition that does not exist only after its share-state reads give up, about
        30 s later, and the connection waits with it: name existing partitions.
        """
        wanted = {g: None if tps is None else sorted(set(tps)) for g, tps in groups.items()}
        DSGO = codecs.describe_share_group_offsets

        def topics_of(group: str) -> list[DSGO.DescribeShareGroupOffsetsRequestTopic] | None:
            tps = wanted[group]
            if tps is None:
                return None
            by_topic: dict[str, list[int]] = defaultdict(list)
            for tp in tps:
                by_topic[tp.topic].append(tp.partition)
            return [
                DSGO.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=ps)
                for t, ps in by_topic.items()
            ]

        async def send(
            node: int, pending: list[str]
        ) -> Outcome[str, dict[TopicPartition, SharePartitionOffset]]:
            def build(version: int) -> Request:
                return DSGO.DescribeShareGroupOffsetsRequest(
                    groups=[
                        DSGO.DescribeShareGroupOffsetsRequestGroup(group_id=g, topics=topics_of(g))
                        for g in pending
                    ]
                )

            version, response = await self._send(node, DSGO.DescribeShareGroupOffsetsRequest, build)
            names: dict[uuid.UUID, str] = {}
            if any(not t.topic_name for g in response.groups for t in g.topics):
                names = (await self._topic_ids())[1]
            return {g.group_id: self._share_offsets(g, version, names) for g in response.groups}

        return await self._group_batch(
            "describe_share_group_offsets", wanted, send, self._timeout(timeout_ms)
        )

    def _share_offsets(
        self, g: _OffsetsGroup, version: int, names: Mapping[uuid.UUID, str]
    ) -> dict[TopicPartition, SharePartitionOffset] | KafkaError:
        if g.error_code:
            return self._group_error(g.group_id, g.error_code, g.error_message)
        out: dict[TopicPartition, SharePartitionOffset] = {}
        for t in g.topics:
            name = t.topic_name or names.get(t.topic_id, "")
            for p in t.partitions:
                if p.error_code:
                    return _error(p.error_code, p.error_message, f"{name}-{p.partition_index}")
                if p.start_offset < 0 or not name:
                    continue
                out[TopicPartition(name, p.partition_index)] = SharePartitionOffset(
                    start_offset=p.start_offset,
                    leader_epoch=_leader_epoch(p.leader_epoch),
                    # v0 has no lag; -1 is "not known"
                    lag=p.lag if version >= 1 and p.lag >= 0 else None,
                )
        return out

    async def alter_share_group_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, int],
        *,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, None]:
        """Set a share group's start offsets (AlterShareGroupOffsets).

        The group must have no members: otherwise every partition fails with the
        broker's error (``NonEmptyGroupError``). A group id never used creates an
        empty share group.
        """
        starts = dict(offsets)
        for tp, o in starts.items():
            if not isinstance(tp, tuple) or isinstance(o, bool) or not isinstance(o, int) or o < 0:
                raise KafkaConfigError(f"alter_share_group_offsets: bad entry {tp!r}: {o!r}")
        ASGO = codecs.alter_share_group_offsets

        async def send(node: int, pending: list[TopicPartition]) -> Outcome[TopicPartition, None]:
            by_topic: dict[str, list[TopicPartition]] = defaultdict(list)
            for tp in pending:
                by_topic[tp.topic].append(tp)

            def build(version: int) -> Request:
                return ASGO.AlterShareGroupOffsetsRequest(
                    group_id=group_id,
                    topics=[
                        ASGO.AlterShareGroupOffsetsRequestTopic(
                            topic_name=t,
                            partitions=[
                                ASGO.AlterShareGroupOffsetsRequestPartition(
                                    partition_index=tp.partition, start_offset=starts[tp]
                                )
                                for tp in tps
                            ],
                        )
                        for t, tps in by_topic.items()
                    ],
                )

            _, response = await self._send(node, ASGO.AlterShareGroupOffsetsRequest, build)
            if response.error_code:
                error = self._group_error(group_id, response.error_code, response.error_message)
                return dict.fromkeys(pending, error)
            return {
                TopicPartition(t.topic_name, p.partition_index): (
                    self._group_error(group_id, p.error_code, p.error_message)
                    if p.error_code
                    else None
                )
                for t in response.responses
                for p in t.partitions
            }

        # Kafka 4.3 may answer UNKNOWN_TOPIC_OR_PARTITION for a topic created a moment
        # ago (its share-state initialization; seen in CI).
        return await self._group_partitions_batch(
            "alter_share_group_offsets",
            group_id,
            list(starts),
            send,
            self._timeout(timeout_ms),
        )

    async def delete_share_group_offsets(
        self, group_id: str, topics: Iterable[str], *, timeout_ms: int | None = None
    ) -> dict[str, None]:
        """Forget a share group's state for whole topics (DeleteShareGroupOffsets): the
        next member to consume one starts again from ``share.auto.offset.reset``.
        Share group state is per topic here, not per partition. The group must have
        no members (``NonEmptyGroupError``).
        """
        names = list(dict.fromkeys(topics))
        for name in names:
            if not isinstance(name, str) or not name:
                raise KafkaConfigError(f"delete_share_group_offsets: bad topic {name!r}")
        DSGO = codecs.delete_share_group_offsets

        async def send(node: int, pending: list[str]) -> Outcome[str, None]:
            def build(version: int) -> Request:
                return DSGO.DeleteShareGroupOffsetsRequest(
                    group_id=group_id,
                    topics=[
                        DSGO.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in pending
                    ],
                )

            _, response = await self._send(node, DSGO.DeleteShareGroupOffsetsRequest, build)
            if response.error_code:
                error = self._group_error(group_id, response.error_code, response.error_message)
                return dict.fromkeys(pending, error)
            return {
                t.topic_name: (
                    self._group_error(group_id, t.error_code, t.error_message)
                    if t.error_code
                    else None
                )
                for t in response.responses
            }

        return await self._group_partitions_batch(
            "delete_share_group_offsets", group_id, names, send, self._timeout(timeout_ms)
        )

    async def delete_share_groups(
        self, group_ids: Iterable[str], *, timeout_ms: int | None = None
    ) -> dict[str, None]:
        """Delete empty share groups and their state (DeleteGroups).

        DeleteGroups serves every group type and the broker does not check it, so a
        consumer group with one of these ids would be deleted too. A group with members
        fails with ``NonEmptyGroupError``, an unknown one with ``GroupIdNotFoundError``.
        """
        return await self._delete_groups(
            "delete_share_groups", group_ids, self._timeout(timeout_ms)
        )


def _member(
    m: codecs.share_group_describe.ShareGroupDescribeResponseMember, names: Mapping[uuid.UUID, str]
) -> ShareMemberDescription:
    return ShareMemberDescription(
        member_id=m.member_id,
        client_id=m.client_id,
        host=m.client_host,
        rack=m.rack_id,
        member_epoch=m.member_epoch,
        subscribed_topic_names=tuple(m.subscribed_topic_names),
        assignment=_partitions(m.assignment.topic_partitions, names),
    )
