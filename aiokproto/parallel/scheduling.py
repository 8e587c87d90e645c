"""Sans-I/O scheduling for ``ParallelConsumer``: which fetched record may start next.

Records wait in *lanes*: with ``ordering="key"`` a lane is (partition, key), with
``"partition"`` the partition; a lane runs one record at a time, in the order records
were added (offset order within a partition), and different lanes run concurrently.
``"unordered"`` has no lanes: any queued record may start. Ready lanes are served
first come, first served, so a busy key never holds up other keys; what it holds back
is bounded by the back-pressure limits (``over_limit``/``under_limit``), on which the
consumer's fetching of a partition is paused and resumed.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from typing import Generic, Literal, TypeVar, cast

from aiokproto.structs import TopicPartition

Ordering = Literal["key", "partition", "unordered"]
ORDERINGS: tuple[Ordering, ...] = ("key", "partition", "unordered")

T = TypeVar("T")


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
        # laned orderings: lane -> (its partition, items waiting in order)
        self._waiting: dict[Hashable, tuple[TopicPartition, deque[T]]] = {}
        self._busy: set[Hashable] = set()  # lanes with an item started, not released
        # laned: idle lanes with waiting items; unordered: (partition, item) in order
        self._ready: deque[Hashable] = deque()
        self._queued: dict[TopicPartition, int] = {}
        self.queued_total = 0
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

    def add(self, tp: TopicPartition, lane: Hashable, item: T) -> None:
        """Queue ``item`` (records of a partition are added in offset order)."""
        self._queued[tp] = self._queued.get(tp, 0) + 1
        self.queued_total += 1
        if not self._laned:
            self._ready.append((tp, item))
            return
        entry = self._waiting.get(lane)
        if entry is None:
            entry = self._waiting[lane] = (tp, deque())
            if lane not in self._busy:
                self._ready.append(lane)
        entry[1].append(item)

    def take(self) -> tuple[TopicPartition, Hashable, T] | None:
        """The next item that may start, its lane now busy until ``release(lane)``."""
        ready = self._ready
        if not ready:
            return None
        if not self._laned:
            tp, item = cast("tuple[TopicPartition, T]", ready.popleft())
            lane: Hashable = None
        else:
            lane = ready.popleft()
            tp, items = self._waiting[lane]
            item = items.popleft()
            if not items:
                del self._waiting[lane]
            self._busy.add(lane)
        self._queued[tp] -= 1
        self.queued_total -= 1
        return tp, lane, item

    def release(self, lane: Hashable) -> None:
        """The item taken from ``lane`` is done: the lane's next item may start."""
        if not self._laned:
            return
        self._busy.discard(lane)
        if lane in self._waiting:
            self._ready.append(lane)

    @property
    def ready_count(self) -> int:
        """How many items could start now (one per idle lane with items waiting)."""
        return len(self._ready)

    def queued(self, tp: TopicPartition) -> int:
        return self._queued.get(tp, 0)

    def drop(self, partitions: frozenset[TopicPartition] | set[TopicPartition]) -> list[T]:
        """Forget the queued items of ``partitions`` (revoked): they never start."""
        dropped: list[T] = []
        if not self._laned:
            keep: deque[Hashable] = deque()
            for entry in self._ready:
                entry_tp, entry_item = cast("tuple[TopicPartition, T]", entry)
                if entry_tp in partitions:
                    dropped.append(entry_item)
                else:
                    keep.append(entry)
            self._ready = keep
        else:
            gone = [lane for lane, (tp, _) in self._waiting.items() if tp in partitions]
            for lane in gone:
                dropped.extend(self._waiting.pop(lane)[1])
            if gone:
                self._ready = deque(lane for lane in self._ready if lane in self._waiting)
        for tp in partitions:
            self.queued_total -= self._queued.pop(tp, 0)
        return dropped

    def _share(self) -> int:
        """A partition's fair share of the total bound."""
        return max(1, self.max_queued_total // max(1, self.partitions))

    def over_limit(self, tp: TopicPartition) -> bool:
        """Fetching ``tp`` should pause: its queue is at its bound, or the total is at
        its bound and ``tp`` holds at least its fair share of it. (A partition below
        its share keeps fetching, so one partition filling the total first never
        starves the others: the total stays below about twice its bound.)"""
        queued = self._queued.get(tp, 0)
        return queued >= self.max_queued_per_partition or (
            self.queued_total >= self.max_queued_total and queued >= self._share()
        )

    def under_limit(self, tp: TopicPartition) -> bool:
        """A paused ``tp`` may fetch again: its queue drained to half its bound, and the
        total to half its bound or ``tp`` to half its share (hysteresis, so fetching
        does not flap on every record)."""
        queued = self._queued.get(tp, 0)
        return queued <= self.max_queued_per_partition // 2 and (
            self.queued_total <= self.max_queued_total // 2 or queued <= self._share() // 2
        )
