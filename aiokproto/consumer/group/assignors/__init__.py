"""Partition assignors, chosen by ``partition_assignment_strategy`` (names or objects)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from aiokproto.consumer.group.assignors.base import Assignor, GroupMember, RebalanceProtocol
from aiokproto.consumer.group.assignors.range import RangeAssignor
from aiokproto.consumer.group.assignors.roundrobin import RoundRobinAssignor
from aiokproto.consumer.group.assignors.sticky import CooperativeStickyAssignor, StickyAssignor
from aiokproto.errors import KafkaConfigError

__all__ = [
    "ASSIGNORS",
    "Assignor",
    "CooperativeStickyAssignor",
    "GroupMember",
    "RangeAssignor",
    "RebalanceProtocol",
    "RoundRobinAssignor",
    "StickyAssignor",
    "rebalance_protocol",
    "resolve_assignors",
]

#: The built-in assignors by name (Java's short names; librdkafka uses the same).
ASSIGNORS: dict[str, Callable[[], Assignor]] = {
    RangeAssignor.name: RangeAssignor,
    RoundRobinAssignor.name: RoundRobinAssignor,
    StickyAssignor.name: StickyAssignor,
    CooperativeStickyAssignor.name: CooperativeStickyAssignor,
}


def resolve_assignors(strategy: Iterable[Assignor | str]) -> tuple[Assignor, ...]:
    """Assignor objects in preference order; names make fresh built-in instances."""
    out: list[Assignor] = []
    for item in strategy:
        if isinstance(item, str):
            factory = ASSIGNORS.get(item.strip().lower())
            if factory is None:
                raise KafkaConfigError(
                    f"unknown partition assignment strategy {item!r}; "
                    f"built-in ones are {', '.join(sorted(ASSIGNORS))}, "
                    "or pass an Assignor object"
                )
            out.append(factory())
        elif isinstance(item, Assignor):
            if not isinstance(getattr(item, "name", None), str) or not item.name:
                raise KafkaConfigError(f"assignor {item!r} has no name")
            if not item.supported_protocols:
                raise KafkaConfigError(f"assignor {item.name!r} supports no rebalance protocol")
            out.append(item)
        else:
            raise KafkaConfigError(
                f"partition_assignment_strategy entries must be names or Assignor objects, "
                f"got {item!r}"
            )
    if not out:
        raise KafkaConfigError("partition_assignment_strategy is empty")
    names = [a.name for a in out]
    if len(set(names)) != len(names):
        raise KafkaConfigError(f"partition_assignment_strategy names an assignor twice: {names}")
    return tuple(out)


def rebalance_protocol(assignors: Iterable[Assignor]) -> RebalanceProtocol:
    """The newest protocol every configured assignor supports (as Java picks it).

    A member must behave the same whichever of its assignors the group chooses, so
    ("range", "cooperative-sticky") is EAGER until "range" is dropped.
    """
    common = set(RebalanceProtocol)
    for assignor in assignors:
        common &= set(assignor.supported_protocols)
    if not common:
        raise KafkaConfigError(
            "the configured assignors share no rebalance protocol (EAGER or COOPERATIVE)"
        )
    return max(common)
