"""What the group leader does between JoinGroup and SyncGroup (pure): decode the
members, run the assignor, validate, hold back partitions (cooperative), encode.

Decode every member's subscription, run the chosen assignor, make the result safe
for the rebalance protocol, and encode one assignment per member.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from aiokproto.consumer.group.assignors import Assignor, GroupMember, RebalanceProtocol
from aiokproto.consumer.group.protocol import (
    ASSIGNMENT_VERSION,
    Assignment,
    Subscription,
    decode_subscription,
    encode_assignment,
)
from aiokproto.errors import IllegalStateError, KafkaProtocolError
from aiokproto.structs import TopicPartition

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class JoinedMember:
    """A member as JoinGroup lists it to the leader: raw protocol metadata."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


def decode_members(members: Iterable[JoinedMember]) -> dict[str, GroupMember]:
    out: dict[str, GroupMember] = {}
    for m in members:
        try:
            sub = decode_subscription(m.metadata)
        except KafkaProtocolError as exc:
            # One unreadable member must not stall the whole group: it gets nothing.
            log.warning("member %s sent an unreadable subscription (%s)", m.member_id, exc)
            sub = Subscription(())
        out[m.member_id] = GroupMember(m.member_id, m.group_instance_id, sub)
    return out


def subscribed_topics(members: Mapping[str, GroupMember]) -> frozenset[str]:
    return frozenset(t for m in members.values() for t in m.subscription.topics)


def cooperative_adjust(
    assignments: Mapping[str, Assignment], members: Mapping[str, GroupMember]
) -> dict[str, Assignment]:
    """Hold back partitions that would change owner in this rebalance (KIP-429).

    A partition another member still owns is not given to anyone new now: its owner
    revokes it on seeing its assignment, rejoins, and the next rebalance places it.
    So no partition ever has two owners, whatever assignor ran.
    """
    claimed: dict[TopicPartition, set[str]] = {}
    for m in members.values():
        for tp in m.subscription.owned_partitions:
            claimed.setdefault(tp, set()).add(m.member_id)
    out: dict[str, Assignment] = {}
    for member_id, assignment in assignments.items():
        # Kept if this member owned it already, or nobody else claims it.
        keep = tuple(
            tp
            for tp in assignment.partitions
            if member_id in claimed.get(tp, ()) or not claimed.get(tp)
        )
        out[member_id] = Assignment(keep, assignment.user_data)
    return out


def validate_assignment(
    assignments: Mapping[str, Assignment],
    members: Mapping[str, GroupMember],
    partitions_per_topic: Mapping[str, int],
    assignor: str,
) -> None:
    """An assignor bug must not give one partition to two members."""
    seen: dict[TopicPartition, str] = {}
    for member_id, assignment in assignments.items():
        if member_id not in members:
            raise IllegalStateError(f"assignor {assignor!r} assigned to unknown member {member_id}")
        for tp in assignment.partitions:
            if not 0 <= tp.partition < partitions_per_topic.get(tp.topic, 0):
                raise IllegalStateError(
                    f"assignor {assignor!r} assigned {tp.topic}-{tp.partition}, "
                    "which does not exist"
                )
            other = seen.setdefault(tp, member_id)
            if other != member_id:
                raise IllegalStateError(
                    f"assignor {assignor!r} assigned {tp.topic}-{tp.partition} to both "
                    f"{other} and {member_id}"
                )


def perform_assignment(
    assignor: Assignor,
    protocol: RebalanceProtocol,
    partitions_per_topic: Mapping[str, int],
    members: Mapping[str, GroupMember],
) -> dict[str, bytes]:
    """Member id -> encoded ConsumerProtocolAssignment (every member gets one)."""
    raw = assignor.assign(partitions_per_topic, members)
    result = {m: raw.get(m, Assignment(())) for m in members}
    validate_assignment(result, members, partitions_per_topic, assignor.name)
    if protocol is RebalanceProtocol.COOPERATIVE:
        result = cooperative_adjust(result, members)
    # Answer each member in no newer a version than it spoke (every version is one layout).
    return {
        m: encode_assignment(a, min(ASSIGNMENT_VERSION, max(0, members[m].subscription.version)))
        for m, a in result.items()
    }
