"""The ``Assignor`` interface: how the group leader splits partitions among members."""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import ClassVar

from aiokproto.consumer.group.protocol import Assignment, Subscription
from aiokproto.structs import TopicPartition


class RebalanceProtocol(enum.IntEnum):
    """EAGER revokes everything before each rebalance; COOPERATIVE (KIP-429) only what moves."""

    EAGER = 0
    COOPERATIVE = 1


@dataclass(frozen=True, slots=True)
class GroupMember:
    """One member as the leader sees it in the JoinGroup answer."""

    member_id: str
    group_instance_id: str | None
    subscription: Subscription

    def sort_key(self) -> tuple[int, str, str]:
        """Static members first by instance id, then dynamic ones by member id.

        Static members keep their instance id across restarts, so ordering by it keeps
        range/round-robin assignments stable when such a member comes back.
        """
        if self.group_instance_id is not None:
            return (0, self.group_instance_id, self.member_id)
        return (1, "", self.member_id)


class Assignor(ABC):
    """A partition assignment strategy; subclass to plug in your own.

    ``name`` is what members vote on in JoinGroup (every member of a group must offer
    the chosen name). Only the leader's ``assign`` runs; every member gets
    ``on_assignment`` with its own share after each rebalance.
    """

    name: ClassVar[str]
    supported_protocols: ClassVar[tuple[RebalanceProtocol, ...]] = (RebalanceProtocol.EAGER,)

    def subscription_user_data(self, topics: frozenset[str]) -> bytes | None:
        """Bytes sent to the leader with this member's subscription."""
        return None

    @abstractmethod
    def assign(
        self, partitions_per_topic: Mapping[str, int], members: Mapping[str, GroupMember]
    ) -> dict[str, Assignment]:
        """Map member id -> assignment. Topics missing from ``partitions_per_topic``
        do not exist (yet); members left out get nothing."""

    def on_assignment(self, assignment: Assignment, generation_id: int) -> None:  # noqa: B027
        """This member's share of a completed rebalance (for stateful assignors)."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


def subscribers_by_topic(
    partitions_per_topic: Mapping[str, int], members: Mapping[str, GroupMember]
) -> dict[str, list[GroupMember]]:
    """Existing topics -> their subscribed members in assignment order."""
    out: dict[str, list[GroupMember]] = {}
    for member in members.values():
        for topic in set(member.subscription.topics):
            if partitions_per_topic.get(topic, 0) > 0:
                out.setdefault(topic, []).append(member)
    for subscribed in out.values():
        subscribed.sort(key=GroupMember.sort_key)
    return out


def to_assignments(
    members: Iterable[str], chosen: Mapping[str, Iterable[TopicPartition]]
) -> dict[str, Assignment]:
    """Every member's sorted share (empty for those given nothing)."""
    return {m: Assignment(tuple(sorted(chosen.get(m, ())))) for m in members}
