"""Sans-I/O scheduling for ``ParallelConsumer``: which fetched record may start next.

Records wait in *lanes*: with ``ordering="key"`` a lane is (partition, key), with
``"partition"`` the partition; a lane runs one record at a time, in the order records
were added (offset order within a partition), and different lanes run concurrently.
``"unordered"`` has no lanes: any queued record may start. Ready lanes are served
first come, first served, so a busy key never holds up other keys; what it holds back
is bounded by the back-pressure limits (``over_limit``/``under_limit``), on which the
consumer's fetching of a partition is paused and resumed. This runs for every record:
lanes are found by key within their partition's table and reused once they end.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterable, Sequence
from itertools import repeat
from typing import Any, Generic, Literal, TypeVar

from aiokproto.structs import TopicPartition

Ordering = Literal["key", "partition", "unordered"]
ORDERINGS: tuple[Ordering, ...] = ("key", "partition", "unordered")

T = TypeVar("T")

# lanes kept for reuse at most (about the lanes that end between two fetches)
_MAX_SPARE = 4096

# the key of a partition's own lane ("partition" ordering, or a key that cannot be hashed)
_WHOLE: Hashable = object()


class _Partition:
    """A partition's queue: its lanes by key and how many items wait."""

    __slots__ = ("lanes", "queued", "tp")

    def __init__(self, tp: TopicPartition) -> None:
        self.tp = tp
        self.queued = 0
        # key (or _WHOLE) -> its lane, while the lane has items waiting or one running
        self.lanes: dict[Hashable, Lane[Any]] = {}


class Lane(Generic[T]):
    """The items of one key (or partition), run one at a time in the order added.

    Lanes are looked up by key within their partition's table, so the hot path hashes
    the record's key (``bytes`` cache their hash) and never a (partition, key) tuple."""

    __slots__ = ("busy", "items", "key", "part")

    def __init__(self, part: _Partition, key: Hashable) -> None:
        self.part = part
        self.key = key
        self.items: deque[T] = deque()
        self.busy = False  # an item taken and not yet released

    @property
    def id(self) -> Hashable:
        """What ``Scheduler.lane_of`` returns for this lane's records."""
        tp = self.part.tp
        return tp if self.key is _WHOLE else (tp, self.key)

    def __repr__(self) -> str:
        return f"<Lane {self.id!r} busy={self.busy} waiting={len(self.items)}>"


class Scheduler(Generic[T]):
    """Queued items (records) per lane; ``take`` hands out the next one that may start."""

    def __init__(
        self, ordering: Ordering, *, max_queued_per_partition: int, max_queued_total: int
    ) -> None:
        if ordering not in ORDERINGS:
            raise ValueError(f"ordering must be one of {ORDERINGS}, not {ordering!r}")
        self.ordering = ordering
        self.max_queued_per_partition = max_queued_per_partition
        self.max_queued_total = max_queued_total
        self._laned = ordering != "unordered"
        self._by_key = ordering == "key"
        self._parts: dict[TopicPartition, _Partition] = {}
        # laned: idle lanes with items waiting; unordered: (partition, item) in order
        self._ready: deque[Any] = deque()
        #: what may start now (one entry per idle lane with items waiting, or per item
        #: for "unordered"): read only, its length is ``ready_count`` (the same deque
        #: for the scheduler's life, so a caller may keep it)
        self.ready: deque[Any] = self._ready
        # lanes ended (released with nothing waiting), reused: most records of many keys
        # open a lane of their own, and a new one (its deque) costs more than the rest of
        # scheduling the record
        self._spare: list[Lane[T]] = []
        self.queued_total = 0
        #: items still queued of the partition ``take`` last took from (a cheap
        #: precondition of ``under_limit`` for it: at most half its bound)
        self.left_in_partition = 0
        #: partitions assigned (set by the owner): each one's fair share of the total
        self.partitions = 1

    def lane_of(self, tp: TopicPartition, key: object) -> Hashable:
        """The lane of a record of ``tp`` with ``key`` (None for ``"unordered"``). A key
        that cannot be hashed (a deserialized dict) falls back to its partition's lane."""
        if self.ordering == "partition":
            return tp
        if self.ordering == "unordered":
            return None
        try:
            hash(key)
        except TypeError:
            return tp
        return (tp, key)

    def add(self, tp: TopicPartition, key: object, item: T) -> None:
        """Queue ``item``, a record of ``tp`` with ``key`` (records of a partition are
        added in offset order)."""
        self.add_many(tp, (item,), (key,))

    def add_many(self, tp: TopicPartition, items: Sequence[T], keys: Iterable[object]) -> None:
        """Queue ``items`` of ``tp`` in offset order; ``keys``: each one's key (read only
        with ``ordering="key"``)."""
        n = len(items)
        if not n:
            return
        part = self._parts.get(tp)
        if part is None:
            part = self._parts[tp] = _Partition(tp)
        part.queued += n
        self.queued_total += n
        ready = self._ready
        if not self._laned:
            ready.extend(zip(repeat(part), items))
            return
        lanes = part.lanes
        if not self._by_key:
            lane = lanes.get(_WHOLE)
            if lane is None:
                lane = lanes[_WHOLE] = Lane(part, _WHOLE)
                ready.append(lane)  # (a lane found is running, or ready already)
            lane.items.extend(items)
            return
        spare = self._spare
        for key, item in zip(keys, items, strict=False):  # (one key each)
            try:
                lane = lanes.get(key)  # (an unhashable key raises TypeError)
            except TypeError:
                key = _WHOLE
                lane = lanes.get(key)
            if lane is None:
                if spare:
                    lane = spare.pop()
                    lane.part = part
                    lane.key = key
                else:
                    lane = Lane(part, key)
                lanes[key] = lane
                ready.append(lane)
            lane.items.append(item)

    def take(self) -> tuple[TopicPartition, Lane[T] | None, T] | None:
        """The next item that may start, its lane now busy until ``release(lane)``."""
        ready = self._ready
        if not ready:
            return None
        self.queued_total -= 1
        if not self._laned:
            part, item = ready.popleft()
            part.queued -= 1
            self.left_in_partition = part.queued
            return part.tp, None, item
        lane = ready.popleft()
        lane.busy = True
        part = lane.part
        part.queued -= 1
        self.left_in_partition = part.queued
        return part.tp, lane, lane.items.popleft()

    def release(self, lane: Lane[T] | None) -> None:
        """The item taken from ``lane`` is done: the lane's next item may start."""
        if lane is None:
            return
        lane.busy = False
        if lane.items:
            self._ready.append(lane)
            return
        if len(self._spare) < _MAX_SPARE:
            self._spare.append(lane)
        lanes = lane.part.lanes
        key = lane.key
        if lanes.get(key) is lane:  # (it is: a lane stays in its table while busy)
            del lanes[key]

    @property
    def ready_count(self) -> int:
        """How many items could start now (one per idle lane with items waiting)."""
        return len(self._ready)

    def queued(self, tp: TopicPartition) -> int:
        part = self._parts.get(tp)
        return 0 if part is None else part.queued

    def drop(self, partitions: frozenset[TopicPartition] | set[TopicPartition]) -> list[T]:
        """Forget the queued items of ``partitions`` (revoked): they never start. A lane
        with an item running stays busy until released, so an item of its key added
        again (a rewind) still waits for it."""
        dropped: list[T] = []
        if not self._laned:
            keep: deque[Any] = deque()
            for entry in self._ready:
                if entry[0].tp in partitions:
                    dropped.append(entry[1])
                else:
                    keep.append(entry)
            self._ready.clear()
            self._ready.extend(keep)
        for tp in partitions:
            part = self._parts.get(tp)
            if part is None:
                continue
            self.queued_total -= part.queued
            part.queued = 0
            lanes = part.lanes
            for key, lane in list(lanes.items()):
                dropped.extend(lane.items)
                lane.items.clear()
                if not lane.busy:
                    del lanes[key]
            if not lanes:
                del self._parts[tp]
        if self._laned and dropped:  # their lanes leave the ready queue
            keep = deque(lane for lane in self._ready if lane.items)
            self._ready.clear()
            self._ready.extend(keep)
        return dropped

    def _share(self) -> int:
        """A partition's fair share of the total bound."""
        return max(1, self.max_queued_total // max(1, self.partitions))

    def over_limit(self, tp: TopicPartition) -> bool:
        """Fetching ``tp`` should pause: its queue is at its bound, or the total is at
        its bound and ``tp`` holds at least its fair share of it. (A partition below
        its share keeps fetching, so one partition filling the total first never
        starves the others: the total stays below about twice its bound.)"""
        queued = self.queued(tp)
        return queued >= self.max_queued_per_partition or (
            self.queued_total >= self.max_queued_total and queued >= self._share()
        )

    def under_limit(self, tp: TopicPartition) -> bool:
        """A paused ``tp`` may fetch again: its queue drained to half its bound, and the
        total to half its bound or ``tp`` to half its share (hysteresis, so fetching
        does not flap on every record)."""
        queued = self.queued(tp)
        return queued <= self.max_queued_per_partition // 2 and (
            self.queued_total <= self.max_queued_total // 2 or queued <= self._share() // 2
        )
