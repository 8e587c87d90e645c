"""read_committed: which fetched batches belong to aborted transactions (pure).

A Fetch response under read_committed carries ``aborted_transactions``: (producer id,
first offset) of every aborted transaction that overlaps the returned range. Walking the
batches in offset order, a producer becomes "aborted" once a batch reaches its first
offset, and stays so until its abort marker (a control batch) passes. Transactional
data batches of an aborted producer are dropped; control batches are never handed out.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import Protocol

from aiokproto.records.control import ControlType


class _BatchLike(Protocol):
    @property
    def producer_id(self) -> int: ...
    @property
    def is_transactional(self) -> bool: ...
    @property
    def is_control(self) -> bool: ...
    @property
    def last_offset(self) -> int: ...


class AbortedFilter:
    """Feed it each batch in order; ``skip(batch, is_abort_marker)`` says whether to drop it."""

    __slots__ = ("_aborted", "_pending")

    def __init__(self, aborted: Iterable[tuple[int, int]]) -> None:
        # (first_offset, producer_id), smallest first offset on top
        self._pending = [(first, pid) for pid, first in aborted]
        heapq.heapify(self._pending)
        self._aborted: set[int] = set()

    def skip(self, batch: _BatchLike, is_abort_marker: bool = False) -> bool:
        """True if ``batch`` must not reach the application."""
        pid = batch.producer_id
        if pid >= 0:
            pending = self._pending
            last = batch.last_offset
            while pending and pending[0][0] <= last:
                self._aborted.add(heapq.heappop(pending)[1])
            if batch.is_control:
                if is_abort_marker:
                    self._aborted.discard(pid)
                return True
            if batch.is_transactional and pid in self._aborted:
                return True
        return batch.is_control


def is_abort_marker(control_types: Iterable[int]) -> bool:
    """True if a control batch's records are an abort marker."""
    return any(t == ControlType.ABORT for t in control_types)
