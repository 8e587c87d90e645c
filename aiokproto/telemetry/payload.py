"""KIP-714 payloads: a metrics snapshot as OTLP metrics, compressed as the broker
accepts (pure).

Totals (``...-total``) are monotonic sums, everything else a gauge, as Java's
``KafkaMetricsCollector`` reports them. Sums are cumulative (since the metric was first
seen) or, when the subscription asks for delta temporality, the change since the last
push the broker accepted: ``collect`` returns the new baseline and ``commit`` adopts it
only after a successful push, so a rejected push loses no increment. Metrics without a
value (NaN: nothing recorded in the window) are left out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from aiokproto.metrics.registry import MetricName
from aiokproto.records.compression import CODEC_NAMES, NONE, compress
from aiokproto.telemetry.name import (
    MetricSelector,
    is_cumulative,
    telemetry_attributes,
    telemetry_name,
)
from aiokproto.telemetry.otlp import CUMULATIVE, DELTA, DataPoint, OtlpMetric, encode_metrics_data

_Kind = Literal["gauge", "sum"]
_Baseline = dict[MetricName, tuple[int, float]]  # metric -> (time ns, value) last pushed


@dataclass(frozen=True, slots=True)
class Collected:
    metrics: list[OtlpMetric]
    baseline: _Baseline  # for commit() once the push is accepted
    delta: bool


class TelemetryCollector:
    """Turns snapshots into OTLP metrics, keeping what delta temporality needs."""

    def __init__(self, start_ns: int) -> None:
        self._start_ns = start_ns  # start of every cumulative sum first seen in a collect
        self._first_seen: dict[MetricName, int] = {}
        self._baseline: _Baseline = {}
        self._delta: bool | None = None

    def collect(
        self,
        snapshot: Mapping[MetricName, float],
        selector: MetricSelector,
        delta: bool,
        now_ns: int,
    ) -> Collected:
        if self._delta is not None and delta != self._delta:
            # Java resets its ledger when the temporality changes
            self._baseline.clear()
            self._first_seen.clear()
            self._start_ns = now_ns
        self._delta = delta
        start = self._start_ns
        grouped: dict[tuple[str, _Kind], tuple[str, list[DataPoint]]] = {}
        baseline: _Baseline = {}
        for metric, value in snapshot.items():
            first = self._first_seen.setdefault(metric, start)
            name = telemetry_name(metric)
            if not selector(name) or not math.isfinite(value):
                continue
            kind: _Kind = "sum" if is_cumulative(metric) else "gauge"
            attributes = telemetry_attributes(metric.tags)
            if kind == "gauge":
                point = DataPoint(value, now_ns, 0, attributes)
            elif delta:
                since, last = self._baseline.get(metric, (first, 0.0))
                point = DataPoint(value - last, now_ns, since, attributes)
                baseline[metric] = (now_ns, value)
            else:
                point = DataPoint(value, now_ns, first, attributes)
            grouped.setdefault((name, kind), (metric.description, []))[1].append(point)
        # metrics gone from the registry (a closed broker, a revoked partition) restart
        for metric in [m for m in self._first_seen if m not in snapshot]:
            del self._first_seen[metric]
            self._baseline.pop(metric, None)
        # the next collect's new metrics were registered after this one
        self._start_ns = now_ns
        temporality = DELTA if delta else CUMULATIVE
        metrics = [
            OtlpMetric(name, kind, points, description, temporality)
            for (name, kind), (description, points) in grouped.items()
        ]
        return Collected(metrics, baseline, delta)

    def commit(self, collected: Collected) -> None:
        """The broker accepted the push made of ``collected``: deltas start from it."""
        if collected.delta == self._delta:
            self._baseline.update(collected.baseline)


def choose_compression(accepted: Sequence[int]) -> int:
    """The broker lists the codecs it accepts in order of preference; the first one we
    have, else none."""
    for codec in accepted:
        if codec in CODEC_NAMES and codec != NONE:
            return codec
    return NONE


def build_payload(
    metrics: Sequence[OtlpMetric],
    resource: Sequence[tuple[str, str]],
    scope: tuple[str, str],
    accepted_compression: Sequence[int],
) -> tuple[int, bytes, int]:
    """(codec id, bytes to push, uncompressed size)."""
    raw = encode_metrics_data(metrics, resource, *scope)
    codec = choose_compression(accepted_compression)
    if codec == NONE or not raw:
        return NONE, raw, len(raw)
    return codec, compress(codec, raw), len(raw)
