"""The consumer-wide bound on fetched data (``FetchBudget``): bytes buffered and not
handed out plus bytes asked for by fetches in flight, at most ``fetch_buffer_max_bytes``.

Java bounds each request only (``fetch_max_bytes``); across brokers and partitions a
lagging consumer could otherwise buffer far more.

Pure bookkeeping, no I/O. A fetch asks for what is free (``grant``), reserved until
its answer has been buffered (``settle``); the answer's bytes are then ``charge``d
until handed out or dropped (``release``). Kafka returns at least one batch even to a
fetch asking for 1 byte, so a batch larger than the bound still comes: the buffer
then exceeds the bound by that batch and no fetch is issued until it drains.
"""

from __future__ import annotations

#: librdkafka's queued.max.messages.kbytes default (65536 KB), and above Java's
#: fetch.max.bytes (50 MB), so one full-size answer fits beside buffered data
DEFAULT_FETCH_BUFFER_MAX_BYTES = 64 * 1024 * 1024


class FetchBudget:
    """Bytes buffered plus bytes reserved by fetches in flight, against ``limit``."""

    __slots__ = ("_reserved", "buffered", "limit", "peak")

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"a fetch budget needs a limit >= 1, not {limit}")
        self.limit = limit
        self.buffered = 0
        #: the most ever buffered (what a memory test checks against the bound)
        self.peak = 0
        self._reserved: dict[int, int] = {}  # per broker node: its fetch in flight

    @property
    def reserved(self) -> int:
        return sum(self._reserved.values())

    @property
    def free(self) -> int:
        """Bytes a new fetch could ask for now (<= 0: none)."""
        return self.limit - self.buffered - self.reserved

    def grant(self, node: int, want: int, share: int | None = None) -> int:
        """Reserve and return the bytes a fetch from ``node`` may ask for: at most
        ``want``, ``share`` (a fair part of the limit when several brokers fetch) and
        what is free; 0 when nothing is free (the fetch waits for the buffer to
        drain). Replaces ``node``'s earlier reservation."""
        self._reserved.pop(node, None)
        n = min(want, self.free if share is None else min(share, self.free))
        if n <= 0:
            return 0
        self._reserved[node] = n
        return n

    def settle(self, node: int) -> None:
        """``node``'s fetch is over (answered, failed or cancelled): free its reservation."""
        self._reserved.pop(node, None)

    def charge(self, nbytes: int) -> None:
        """``nbytes`` of fetched data are now buffered."""
        self.buffered += nbytes
        if self.buffered > self.peak:
            self.peak = self.buffered

    def release(self, nbytes: int) -> None:
        """``nbytes`` buffered earlier were handed out or dropped."""
        self.buffered -= nbytes
        if self.buffered < 0:  # a bookkeeping defect: never let it free phantom bytes
            raise AssertionError(
                f"fetch budget released {nbytes} bytes, {-self.buffered} more than buffered"
            )

    def clear(self) -> None:
        """Everything buffered was dropped at once (the fetcher closed)."""
        self.buffered = 0
        self._reserved.clear()
