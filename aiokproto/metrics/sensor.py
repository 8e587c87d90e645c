"""Windowed statistics, the way Java's client samples them.

A :class:`Sensor` keeps ``num_samples`` samples of ``window_s`` seconds each (Java's
``metrics.num.samples`` and ``metrics.sample.window.ms``) plus cumulative totals. A
read ignores samples older than the whole window, so a rate falls to 0 and an average
to NaN once nothing has been recorded for ``num_samples * window_s``.

Recording runs on hot paths (per produced batch, per fetched partition, per request),
and nobody may ever read what it records: it only counts into the current sample's
plain attributes (a few additions, no allocation, no list indexing). Closing a sample
(once per window) and everything a read computes (rates, averages, totals) happen off
that path.
"""

from __future__ import annotations

import math
import time
from collections import deque

NAN = math.nan
_monotonic = time.monotonic

#: a closed sample: (start, count, sum, max, min)
_Sample = tuple[float, int, float, float, float]


class Sensor:
    """Count, sum, max and min of recorded values over a sliding window."""

    __slots__ = (
        "_closed_count",
        "_closed_sum",
        "_count",
        "_max",
        "_min",
        "_n",
        "_old",
        "_start",
        "_sum",
        "_window",
    )

    def __init__(
        self, window_s: float = 30.0, num_samples: int = 2, start: float | None = None
    ) -> None:
        """``start``: when the sensor began (now by default); a sensor made late for
        something that began at ``start`` reads the same as one made then, since an
        empty sensor's state is its start alone."""
        self._window = window_s
        self._n = num_samples
        if start is None:
            start = _monotonic()
        # the num_samples - 1 samples before the current one, oldest first (empty ones
        # included: their starts bound the elapsed time a rate is measured over)
        self._old: deque[_Sample] = deque(
            [(start, 0, 0.0, -math.inf, math.inf)] * (num_samples - 1), maxlen=num_samples - 1
        )
        self._start = start
        self._count = 0
        self._sum = 0.0
        self._max = -math.inf
        self._min = math.inf
        self._closed_count = 0  # totals of the closed samples
        self._closed_sum = 0.0

    def record(self, value: float = 1.0, now: float | None = None) -> None:
        if now is None:
            now = _monotonic()
        if now - self._start >= self._window:
            self._roll(now)
        self._count += 1
        self._sum += value
        if value > self._max:
            self._max = value
        if value < self._min:
            self._min = value

    def record_many(self, count: int, total: float, high: float, low: float, now: float) -> None:
        """Record ``count`` values at once, given their sum, max and min (what reads
        compute from, so the same as ``count`` calls of ``record``)."""
        if now - self._start >= self._window:
            self._roll(now)
        self._count += count
        self._sum += total
        if high > self._max:
            self._max = high
        if low < self._min:
            self._min = low

    def _roll(self, now: float) -> None:
        """Close the current sample and start a new one at ``now``."""
        count, total = self._count, self._sum
        if self._n > 1:
            self._old.append((self._start, count, total, self._max, self._min))
        self._closed_count += count
        self._closed_sum += total
        self._start = now
        self._count = 0
        self._sum = 0.0
        self._max = -math.inf
        self._min = math.inf

    @property
    def count_total(self) -> int:
        """Every value ever recorded: how many."""
        return self._closed_count + self._count

    @property
    def sum_total(self) -> float:
        """Every value ever recorded: their sum."""
        return self._closed_sum + self._sum

    def _samples(self) -> list[_Sample]:
        return [*self._old, (self._start, self._count, self._sum, self._max, self._min)]

    def _live(self, now: float) -> list[_Sample]:
        horizon = now - self._window * self._n
        return [s for s in self._samples() if s[0] > horizon and s[1]]

    def _elapsed(self, now: float) -> float:
        """Seconds a rate is measured over: from the oldest sample still in the window,
        but at least ``num_samples - 1`` whole windows (Java's rule), so a burst right
        after start is not reported as a huge rate."""
        horizon = now - self._window * self._n
        oldest = min((s[0] for s in self._samples() if s[0] > horizon), default=now)
        elapsed = now - oldest
        return max(elapsed, self._window * (self._n - 1), 1e-3)

    def rate(self, now: float | None = None) -> float:
        """Recorded values summed per second (e.g. records/s when each value is a count)."""
        now = _monotonic() if now is None else now
        return sum(s[2] for s in self._live(now)) / self._elapsed(now)

    def count_rate(self, now: float | None = None) -> float:
        """Recordings per second (e.g. requests/s)."""
        now = _monotonic() if now is None else now
        return sum(s[1] for s in self._live(now)) / self._elapsed(now)

    def avg(self, now: float | None = None) -> float:
        now = _monotonic() if now is None else now
        live = self._live(now)
        count = sum(s[1] for s in live)
        return sum(s[2] for s in live) / count if count else NAN

    def max(self, now: float | None = None) -> float:
        now = _monotonic() if now is None else now
        return max((s[3] for s in self._live(now)), default=NAN)

    def min(self, now: float | None = None) -> float:
        now = _monotonic() if now is None else now
        return min((s[4] for s in self._live(now)), default=NAN)
