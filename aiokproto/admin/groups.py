"""Admin consumer group methods: list, describe, delete groups and their offsets."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable, Hashable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Protocol, TypeVar

from aiokproto.admin import codecs
from aiokproto.admin._batch import no_result
from aiokproto.admin.base import (
    _TOPIC_GONE,
    MISSING_AFTER,
    AdminBase,
    Outcome,
    _error,
    _leader_epoch,
    _operations,
    _wire_epoch,
)
from aiokproto.admin.types import (
    ConsumerGroupDescription,
    ConsumerGroupListing,
    MemberDescription,
    OffsetAndMetadata,
    TopicPartition,
)
from aiokproto.cluster.coordinators import GROUP
from aiokproto.cluster.snapshot import ZERO_UUID, BrokerInfo
from aiokproto.errors import (
    GroupIdNotFoundError,
    KafkaConfigError,
    KafkaConnectionError,
    KafkaError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
)
from aiokproto.protocol.base import Request

if TYPE_CHECKING:
    _DescribedGroup = codecs.consumer_group_describe.ConsumerGroupDescribeResponseDescribedGroup
    _DescribedMember = codecs.consumer_group_describe.ConsumerGroupDescribeResponseMember
    _AssignedTopic = codecs.consumer_group_describe.ConsumerGroupDescribeResponseTopicPartitions
    _ListedGroup = codecs.list_groups.ListGroupsResponseListedGroup

# Consumer groups are those with the consumer protocol type, or "" (simple groups
# that only commit offsets); share and streams groups are listed by other APIs.
_CONSUMER_PROTOCOL_TYPES = ("consumer", "")

# ConsumerGroupDescribe's answers for a group DescribeGroups must describe: a classic
# group, or a broker whose new group protocol is off (3.9 advertises the API and then
# answers UNSUPPORTED_VERSION for every group).
_NOT_A_CONSUMER_PROTOCOL_GROUP = (GroupIdNotFoundError.errno, UnsupportedVersionError.errno)

K = TypeVar("K", bound=Hashable)


class _TopicPartitions(Protocol):
    """An assignment entry of ConsumerGroupDescribe or ShareGroupDescribe (same shape)."""

    @property
    def topic_id(self) -> uuid.UUID: ...
    @property
    def topic_name(self) -> str: ...
    @property
    def partitions(self) -> list[int]: ...


class GroupsMixin(AdminBase):
    """Consumer groups, routed to each group's coordinator."""

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
        listed = await self._list_groups(
            "list_consumer_groups", states, types, self._timeout(timeout_ms)
        )
        return [
            ConsumerGroupListing(
                group_id=g.group_id,
                protocol_type=g.protocol_type,
                state=g.group_state if version >= 4 else None,
                type=g.group_type if version >= 5 else None,
                is_simple_consumer_group=g.protocol_type == "",
            )
            for version, g in listed
            if g.protocol_type in _CONSUMER_PROTOCOL_TYPES
        ]

    async def _list_groups(
        self,
        operation: str,
        states: Iterable[str] | None,
        types: Iterable[str] | None,
        timeout_ms: int,
    ) -> list[tuple[int, _ListedGroup]]:
        """Every broker's ListGroups entries (with the version that answered), one per
        group id, sorted by id."""
        state_filter = sorted(set(states)) if states is not None else []
        type_filter = sorted(set(types)) if types is not None else []
        LG = codecs.list_groups

        async def send(node: int, keys: list[int]) -> Outcome[int, list[tuple[int, _ListedGroup]]]:
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
            return {node: [(version, g) for g in response.groups]}

        async def attempt(nodes: list[int]) -> Outcome[int, list[tuple[int, _ListedGroup]]]:
            return await self._per_node({n: [n] for n in nodes}, send)

        per_broker = await self._batch(operation, await self._brokers(), attempt, timeout_ms)
        listings: dict[str, tuple[int, _ListedGroup]] = {}
        for found in per_broker.values():
            for entry in found:
                listings.setdefault(entry[1].group_id, entry)
        return [listings[g] for g in sorted(listings)]

    async def describe_consumer_groups(
        self,
        group_ids: Iterable[str],
        *,
        include_authorized_operations: bool = False,
        timeout_ms: int | None = None,
    ) -> dict[str, ConsumerGroupDescription]:
        """Members, assignments and state of groups, asked of each group's coordinator.

        ConsumerGroupDescribe (KIP-848) describes groups of the consumer protocol; a
        classic group (that API says GROUP_ID_NOT_FOUND) or a broker without the API
        is asked with DescribeGroups instead, as the Java admin does.
        """
        ops = include_authorized_operations

        async def send(node: int, groups: list[str]) -> Outcome[str, ConsumerGroupDescription]:
            out, classic = await self._describe_consumer_protocol(node, groups, ops)
            if classic:
                out.update(await self._describe_classic(node, classic, ops))
            return out

        return await self._group_batch(
            "describe_consumer_groups", group_ids, send, self._timeout(timeout_ms)
        )

    async def _describe_consumer_protocol(
        self, node: int, groups: list[str], ops: bool
    ) -> tuple[Outcome[str, ConsumerGroupDescription], list[str]]:
        """ConsumerGroupDescribe; also returns the groups DescribeGroups must answer."""
        CGD = codecs.consumer_group_describe
        conn = await self.cluster.connection(node)
        try:
            version = conn.version_for(CGD.ConsumerGroupDescribeRequest)
        except UnsupportedVersionError:
            return {}, groups
        request = CGD.ConsumerGroupDescribeRequest(
            group_ids=groups, include_authorized_operations=ops
        )
        response = await conn.send(request, version)
        names = await self._names_of_unnamed_topics(_assigned_topics(response.groups))
        coordinator = self._broker_info(node)
        asked = set(groups)
        out: Outcome[str, ConsumerGroupDescription] = {}
        classic: list[str] = []
        for g in response.groups:
            if g.group_id not in asked:
                continue
            if g.error_code in _NOT_A_CONSUMER_PROTOCOL_GROUP:
                classic.append(g.group_id)
            elif g.error_code:
                out[g.group_id] = self._group_error(g.group_id, g.error_code, g.error_message)
            else:
                out[g.group_id] = _consumer_protocol_group(g, coordinator, ops, names)
        return out, classic

    async def _names_of_unnamed_topics(
        self, topics: Iterable[_TopicPartitions]
    ) -> dict[uuid.UUID, str]:
        """Topic names by id, for an assignment entry without a name. Kafka names
        every topic it reports, so the Metadata request is normally skipped."""
        if all(t.topic_name for t in topics):
            return {}
        return (await self._topic_ids())[1]

    async def _describe_classic(
        self, node: int, groups: list[str], ops: bool
    ) -> Outcome[str, ConsumerGroupDescription]:
        DG = codecs.describe_groups

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
            else:
                out[g.group_id] = _classic_group(g, coordinator, ops)
        return out

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
        return await self._delete_groups(
            "delete_consumer_groups", group_ids, self._timeout(timeout_ms)
        )

    async def _delete_groups(
        self, operation: str, group_ids: Iterable[str], timeout_ms: int
    ) -> dict[str, None]:
        """DeleteGroups, which deletes a group of any type (the broker does not check)."""
        DG = codecs.delete_groups

        async def send(node: int, groups: list[str]) -> Outcome[str, None]:
            _, response = await self._send(
                node, DG.DeleteGroupsRequest, lambda v: DG.DeleteGroupsRequest(groups_names=groups)
            )
            # v3+ (Kafka 4.4) says why in error_message; older answers leave it None
            return {
                r.group_id: (
                    self._group_error(r.group_id, r.error_code, r.error_message)
                    if r.error_code
                    else None
                )
                for r in response.results
            }

        return await self._group_batch(operation, group_ids, send, timeout_ms)

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
        OF = codecs.offset_fetch

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
                group = next((g for g in response.groups if g.group_id == group_id), None)
                if group is None:  # an answer about other groups, or none at all
                    raise no_result(f"group {group_id!r}")
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
        OC = codecs.offset_commit

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
        keys: list[K],
        send: Callable[[int, list[K]], Awaitable[Outcome[K, None]]],
        timeout_ms: int,
    ) -> dict[K, None]:
        """Results keyed by partition (or topic) from one group's coordinator; an unknown
        topic is final once seen ``MISSING_AFTER`` times in a row."""
        if not isinstance(group_id, str) or not group_id:
            raise KafkaConfigError(f"{operation}: group id must be a non-empty string")

        async def attempt(pending: list[K]) -> Outcome[K, None]:
            try:
                node = (await self.cluster.coordinators.find(GROUP, group_id)).node_id
                return await send(node, pending)
            except KafkaConnectionError:
                self.cluster.coordinators.invalidate(GROUP, group_id)
                raise

        return await self._batch(
            operation, keys, attempt, timeout_ms, final=_TOPIC_GONE, final_after=MISSING_AFTER
        )

    async def delete_consumer_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition],
        *,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, None]:
        """Forget a group's committed offsets for partitions it no longer consumes."""
        OD = codecs.offset_delete

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


def _assignment(data: bytes | memoryview | None) -> tuple[TopicPartition, ...]:
    """Decode a consumer member's assignment (int16 version + ConsumerProtocolAssignment)."""
    if not data or len(data) < 2:
        return ()
    raw = bytes(data)
    version = int.from_bytes(raw[:2], "big", signed=True)
    cls = codecs.consumer_protocol_assignment.ConsumerProtocolAssignment
    try:
        decoded = cls.decode_from(raw, 2, min(version, cls.MAX_VERSION))[0]
    except KafkaError:
        return ()  # a custom assignor's bytes: not ours to interpret
    return tuple(
        TopicPartition(t.topic, p) for t in decoded.assigned_partitions for p in t.partitions
    )


def _classic_group(
    g: codecs.describe_groups.DescribeGroupsResponseDescribedGroup,
    coordinator: BrokerInfo,
    ops: bool,
) -> ConsumerGroupDescription:
    """A DescribeGroups answer: a classic group (or a simple one, protocol type "")."""
    consumer = g.protocol_type == "consumer"
    return ConsumerGroupDescription(
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


def _consumer_protocol_group(
    g: _DescribedGroup, coordinator: BrokerInfo, ops: bool, names: Mapping[uuid.UUID, str]
) -> ConsumerGroupDescription:
    """A ConsumerGroupDescribe answer: a group of the consumer protocol (KIP-848)."""
    return ConsumerGroupDescription(
        group_id=g.group_id,
        is_simple_consumer_group=False,
        members=tuple(_consumer_protocol_member(m, names) for m in g.members),
        partition_assignor=g.assignor_name,
        state=g.group_state,
        coordinator=coordinator,
        authorized_operations=_operations(g.authorized_operations, ops),
        type="consumer",
        group_epoch=g.group_epoch,
        assignment_epoch=g.assignment_epoch,
        server_assignor=g.assignor_name,
    )


def _consumer_protocol_member(
    m: _DescribedMember, names: Mapping[uuid.UUID, str]
) -> MemberDescription:
    return MemberDescription(
        member_id=m.member_id,
        group_instance_id=m.instance_id,
        client_id=m.client_id,
        host=m.client_host,
        assignment=_partitions(m.assignment.topic_partitions, names),
        member_epoch=m.member_epoch,
        rack=m.rack_id,
        subscribed_topic_names=tuple(m.subscribed_topic_names),
        subscribed_topic_regex=m.subscribed_topic_regex or None,  # Kafka sends "" for none
        target_assignment=_partitions(m.target_assignment.topic_partitions, names),
    )


def _partitions(
    topics: Iterable[_TopicPartitions], names: Mapping[uuid.UUID, str]
) -> tuple[TopicPartition, ...]:
    """Sorted partitions; a topic with neither a name nor a known id (deleted) is left out."""
    out: list[TopicPartition] = []
    for t in topics:
        name = t.topic_name or names.get(t.topic_id, "")
        if name:
            out.extend(TopicPartition(name, p) for p in t.partitions)
    return tuple(sorted(out))


def _assigned_topics(groups: Iterable[_DescribedGroup]) -> Iterator[_AssignedTopic]:
    for g in groups:
        for m in g.members:
            yield from m.assignment.topic_partitions
            yield from m.target_assignment.topic_partitions
