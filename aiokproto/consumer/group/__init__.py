"""Consumer groups: the classic protocol (assignors, the embedded consumer protocol, the
pure membership state machine and the coordinator task that drives it) and the
consumer protocol of KIP-848 (``ConsumerGroupDriver``)."""

from aiokproto.consumer.group.assignors import (
    Assignor,
    CooperativeStickyAssignor,
    GroupMember,
    RangeAssignor,
    RebalanceProtocol,
    RoundRobinAssignor,
    StickyAssignor,
)
from aiokproto.consumer.group.classic_driver import ClassicGroupDriver
from aiokproto.consumer.group.consumer_driver import ConsumerGroupDriver
from aiokproto.consumer.group.group_config import GROUP_OPTIONS, GroupConfig
from aiokproto.consumer.group.protocol import Assignment, Subscription
from aiokproto.errors import CommitFailedError

__all__ = [
    "GROUP_OPTIONS",
    "Assignment",
    "Assignor",
    "ClassicGroupDriver",
    "CommitFailedError",
    "ConsumerGroupDriver",
    "CooperativeStickyAssignor",
    "GroupConfig",
    "GroupMember",
    "RangeAssignor",
    "RebalanceProtocol",
    "RoundRobinAssignor",
    "StickyAssignor",
    "Subscription",
]
