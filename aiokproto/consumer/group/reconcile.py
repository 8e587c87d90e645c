"""Assignment reconciliation for the consumer group protocol (KIP-848), sans-I/O:
``Reconciler`` keeps the target and current assignments (``LocalAssignment``, by topic
id, with a local epoch) and the owned one (by name); a ``Plan`` is revoke, then assign.

The broker hands a member its *target* assignment as topic ids and partition numbers;
the consumer owns partitions by topic *name*. ``Reconciler`` keeps both sides:

- ``target``: the last assignment the broker sent, with a local epoch that is bumped
  whenever its partitions change (so two targets with the same partitions received at
  different times are different targets, as in Java's ``LocalAssignment``);
- ``current``: the part of a target that was reconciled (callbacks done, assignment
  applied); it is what the next heartbeat acknowledges in ``TopicPartitions``;
- ``owned``: the partitions (by name) the consumer holds right now.

A reconciliation resolves the target's topic ids to names (the metadata resolver first,
then the names of topics assigned before: a topic about to be revoked may already be gone
from metadata), then revokes what is owned and not in the resolved target, then assigns
the resolved target. Ids no resolver knows stay pending: the resolvable part is
reconciled now, and the rest once metadata knows the ids (``Plan.unresolved`` says a
refresh is needed). One reconciliation runs at a time; a target received meanwhile
replaces ``target`` and is reconciled when the running one ends.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from uuid import UUID

from aiokproto.structs import TopicPartition

#: topic id -> topic name, or None when the metadata cache does not know the id (yet)
Resolver = Callable[[UUID], str | None]

TopicIdPartitions = Mapping[UUID, frozenset[int]]

_EMPTY: TopicIdPartitions = MappingProxyType({})


def freeze(partitions: Mapping[UUID, Iterable[int]]) -> TopicIdPartitions:
    """A read-only copy; topics with no partitions are dropped (they assign nothing)."""
    frozen = {tid: frozenset(ps) for tid, ps in partitions.items()}
    return MappingProxyType({tid: ps for tid, ps in frozen.items() if ps})


@dataclass(frozen=True, slots=True)
class LocalAssignment:
    """Partitions by topic id, with the local epoch of the target they came from.

    ``NONE`` (local epoch -1) means "no assignment received or reconciled"; it differs
    from an empty assignment the broker sent (local epoch >= 0, no partitions), which is
    reconciled and acknowledged like any other."""

    local_epoch: int
    partitions: TopicIdPartitions = field(default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        if self.local_epoch < 0 and self.partitions:
            raise ValueError("an assignment with partitions needs a local epoch")

    @property
    def is_none(self) -> bool:
        return self.local_epoch < 0

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LocalAssignment):
            return NotImplemented
        return self.local_epoch == other.local_epoch and dict(self.partitions) == dict(
            other.partitions
        )

    def __hash__(self) -> int:
        return hash((self.local_epoch, frozenset(self.partitions.items())))


NONE = LocalAssignment(-1)


class Outcome(enum.Enum):
    """What an attempt to reconcile can do now."""

    NOTHING = "nothing"  # reconciled already, one in progress, or waiting for metadata
    ACKNOWLEDGE = "acknowledge"  # the resolvable part is already owned: only acknowledge it
    START = "start"  # revoke/assign work to do


@dataclass(frozen=True, slots=True)
class Plan:
    """One reconciliation: revoke ``revoked`` first, then hold ``assigned`` (``added`` are
    new). ``resolved`` becomes ``current`` when it is done; ``token`` tells its results
    from those of an abandoned one."""

    token: int
    resolved: LocalAssignment
    assigned: frozenset[TopicPartition]
    revoked: frozenset[TopicPartition]
    added: frozenset[TopicPartition]
    unresolved: frozenset[UUID]


class Reconciler:
    """Target, current and owned assignments of one member; see the module docstring."""

    def __init__(self, resolver: Resolver) -> None:
        self._resolver = resolver
        self.target: LocalAssignment = NONE
        self.current: LocalAssignment = NONE
        self.owned: frozenset[TopicPartition] = frozenset()
        #: names of topics assigned to this member (kept while they stay assigned)
        self.names: dict[UUID, str] = {}
        self.in_progress: Plan | None = None
        self._tokens = 0

    # -- target --------------------------------------------------------------------

    @property
    def reconciled(self) -> bool:
        return self.current == self.target

    def would_change(self, partitions: Mapping[UUID, Iterable[int]]) -> bool:
        """True if receiving ``partitions`` would replace the target."""
        return self.target.is_none or dict(freeze(partitions)) != dict(self.target.partitions)

    def receive(self, partitions: Mapping[UUID, Iterable[int]]) -> bool:
        """Take a target from the broker; True if it replaced the previous one. A target
        that arrives while a reconciliation runs waits for it to end."""
        if not self.would_change(partitions):
            return False
        self.target = LocalAssignment(self.target.local_epoch + 1, freeze(partitions))
        return True

    def receive_would_be_reconciled(self, partitions: Mapping[UUID, Iterable[int]]) -> bool:
        """True if, after ``receive(partitions)``, there would be nothing to reconcile."""
        if not self.would_change(partitions):
            return self.reconciled
        return False

    # -- resolution ----------------------------------------------------------------

    def resolve(self) -> tuple[dict[UUID, tuple[str, frozenset[int]]], frozenset[UUID]]:
        """The target's topics whose names are known, and the ids still unknown."""
        known: dict[UUID, tuple[str, frozenset[int]]] = {}
        unknown: set[UUID] = set()
        for tid, parts in self.target.partitions.items():
            name = self._resolver(tid) or self.names.get(tid)
            if name is None:
                unknown.add(tid)
            else:
                known[tid] = (name, parts)
        return known, frozenset(unknown)

    def _resolved(self) -> tuple[LocalAssignment, frozenset[TopicPartition], frozenset[UUID]]:
        known, unknown = self.resolve()
        resolved = LocalAssignment(
            self.target.local_epoch,
            MappingProxyType({tid: parts for tid, (_, parts) in known.items()}),
        )
        named = frozenset(TopicPartition(name, p) for name, parts in known.values() for p in parts)
        return resolved, named, unknown

    def outcome(self) -> Outcome:
        """What ``start``/``acknowledge`` would do now (no change made)."""
        if self.in_progress is not None or self.reconciled or self.target.is_none:
            return Outcome.NOTHING
        resolved, _, _ = self._resolved()
        if not self.current.is_none and dict(resolved.partitions) == dict(self.current.partitions):
            # Nothing to revoke or assign: acknowledge the newer local epoch once; after
            # that, only a metadata refresh (or a new target) can bring more.
            return Outcome.NOTHING if resolved == self.current else Outcome.ACKNOWLEDGE
        return Outcome.START

    def unresolved(self) -> frozenset[UUID]:
        return self.resolve()[1]

    # -- one reconciliation ----------------------------------------------------------

    def acknowledge(self) -> frozenset[UUID]:
        """The resolvable part of the target is what is owned: make it ``current`` (the
        next heartbeat acknowledges it). Returns the ids still unresolved."""
        resolved, _, unknown = self._resolved()
        self.current = resolved
        return unknown

    def start(self) -> Plan:
        """Begin reconciling the resolvable part of the target."""
        if self.in_progress is not None:
            raise RuntimeError("a reconciliation is already in progress")
        known, _ = self.resolve()
        for tid, (name, _) in known.items():
            self.names[tid] = name
        resolved, named, unknown = self._resolved()
        self._tokens += 1
        plan = Plan(
            token=self._tokens,
            resolved=resolved,
            assigned=named,
            revoked=self.owned - named,
            added=named - self.owned,
            unresolved=unknown,
        )
        self.in_progress = plan
        return plan

    def is_live(self, token: int | None) -> bool:
        return self.in_progress is not None and self.in_progress.token == token

    def assign(self) -> Plan:
        """The revocation is done: the consumer now holds ``plan.assigned``."""
        plan = self._live()
        self.owned = plan.assigned
        return plan

    def finish(self) -> Plan:
        """The assignment step is done: ``current`` becomes the reconciled part; names
        of topics no longer assigned are forgotten."""
        plan = self._live()
        self.current = plan.resolved
        self.in_progress = None
        keep = {tp.topic for tp in plan.assigned}
        self.names = {tid: name for tid, name in self.names.items() if name in keep}
        return plan

    def fail(self) -> None:
        """A callback failed: the reconciliation ends unacknowledged; a later attempt
        tries again (what was assigned so far stays owned)."""
        self.in_progress = None

    def abort(self) -> None:
        """The member moved on (fenced, leaving, failed): results of the running
        reconciliation no longer count."""
        self.in_progress = None

    def _live(self) -> Plan:
        if self.in_progress is None:
            raise RuntimeError("no reconciliation in progress")
        return self.in_progress

    # -- release ---------------------------------------------------------------------

    def release(self) -> frozenset[TopicPartition]:
        """Give up everything (lost, revoked on leave): the owned partitions, which are
        cleared along with target, current and the names cache."""
        owned = self.owned
        self.owned = frozenset()
        self.clear_targets()
        self.current = NONE
        return owned

    def clear_targets(self) -> None:
        """Forget the target and the names cache (joining, leaving): a new member epoch
        gets a new target from the broker."""
        self.target = NONE
        self.names.clear()
        self.in_progress = None
