"""Named metrics of one client: what ``client.metrics()`` returns.

Names, groups and tags follow Java's client where Java has the metric (for example
``record-send-rate`` in group ``producer-metrics`` with tag ``client-id``), so
dashboards and alerts written for Java clients read ours unchanged.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from aiokproto.metrics.sensor import Sensor

#: The statistics a sensor can be published as, and the suffix Java gives each.
_STATS: Mapping[str, Callable[[Sensor, float], float]] = {
    "rate": Sensor.rate,
    "count-rate": Sensor.count_rate,
    "avg": Sensor.avg,
    "max": Sensor.max,
    "min": Sensor.min,
    "total": lambda s, _now: s.sum_total,
    "count-total": lambda s, _now: float(s.count_total),
}
_SUFFIX = {"count-rate": "rate", "count-total": "total"}


@dataclass(frozen=True, slots=True)
class MetricName:
    """A metric's identity: ``name`` within ``group``, qualified by ``tags``."""

    name: str
    group: str
    tags: tuple[tuple[str, str], ...] = ()
    description: str = field(default="", compare=False, hash=False)

    def tag(self, key: str) -> str | None:
        return dict(self.tags).get(key)

    def __str__(self) -> str:
        tags = ",".join(f"{k}={v}" for k, v in self.tags)
        return f"{self.group}:{self.name}{{{tags}}}"


class MetricsSnapshot(Mapping[MetricName, float]):
    """The values of every metric at one moment; a read-only mapping.

    ``snapshot.value("record-send-rate")`` looks one up by name (and by ``group`` and
    tags when several metrics share the name, e.g. per broker or per partition).
    Averages, maxima and minima are NaN when nothing was recorded in the window, as in
    Java.
    """

    def __init__(self, values: dict[MetricName, float]) -> None:
        self._values = values

    def __getitem__(self, key: MetricName) -> float:
        return self._values[key]

    def __iter__(self) -> Iterator[MetricName]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def find(
        self, name: str, group: str | None = None, tags: Mapping[str, str] | None = None
    ) -> dict[MetricName, float]:
        """Every metric called ``name`` (in ``group``) whose tags include ``tags``."""
        want = dict(tags or {})
        return {
            m: v
            for m, v in self._values.items()
            if m.name == name
            and (group is None or m.group == group)
            and all(m.tag(k) == str(val) for k, val in want.items())
        }

    def value(
        self, name: str, group: str | None = None, tags: Mapping[str, str] | None = None
    ) -> float:
        """The one metric ``name`` matches; ``KeyError`` if none or several do.

        Where a metric exists per client and per topic (``records-consumed-total``), the
        one tagged with exactly ``tags`` (besides ``client-id``) is meant."""
        matches = found = self.find(name, group, tags)
        if len(found) > 1:
            keys = {"client-id", *(tags or {})}
            found = {m: v for m, v in found.items() if {k for k, _ in m.tags} == keys}
        if len(found) == 1:
            return next(iter(found.values()))
        if not matches:
            raise KeyError(f"no metric named {name!r} (group={group!r}, tags={tags!r})")
        # several, none of them tagged with exactly ``tags``: say which tags tell them apart
        seen: dict[str, set[str]] = {}
        for metric in matches:
            for k, v in metric.tags:
                seen.setdefault(k, set()).add(v)
        groups = {m.group for m in matches}
        differ = [k for k, vs in seen.items() if len(vs) > 1]
        differ += [] if len(groups) == 1 else ["group"]
        raise KeyError(
            f"{len(matches)} metrics named {name!r} (group={group!r}, tags={tags!r}); "
            f"pick one by {', '.join(differ) or 'tags'}, or use find()"
        )

    def as_dict(self) -> dict[str, float | None]:
        """``"group:name{tags}" -> value`` with NaN as None: ready for JSON."""
        return {str(m): (None if math.isnan(v) else v) for m, v in self._values.items()}


class MetricsRegistry:
    """The sensors and gauges of one client, read together by :meth:`snapshot`."""

    def __init__(self, client_id: str, *, window_ms: int = 30_000, num_samples: int = 2) -> None:
        self.client_id = client_id
        self.window_s = window_ms / 1000
        self.num_samples = num_samples
        self._metrics: dict[MetricName, Callable[[float], float]] = {}
        # metrics whose set changes (one per assigned partition): read at snapshot time
        self._families: list[Callable[[float], dict[MetricName, float]]] = []

    def name(self, name: str, group: str, description: str = "", **tags: str) -> MetricName:
        """A metric name with the ``client-id`` tag first; tag keys use ``_`` for ``-``."""
        pairs = [("client-id", self.client_id)]
        pairs += [(k.replace("_", "-"), str(v)) for k, v in tags.items()]
        return MetricName(name, group, tuple(pairs), description)

    def sensor(self, start: float | None = None) -> Sensor:
        return Sensor(self.window_s, self.num_samples, start)

    def publish(
        self,
        sensor: Sensor,
        prefix: str,
        group: str,
        stats: tuple[str, ...],
        description: str = "",
        **tags: str,
    ) -> None:
        """Publish ``sensor`` as ``<prefix>-<stat>`` for each of ``stats``."""
        for stat in stats:
            read = _STATS[stat]
            metric = self.name(f"{prefix}-{_SUFFIX.get(stat, stat)}", group, description, **tags)
            self._metrics[metric] = _bind(read, sensor)

    def gauge(
        self, name: str, group: str, read: Callable[[], float], description: str = "", **tags: str
    ) -> None:
        self._metrics[self.name(name, group, description, **tags)] = lambda _now: float(read())

    def family(self, read: Callable[[float], dict[MetricName, float]]) -> None:
        """Metrics computed together at snapshot time, e.g. one per assigned partition."""
        self._families.append(read)

    def remove(self, group: str, **tags: str) -> None:
        """Drop every metric of ``group`` carrying ``tags`` (a closed broker, a revoked
        partition), so a snapshot does not grow without bound."""
        want = {(k.replace("_", "-"), str(v)) for k, v in tags.items()}
        for metric in [m for m in self._metrics if m.group == group]:
            if want <= set(metric.tags):
                del self._metrics[metric]

    def has(self, group: str, **tags: str) -> bool:
        want = {(k.replace("_", "-"), str(v)) for k, v in tags.items()}
        return any(m.group == group and want <= set(m.tags) for m in self._metrics)

    def snapshot(self) -> MetricsSnapshot:
        now = time.monotonic()
        values = {m: read(now) for m, read in list(self._metrics.items())}
        for family in self._families:
            values.update(family(now))
        return MetricsSnapshot(values)


def _bind(read: Callable[[Sensor, float], float], sensor: Sensor) -> Callable[[float], float]:
    return lambda now: read(sensor, now)
