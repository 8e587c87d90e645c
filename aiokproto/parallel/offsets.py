"""Sans-I/O offset tracking for ``ParallelConsumer``: per partition, the records taken
from the consumer and which of them finished, giving the safe commit offset (the
lowest unfinished offset: every record below it has finished, in any order).

``PartitionOffsets.add`` takes offsets in increasing order (gaps allowed: compaction,
transaction markers); ``finish`` marks one done, in any order; ``safe`` is what may be
committed. A record never finished (a failure under the "stop" policy, a cancelled
handler) holds the safe offset below it for good, so a commit never passes it.
``rewind`` follows the consumer's position moved back (a ``seek()``): records from
there on are taken again, and those of them still in progress hold the safe offset
until they end too.
"""

from __future__ import annotations

from collections import deque
from itertools import repeat


class PartitionOffsets:
    """The records of one partition taken but not yet committable."""

    __slots__ = ("_finished", "_ghosts", "_high", "_taken_at", "_unfinished", "committed")

    def __init__(self) -> None:
        # offsets taken and not yet below the safe offset, in increasing order
        self._unfinished: deque[int] = deque()
        self._finished: set[int] = set()  # members of _unfinished that finished
        self._taken_at: deque[float] = deque()  # when each of _unfinished was added
        self._high = -1  # one past the highest offset taken (-1: none yet)
        # offsets in progress when a rewind dropped them from _unfinished (taken again
        # after it): each holds the safe offset at or below it until it finishes
        self._ghosts: dict[int, int] = {}
        #: the last offset committed for this partition (-1: none by us)
        self.committed = -1

    def add(self, offset: int, now: float = 0.0) -> None:
        """A record taken from the consumer at time ``now`` (offsets increase; gaps are
        fine)."""
        if offset < self._high:
            raise ValueError(f"offset {offset} taken after {self._high - 1}: offsets must increase")
        self._unfinished.append(offset)
        self._taken_at.append(now)
        self._high = offset + 1

    def add_many(self, offsets: list[int], now: float = 0.0) -> None:
        """Records of one fetched batch, taken at ``now`` (increasing offsets; the batch
        is checked at its ends, against what was taken before)."""
        if not offsets:
            return
        first, last = offsets[0], offsets[-1]
        if first < self._high or last < first + len(offsets) - 1:
            raise ValueError(
                f"offsets {first}..{last} ({len(offsets)}) taken after {self._high - 1}: "
                "offsets must increase"
            )
        self._unfinished.extend(offsets)
        self._taken_at.extend(repeat(now, len(offsets)))
        self._high = last + 1

    def finish(self, offset: int) -> None:
        """The record at ``offset`` is done (handled, skipped or dead-lettered)."""
        ghosts = self._ghosts
        if ghosts and offset in ghosts:  # (a copy taken before a rewind)
            if ghosts[offset] == 1:
                del ghosts[offset]
            else:
                ghosts[offset] -= 1
            return
        unfinished = self._unfinished
        if not unfinished or offset < unfinished[0] or offset >= self._high:
            raise ValueError(f"offset {offset} is not a record in progress")
        if offset == unfinished[0]:
            unfinished.popleft()
            taken_at = self._taken_at
            taken_at.popleft()
            finished = self._finished
            while unfinished and unfinished[0] in finished:
                finished.discard(unfinished.popleft())
                taken_at.popleft()
        elif offset not in self._finished:
            self._finished.add(offset)
        else:
            raise ValueError(f"offset {offset} finished twice")

    @property
    def safe(self) -> int | None:
        """The offset that may be committed: the lowest unfinished one, or one past the
        highest taken when all finished (None: nothing taken yet)."""
        safe = self._unfinished[0] if self._unfinished else self._high
        if self._ghosts:
            safe = min(safe, min(self._ghosts))
        return safe if safe >= 0 else None

    @property
    def next_offset(self) -> int:
        """One past the highest offset taken (-1: none yet); a record below it means
        the consumer's position moved back (``rewind``)."""
        return self._high

    def rewind(self, offset: int, queued: set[int]) -> None:
        """The consumer's position moved back to ``offset`` (a ``seek()``): forget the
        records from ``offset`` on, so they can be taken again. ``queued``: those of
        them that never started (dropped by the caller); the others not finished are
        in progress and hold the safe offset until they finish. The next commit may go
        back to ``offset`` too (only finished records lie below it)."""
        unfinished, taken_at, finished = self._unfinished, self._taken_at, self._finished
        while unfinished and unfinished[-1] >= offset:
            gone = unfinished.pop()
            taken_at.pop()
            if gone in finished:
                finished.discard(gone)
            elif gone not in queued:
                self._ghosts[gone] = self._ghosts.get(gone, 0) + 1
        self._high = offset
        self.committed = min(self.committed, offset - 1)

    def oldest_age(self, now: float) -> float:
        """How long the lowest unfinished record has been waiting (0: none)."""
        return now - self._taken_at[0] if self._taken_at else 0.0

    @property
    def in_progress(self) -> int:
        """Records taken and not finished."""
        return len(self._unfinished) - len(self._finished) + sum(self._ghosts.values())

    def finished_above_safe(self) -> list[int]:
        """Finished offsets above the safe one, ascending (what a restart could skip)."""
        return sorted(self._finished)

    def to_commit(self) -> int | None:
        """The safe offset if it moved past ``committed``, else None (the caller sets
        ``committed`` once the commit succeeded)."""
        safe = self.safe
        if safe is None or safe <= self.committed:
            return None
        return safe
