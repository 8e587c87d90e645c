"""Windowed statistics, the way Java's client samples them.

A :class:`Sensor` keeps ``num_samples`` samples of ``window_s`` seconds each (Java's
``metrics.num.samples`` and ``metrics.sample.window.ms``) plus cumulative totals. A
read ignores samples older than the whole window, so a rate falls to 0 and an average
to NaN once nothing has been recorded for ``num_samples * window_s``.

Recording is a handful of float operations and no allocation: it runs on hot paths
(one call per produced batch, per fetched partition, per request).
"""

from __future__ import annotations

import math
import time

NAN = math.nan


class Sensor:
    """Count, sum, max and min of recorded values over a sliding window."""

    __slots__ = (
        "_counts",
        "_cur",
        "_maxs",
        "_mins",
        "_n",
        "_starts",
        "_sums",
        "_window",
        "count_total",
        "sum_total",
    )

    def __init__(self, window_s: float = 30.0, num_samples: int = 2) -> None:
        self._window = window_s
        self._n = num_samples
        start = time.monotonic()
        self._starts = [start] * num_samples
        self._counts = [0] * num_samples
        self._sums = [0.0] * num_samples
        self._maxs = [-math.inf] * num_samples
        self._mins = [math.inf] * num_samples
        self._cur = 0
        #: every value ever recorded: how many, and their sum
        self.count_total = 0
        self.sum_total = 0.0

    def record(self, value: float = 1.0, now: float | None = None) -> None:
        if now is None:
            now = time.monotonic()
        i = self._cur
        if now - self._starts[i] >= self._window:
            i = self._cur = (i + 1) % self._n
            self._starts[i] = now
            self._counts[i] = 0
            self._sums[i] = 0.0
            self._maxs[i] = -math.inf
            self._mins[i] = math.inf
        self._counts[i] += 1
        self._sums[i] += value
        if value > self._maxs[i]:
            self._maxs[i] = value
        if value < self._mins[i]:
            self._mins[i] = value
        self.count_total += 1
        self.sum_total += value

    def _live(self, now: float) -> list[int]:
        horizon = now - self._window * self._n
        return [i for i in range(self._n) if self._starts[i] > horizon and self._counts[i]]

    def _elapsed(self, now: float) -> float:
        """Seconds a rate is measured over: from the oldest sample still in the window,
        but at least ``num_samples - 1`` whole windows (Java's rule), so a burst right
        after start is not reported as a huge rate."""
        horizon = now - self._window * self._n
        oldest = min((s for s in self._starts if s > horizon), default=now)
        elapsed = now - oldest
        return max(elapsed, self._window * (self._n - 1), 1e-3)

    def rate(self, now: float | None = None) -> float:
        """Recorded values summed per second (e.g. records/s when each value is a count)."""
        now = time.monotonic() if now is None else now
        return sum(self._sums[i] for i in self._live(now)) / self._elapsed(now)

    def count_rate(self, now: float | None = None) -> float:
        """Recordings per second (e.g. requests/s)."""
        now = time.monotonic() if now is None else now
        return sum(self._counts[i] for i in self._live(now)) / self._elapsed(now)

    def avg(self, now: float | None = None) -> float:
        now = time.monotonic() if now is None else now
        live = self._live(now)
        count = sum(self._counts[i] for i in live)
        return sum(self._sums[i] for i in live) / count if count else NAN

    def max(self, now: float | None = None) -> float:
        now = time.monotonic() if now is None else now
        return max((self._maxs[i] for i in self._live(now)), default=NAN)

    def min(self, now: float | None = None) -> float:
        now = time.monotonic() if now is None else now
        return min((self._mins[i] for i in self._live(now)), default=NAN)
