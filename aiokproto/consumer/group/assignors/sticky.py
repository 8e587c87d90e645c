"""The sticky and cooperative-sticky assignors and their user data.

``sticky`` (eager) cannot use ``owned_partitions`` (an eager member has revoked
everything before it joins), so, like Java's StickyAssignor, each member sends its
previous assignment and generation in the subscription user data:

    StickyAssignorUserData v0: [topic: string, partitions: [int32]]
    StickyAssignorUserData v1: v0 + generation: int32

(old-style types: int16-length strings, int32-count arrays, no version prefix; a
reader tries v1 and falls back to v0 when the generation is missing).

``cooperative-sticky`` takes owned partitions and generation from the subscription
(v2+) and also puts the generation in user data (an int32) for members that read only
v0/v1 subscriptions.
"""

from __future__ import annotations

import struct
from abc import abstractmethod
from collections.abc import Mapping

from aiokproto.consumer.group.assignors.balance import resolve_claims, sticky_balance
from aiokproto.consumer.group.assignors.base import (
    Assignor,
    GroupMember,
    RebalanceProtocol,
    to_assignments,
)
from aiokproto.consumer.group.protocol import Assignment, group_by_topic
from aiokproto.errors import KafkaProtocolError
from aiokproto.structs import TopicPartition

NO_GENERATION = -1

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def encode_sticky_user_data(partitions: frozenset[TopicPartition], generation: int) -> bytes:
    """StickyAssignorUserData v1."""
    out = bytearray()
    grouped = group_by_topic(partitions)
    out += _I32.pack(len(grouped))
    for topic, ps in grouped:
        raw = topic.encode()
        out += _I16.pack(len(raw)) + raw + _I32.pack(len(ps))
        for p in ps:
            out += _I32.pack(p)
    out += _I32.pack(generation)
    return bytes(out)


def decode_sticky_user_data(data: bytes) -> tuple[frozenset[TopicPartition], int]:
    """(previous assignment, generation or NO_GENERATION for v0)."""
    view = memoryview(data)
    pos = 0

    def take(fmt: struct.Struct) -> int:
        nonlocal pos
        if pos + fmt.size > len(view):
            raise KafkaProtocolError("StickyAssignorUserData is cut short")
        (value,) = fmt.unpack_from(view, pos)
        pos += fmt.size
        return int(value)

    out: set[TopicPartition] = set()
    topics = take(_I32)
    if topics < 0 or topics > len(view):
        raise KafkaProtocolError(f"StickyAssignorUserData: bad topic count {topics}")
    for _ in range(topics):
        size = take(_I16)
        if size < 0 or pos + size > len(view):
            raise KafkaProtocolError("StickyAssignorUserData: bad topic name length")
        topic = bytes(view[pos : pos + size]).decode("utf-8", errors="replace")
        pos += size
        count = take(_I32)
        if count < 0 or pos + 4 * count > len(view):
            raise KafkaProtocolError("StickyAssignorUserData: bad partition count")
        for _ in range(count):
            out.add(TopicPartition(topic, take(_I32)))
    generation = take(_I32) if pos + 4 <= len(view) else NO_GENERATION
    return frozenset(out), generation


class _StickyBase(Assignor):
    def __init__(self) -> None:
        self._generation = NO_GENERATION
        self._previous: frozenset[TopicPartition] | None = None

    def on_assignment(self, assignment: Assignment, generation_id: int) -> None:
        self._previous = frozenset(assignment.partitions)
        self._generation = generation_id

    @abstractmethod
    def _claim(self, member: GroupMember) -> tuple[frozenset[TopicPartition], int]:
        """(partitions the member says it owned, the generation it owned them in)."""

    def assign(
        self, partitions_per_topic: Mapping[str, int], members: Mapping[str, GroupMember]
    ) -> dict[str, Assignment]:
        topics_of = {m: frozenset(g.subscription.topics) for m, g in members.items()}
        claims = {m: self._claim(g) for m, g in members.items()}
        owners = resolve_claims(partitions_per_topic, topics_of, claims)
        return to_assignments(members, sticky_balance(partitions_per_topic, topics_of, owners))


class StickyAssignor(_StickyBase):
    """Balanced, and keeps as many previous assignments as balance allows (eager)."""

    name = "sticky"

    def subscription_user_data(self, topics: frozenset[str]) -> bytes | None:
        if self._previous is None:
            return None
        return encode_sticky_user_data(self._previous, self._generation)

    def _claim(self, member: GroupMember) -> tuple[frozenset[TopicPartition], int]:
        data = member.subscription.user_data
        if not data:
            return frozenset(), NO_GENERATION
        try:
            return decode_sticky_user_data(data)
        except KafkaProtocolError:
            # A member we cannot read loses its stickiness, not the whole group.
            return frozenset(), NO_GENERATION


class CooperativeStickyAssignor(_StickyBase):
    """The sticky balance for incremental cooperative rebalancing (KIP-429).

    The leader removes partitions that change owner from the new owner's share
    (see ``leader.cooperative_adjust``); their old owner revokes them and rejoins, and
    the next rebalance hands them out.
    """

    name = "cooperative-sticky"
    supported_protocols = (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER)

    def subscription_user_data(self, topics: frozenset[str]) -> bytes | None:
        return _I32.pack(self._generation)

    def _claim(self, member: GroupMember) -> tuple[frozenset[TopicPartition], int]:
        sub = member.subscription
        generation = sub.generation_id
        if generation < 0 and sub.user_data is not None and len(sub.user_data) >= 4:
            generation = _I32.unpack_from(sub.user_data, 0)[0]
        return frozenset(sub.owned_partitions), generation


#: aiokafka's name for the same assignor (its class can be passed as in aiokafka).
StickyPartitionAssignor = StickyAssignor
