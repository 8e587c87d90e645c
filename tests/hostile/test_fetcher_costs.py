"""Costs of the new consumer bookkeeping on hot paths."""

from __future__ import annotations

from aiokproto.consumer.fetched import SharedFrame


class _Member:
    """Stands in for a FetchedData: what SharedFrame uses of one."""

    reads = 0

    def __init__(self, size: int) -> None:
        self.frame: SharedFrame | None = None
        self._size = size

    @property
    def unread_bytes(self) -> int:
        _Member.reads += 1
        return self._size

    def compact(self) -> None:
        pass

    def charge(self, budget: object) -> None:
        pass  # copied out: FetchedData then counts its own buffer in the budget


def test_letting_go_of_a_response_with_many_partitions_is_linear() -> None:
    """Expected: handing out (leave()) every partition of one Fetch response costs
    O(partitions) in total; a response for thousands of partitions is common (one
    fetch per broker for every partition it leads). Observed: every leave() does
    list.remove() and settle() sums unread_bytes over all remaining members, so
    draining n partitions costs ~n^2/2 member reads (12.5 M for 5000 partitions)."""
    n = 5000
    frame = SharedFrame(n * 100)
    members = [_Member(100) for _ in range(n)]
    for m in members:
        frame.join(m)  # type: ignore[arg-type]
    _Member.reads = 0
    for m in members:
        frame.leave(m)  # type: ignore[arg-type]
    assert _Member.reads <= 20 * n, f"{_Member.reads} unread_bytes reads for {n} partitions"
