"""Summary statistics for repeated runs and latency samples (pure)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Spread:
    """Median of the runs and how far they scatter around it."""

    median: float
    low: float
    high: float
    runs: int

    @property
    def rel_spread(self) -> float:
        """(max - min) / median: 0.1 means runs scatter over 10% of the median."""
        return (self.high - self.low) / self.median if self.median else math.inf


def spread(values: Sequence[float]) -> Spread:
    if not values:
        raise ValueError("no values to summarise")
    return Spread(statistics.median(values), min(values), max(values), len(values))


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The q-th percentile (0 <= q <= 100) of already-sorted values, nearest-rank method:
    the smallest value with at least q% of the samples at or below it."""
    if not sorted_values:
        raise ValueError("no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} out of range")
    # rounded first: 99.9 / 100 * 1000 is 999.0000000000001 in floating point
    rank = max(1, math.ceil(round(q / 100 * len(sorted_values), 9)))
    return float(sorted_values[rank - 1])


def latency_summary(latencies_ms: Sequence[float]) -> dict[str, float]:
    ordered = sorted(latencies_ms)
    return {
        "p50_ms": percentile(ordered, 50),
        "p99_ms": percentile(ordered, 99),
        "p999_ms": percentile(ordered, 99.9),
        "max_ms": float(ordered[-1]),
        "mean_ms": statistics.fmean(ordered),
    }
