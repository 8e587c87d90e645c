"""The consumer embedded protocol: subscription and assignment bytes (ConsumerProtocol,
Java-compatible, v0-v3).

These are the opaque ``metadata`` of JoinGroup and ``assignment`` of SyncGroup, laid
out as Java's ConsumerProtocol does: an int16 version, then the
ConsumerProtocolSubscription / ConsumerProtocolAssignment body of that version. A
newer version than we know is read as the newest we know, ignoring the fields it
appended (every version only adds fields at the end), so newer clients in the same
group do not break us.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

from aiokproto.errors import KafkaProtocolError
from aiokproto.protocol.messages.consumer_protocol_assignment import (
    ConsumerProtocolAssignment,
    ConsumerProtocolAssignmentTopicPartition,
)
from aiokproto.protocol.messages.consumer_protocol_subscription import (
    ConsumerProtocolSubscription,
    ConsumerProtocolSubscriptionTopicPartition,
)
from aiokproto.structs import TopicPartition

PROTOCOL_TYPE = "consumer"
SUBSCRIPTION_VERSION = ConsumerProtocolSubscription.MAX_VERSION
ASSIGNMENT_VERSION = ConsumerProtocolAssignment.MAX_VERSION

_VERSION = struct.Struct(">h")


@dataclass(frozen=True, slots=True)
class Subscription:
    """What one member asks for (and, v1+, what it owns going into the rebalance)."""

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation_id: int = -1
    rack_id: str | None = None
    version: int = SUBSCRIPTION_VERSION


@dataclass(frozen=True, slots=True)
class Assignment:
    """What the leader hands one member."""

    partitions: tuple[TopicPartition, ...]
    user_data: bytes | None = None
    version: int = ASSIGNMENT_VERSION


def group_by_topic(partitions: Iterable[TopicPartition]) -> list[tuple[str, list[int]]]:
    """Partitions as (topic, sorted partition ids), topics sorted: the wire's grouping."""
    by_topic: dict[str, set[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, set()).add(tp.partition)
    return [(topic, sorted(ps)) for topic, ps in sorted(by_topic.items())]


def _version(data: bytes | bytearray | memoryview, what: str) -> int:
    if len(data) < 2:
        raise KafkaProtocolError(f"{what} is {len(data)} bytes; too short for its version")
    (version,) = _VERSION.unpack_from(data, 0)
    if version < 0:
        raise KafkaProtocolError(f"{what} has a negative version {version}")
    return int(version)


def encode_subscription(sub: Subscription, version: int = SUBSCRIPTION_VERSION) -> bytes:
    body = ConsumerProtocolSubscription(
        topics=list(sub.topics),
        user_data=sub.user_data,
        owned_partitions=[
            ConsumerProtocolSubscriptionTopicPartition(topic=t, partitions=ps)
            for t, ps in group_by_topic(sub.owned_partitions)
        ],
        generation_id=sub.generation_id,
        rack_id=sub.rack_id,
    )
    return _VERSION.pack(version) + body.encode(version)


def decode_subscription(data: bytes | bytearray | memoryview) -> Subscription:
    version = _version(data, "consumer subscription")
    read_as = min(version, ConsumerProtocolSubscription.MAX_VERSION)
    body, _ = ConsumerProtocolSubscription.decode_from(data, 2, read_as)
    return Subscription(
        topics=tuple(body.topics),
        user_data=body.user_data,
        owned_partitions=tuple(
            TopicPartition(t.topic, p) for t in body.owned_partitions for p in t.partitions
        ),
        generation_id=body.generation_id,
        rack_id=body.rack_id,
        version=version,
    )


def encode_assignment(assignment: Assignment, version: int = ASSIGNMENT_VERSION) -> bytes:
    body = ConsumerProtocolAssignment(
        assigned_partitions=[
            ConsumerProtocolAssignmentTopicPartition(topic=t, partitions=ps)
            for t, ps in group_by_topic(assignment.partitions)
        ],
        user_data=assignment.user_data,
    )
    return _VERSION.pack(version) + body.encode(version)


def decode_assignment(data: bytes | bytearray | memoryview) -> Assignment:
    """An assignment; empty bytes (the leader named nothing for us) is an empty one."""
    if len(data) == 0:
        return Assignment(())
    version = _version(data, "consumer assignment")
    read_as = min(version, ConsumerProtocolAssignment.MAX_VERSION)
    body, _ = ConsumerProtocolAssignment.decode_from(data, 2, read_as)
    for t in body.assigned_partitions:
        if not t.topic or any(p < 0 for p in t.partitions):
            raise KafkaProtocolError(
                f"the group's assignment names partition(s) {t.partitions} of topic "
                f"{t.topic!r}: not a valid assignment"
            )
    return Assignment(
        partitions=tuple(
            TopicPartition(t.topic, p) for t in body.assigned_partitions for p in t.partitions
        ),
        user_data=body.user_data,
        version=version,
    )
