"""Partition assignors, chosen by ``partition_assignment_strategy``: names, ``Assignor``
objects or classes, or aiokafka's built-in assignor classes. ``base.py`` has the
``Assignor`` ABC; range, roundrobin, sticky / cooperative-sticky (``balance.py`` is the
pure algorithm)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from aiokproto.consumer.group.assignors.base import Assignor, GroupMember, RebalanceProtocol
from aiokproto.consumer.group.assignors.range import RangeAssignor, RangePartitionAssignor
from aiokproto.consumer.group.assignors.roundrobin import (
    RoundRobinAssignor,
    RoundRobinPartitionAssignor,
)
from aiokproto.consumer.group.assignors.sticky import (
    CooperativeStickyAssignor,
    StickyAssignor,
    StickyPartitionAssignor,
)
from aiokproto.errors import KafkaConfigError

__all__ = [
    "AIOKAFKA_ASSIGNORS",
    "ASSIGNORS",
    "Assignor",
    "CooperativeStickyAssignor",
    "GroupMember",
    "RangeAssignor",
    "RangePartitionAssignor",
    "RebalanceProtocol",
    "RoundRobinAssignor",
    "RoundRobinPartitionAssignor",
    "StickyAssignor",
    "StickyPartitionAssignor",
    "aiokafka_assignor_name",
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


#: aiokafka's built-in assignor classes by name -> ours. They speak the same protocol
#: (same names, Java's sticky user data), so members of both clients can share a group.
AIOKAFKA_ASSIGNORS: dict[str, str] = {
    "RangePartitionAssignor": RangeAssignor.name,
    "RoundRobinPartitionAssignor": RoundRobinAssignor.name,
    "StickyPartitionAssignor": StickyAssignor.name,
}


def aiokafka_assignor_name(item: object) -> str | None:
    """Our name for one of aiokafka's built-in assignors (class or instance), else None.

    Recognised by module and class name, so aiokafka is never imported. A class of
    aiokafka's assignor API that is not a built-in one (a subclass, a custom assignor)
    cannot run here: ``KafkaConfigError``.
    """
    cls = item if isinstance(item, type) else type(item)
    if not any(k.__module__.partition(".")[0] == "aiokafka" for k in cls.__mro__):
        return None
    if cls.__module__.startswith("aiokafka.coordinator.assignors."):
        name = AIOKAFKA_ASSIGNORS.get(cls.__qualname__)
        if name is not None:
            return name
    raise KafkaConfigError(
        f"{cls.__qualname__} is an aiokafka assignor other than its built-in ones "
        f"({', '.join(AIOKAFKA_ASSIGNORS)}); aiokproto cannot run it: subclass "
        "aiokproto.consumer.group.assignors.Assignor instead"
    )


def resolve_assignors(strategy: Iterable[object]) -> tuple[Assignor, ...]:
    """Assignor objects in preference order; names, ``Assignor`` classes and aiokafka's
    built-in classes make fresh instances."""
    out: list[Assignor] = []
    for entry in strategy:
        item = aiokafka_assignor_name(entry) or entry
        if isinstance(item, type) and issubclass(item, Assignor):
            cls = item
            try:
                item = cls()
            except TypeError as exc:
                raise KafkaConfigError(
                    f"assignor class {cls.__name__} cannot be created without arguments "
                    f"({exc}); pass an instance"
                ) from None
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
                "partition_assignment_strategy entries must be names, Assignor objects or "
                f"classes, or aiokafka's built-in assignor classes; got {item!r}"
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
