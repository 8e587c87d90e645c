"""Pure parts of ``aiokproto perf``: pacing, latency statistics and the report lines.

MB here is 2**20 bytes, as Kafka's perf tools count it.
"""

from __future__ import annotations

import random
import string
from array import array
from dataclasses import dataclass, field
from typing import Any

MB = 1024 * 1024
#: latencies kept for the percentiles (every k-th record beyond this, as Kafka's tool)
MAX_SAMPLES = 500_000
#: a pace this far ahead of schedule is not worth a sleep (the next record catches up)
MIN_SLEEP_S = 0.001


def payload(size: int, seed: int | None = None) -> bytes:
    """A record value of ``size`` random upper-case letters (compressible like text, as
    kafka-producer-perf-test's values are)."""
    rng = random.Random(seed)
    return "".join(rng.choices(string.ascii_uppercase, k=size)).encode()


@dataclass(slots=True)
class Throttle:
    """Paces sends at ``rate`` records per second from ``start`` (None: no limit).

    Record ``i`` (from 0) is due at ``start + i / rate``: the schedule is absolute, so
    sleeping late or sends that block never add up to a rate above the limit, and a run
    of N records lasts at least (N - 1) / rate.
    """

    rate: float | None
    start: float

    def delay(self, sent: int, now: float) -> float:
        """Seconds to wait before sending record number ``sent`` (0 if due)."""
        if not self.rate:
            return 0.0
        ahead = self.start + sent / self.rate - now
        return ahead if ahead >= MIN_SLEEP_S else 0.0


def percentile(ordered: list[float] | array[float], p: float) -> float:
    """The value at rank ``p`` (0..1) of sorted values, as Kafka's tool picks it."""
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


@dataclass(slots=True)
class Window:
    """What happened since the last look: for the live display."""

    records: int = 0
    bytes: int = 0
    seconds: float = 0.0
    latency_sum_ms: float = 0.0
    latency_max_ms: float = 0.0
    latencies: list[float] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.bytes / MB / self.seconds if self.seconds > 0 else 0.0

    @property
    def latency_avg_ms(self) -> float:
        return self.latency_sum_ms / self.records if self.records else 0.0


class Recorder:
    """Records delivered (or consumed) with their sizes and latencies.

    Every latency counts towards the average and the max; the percentiles come from a
    sample of at most ``MAX_SAMPLES`` (every k-th record), as Kafka's tool keeps them.
    """

    def __init__(self, expected: int, now: float, max_samples: int = MAX_SAMPLES) -> None:
        self.every = max(1, expected // max_samples)
        self.records = 0
        self.bytes = 0
        self.latency_sum_ms = 0.0
        self.latency_max_ms = 0.0
        self.samples: array[float] = array("d")
        self.window = Window()
        self._window_start = now

    def add(self, size: int, latency_ms: float | None = None) -> None:
        self.records += 1
        self.bytes += size
        w = self.window
        w.records += 1
        w.bytes += size
        if latency_ms is not None:
            self.latency_sum_ms += latency_ms
            self.latency_max_ms = max(self.latency_max_ms, latency_ms)
            w.latency_sum_ms += latency_ms
            w.latency_max_ms = max(w.latency_max_ms, latency_ms)
            if self.records % self.every == 0:
                self.samples.append(latency_ms)
                w.latencies.append(latency_ms)

    def add_many(self, count: int, size: int) -> None:
        """``count`` records of ``size`` bytes in all, without latencies (consuming)."""
        self.records += count
        self.bytes += size
        self.window.records += count
        self.window.bytes += size

    def take_window(self, now: float) -> Window:
        """The window since the last call (or the start); a new one begins."""
        w, self.window = self.window, Window()
        w.seconds = now - self._window_start
        w.latencies.sort()
        self._window_start = now
        return w


def window_text(w: Window, latency: bool) -> str:
    """The live display's figures for one window."""
    text = f"{w.rate:,.0f} rec/s  {w.mb_per_s:,.2f} MB/s"
    if latency and w.records:
        text += (
            f"  latency avg {w.latency_avg_ms:.1f} p50 {percentile(w.latencies, 0.5):.1f} "
            f"p99 {percentile(w.latencies, 0.99):.1f} max {w.latency_max_ms:.1f} ms"
        )
    return text


def produce_summary(rec: Recorder, seconds: float) -> dict[str, Any]:
    ordered = sorted(rec.samples)
    return {
        "records": rec.records,
        "bytes": rec.bytes,
        "seconds": round(seconds, 3),
        "records_per_second": round(rec.records / seconds, 1) if seconds > 0 else 0.0,
        "mb_per_second": round(rec.bytes / MB / seconds, 3) if seconds > 0 else 0.0,
        "latency_ms": {
            "avg": round(rec.latency_sum_ms / rec.records, 2) if rec.records else 0.0,
            "p50": round(percentile(ordered, 0.5), 2),
            "p95": round(percentile(ordered, 0.95), 2),
            "p99": round(percentile(ordered, 0.99), 2),
            "p999": round(percentile(ordered, 0.999), 2),
            "max": round(rec.latency_max_ms, 2),
        },
    }


def produce_line(s: dict[str, Any]) -> str:
    """kafka-producer-perf-test's final line."""
    lat = s["latency_ms"]
    return (
        f"{s['records']} records sent, {s['records_per_second']:.1f} records/sec "
        f"({s['mb_per_second']:.2f} MB/sec), {lat['avg']:.2f} ms avg latency, "
        f"{lat['max']:.2f} ms max latency, {lat['p50']:.1f} ms 50th, {lat['p95']:.1f} ms 95th, "
        f"{lat['p99']:.1f} ms 99th, {lat['p999']:.1f} ms 99.9th."
    )


def consume_summary(rec: Recorder, seconds: float, first_record_s: float | None) -> dict[str, Any]:
    return {
        "records": rec.records,
        "bytes": rec.bytes,
        "mb": round(rec.bytes / MB, 3),
        "seconds": round(seconds, 3),
        "records_per_second": round(rec.records / seconds, 1) if seconds > 0 else 0.0,
        "mb_per_second": round(rec.bytes / MB / seconds, 3) if seconds > 0 else 0.0,
        "first_record_seconds": None if first_record_s is None else round(first_record_s, 3),
    }


def consume_line(s: dict[str, Any]) -> str:
    """A final line in the manner of kafka-producer-perf-test's, for consuming."""
    first = s["first_record_seconds"]
    return (
        f"{s['records']} records consumed, {s['records_per_second']:.1f} records/sec "
        f"({s['mb_per_second']:.2f} MB/sec), {s['mb']:.2f} MB in {s['seconds']:.2f} s, "
        + ("no record received." if first is None else
           f"{first * 1000:.0f} ms to the first record.")
    )
