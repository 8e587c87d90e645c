"""KIP-714 metric names: Java's ``group``/``name`` to the telemetry (OpenTelemetry) name,
tags to attributes, and which metrics a subscription asks for (pure).

The mapping is Java's ``TelemetryMetricNamingConvention``: the domain
``org.apache.kafka``, then the group in lower case with ``-`` as ``.`` and the word
``metrics`` dropped, then the name the same way. So ``record-send-rate`` of
``producer-metrics`` is ``org.apache.kafka.producer.record.send.rate`` and
``fetch-latency-avg`` of ``consumer-fetch-manager-metrics`` is
``org.apache.kafka.consumer.fetch.manager.fetch.latency.avg``. Tag keys become
snake_case attributes; ``client_id`` is left out (the broker knows it from the request).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from aiokproto.metrics.registry import MetricName

DOMAIN = "org.apache.kafka"

#: Java's GROUP_PATTERN: ``.metrics`` is redundant in a telemetry name
_GROUP_WORD = re.compile(r"\.metrics")
#: attributes the broker adds itself from the request context
EXCLUDED_ATTRIBUTES = frozenset({"client_id"})


def _clean(raw: str, joiner: str) -> str:
    return raw.lower().replace("-", joiner)


def telemetry_name(metric: MetricName, domain: str = DOMAIN) -> str:
    """``org.apache.kafka.<group>.<name>`` as Java's client names the metric."""
    group = _GROUP_WORD.sub("", _clean(metric.group, "."))
    return f"{domain}.{group}.{_clean(metric.name, '.')}"


def telemetry_attributes(tags: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """Tags as attributes: keys in snake_case, ``client_id`` left out."""
    out = []
    for key, value in tags:
        name = _clean(key, "_")
        if name not in EXCLUDED_ATTRIBUTES:
            out.append((name, value))
    return tuple(out)


def is_cumulative(metric: MetricName) -> bool:
    """A monotonic total (``...-total``, Java's CumulativeSum/CumulativeCount): an OTLP
    sum. Everything else (rates, averages, maxima, gauges) is an OTLP gauge."""
    return metric.name.endswith("-total")


@dataclass(frozen=True, slots=True)
class MetricSelector:
    """Which telemetry names a subscription's RequestedMetrics select.

    An empty list selects nothing; a single ``"*"`` (what Apache brokers send) or a
    single empty string (what the protocol's spec says) selects everything; otherwise a
    name is selected when it starts with one of the prefixes.
    """

    prefixes: tuple[str, ...]
    everything: bool = False

    @classmethod
    def from_requested(cls, requested: Sequence[str] | None) -> MetricSelector:
        items = tuple(requested or ())
        if len(items) == 1 and items[0] in ("*", ""):
            return cls((), everything=True)
        return cls(items)

    @property
    def nothing(self) -> bool:
        return not self.everything and not self.prefixes

    def __call__(self, name: str) -> bool:
        return self.everything or any(name.startswith(p) for p in self.prefixes)
