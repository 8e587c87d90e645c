"""Consumer metrics under Java's names.

- ``consumer-fetch-manager-metrics``: fetches (``fetch-rate``, ``fetch-latency-avg``,
  ``fetch-size-avg``), records handed to the application (``records-consumed-rate``),
  fetched bytes not yet handed out (``fetch-buffer-bytes``, bounded by
  ``fetch-buffer-max-bytes``),
  bytes fetched (``bytes-consumed-rate``), ``records-lag-max`` / ``records-lead-min``;
  per topic, and per partition (``records-lag``, ``records-lead``, read from the
  partition's state at snapshot time, so revoked partitions simply disappear);
- ``consumer-coordinator-metrics``: rebalances, commits, heartbeats, listener times,
  ``assigned-partitions``;
- ``consumer-metrics``: ``last-poll-seconds-ago``, ``time-between-poll-avg/max``.

Recorded per fetch, per partition handed out and per group request; never per record.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from aiokproto.metrics.registry import MetricName, MetricsRegistry
from aiokproto.metrics.sensor import Sensor

if TYPE_CHECKING:
    from aiokproto.consumer.subscription import PartitionState
    from aiokproto.structs import TopicPartition

FETCH_GROUP = "consumer-fetch-manager-metrics"
COORDINATOR_GROUP = "consumer-coordinator-metrics"
CONSUMER_GROUP = "consumer-metrics"
SHARE_FETCH_GROUP = "consumer-share-fetch-manager-metrics"
SHARE_GROUP = "consumer-share-metrics"
_RATE_TOTAL = ("rate", "total")
_COUNT_RATE_TOTAL = ("count-rate", "count-total")


class _TopicSensors:
    __slots__ = ("bytes", "records")

    def __init__(self, reg: MetricsRegistry, group: str, topic: str) -> None:
        self.records = reg.sensor()
        self.bytes = reg.sensor()
        reg.publish(self.records, "records-consumed", group, _RATE_TOTAL, topic=topic)
        reg.publish(self.bytes, "bytes-consumed", group, _RATE_TOTAL, topic=topic)


class FetchMetrics:
    """What the fetcher and ``drain`` record."""

    def __init__(self, registry: MetricsRegistry, group: str = FETCH_GROUP) -> None:
        self.registry = reg = registry
        self.group = group
        self._topics: dict[str, _TopicSensors] = {}
        self.records = reg.sensor()
        self.bytes = reg.sensor()
        self.fetches = reg.sensor()  # value: bytes of records in the answer
        self.latency = reg.sensor()
        self.per_request = reg.sensor()
        self.lag = reg.sensor()
        self.lead = reg.sensor()
        self.throttle = reg.sensor()
        reg.publish(self.records, "records-consumed", group, _RATE_TOTAL, "records handed out")
        reg.publish(self.bytes, "bytes-consumed", group, _RATE_TOTAL, "record bytes fetched")
        reg.publish(self.fetches, "fetch", group, _COUNT_RATE_TOTAL, "fetch requests answered")
        reg.publish(self.fetches, "fetch-size", group, ("avg", "max"), "record bytes per fetch")
        reg.publish(self.latency, "fetch-latency", group, ("avg", "max"), "ms per fetch")
        reg.publish(self.per_request, "records-per-request", group, ("avg",))
        reg.publish(self.lag, "records-lag", group, ("max",), "high watermark - position")
        reg.publish(self.lead, "records-lead", group, ("min",), "position - log start")
        reg.publish(self.throttle, "fetch-throttle-time", group, ("avg", "max"), "ms")

    def per_partition(
        self, states: Callable[[], Iterable[tuple[TopicPartition, PartitionState]]]
    ) -> None:
        """Publish ``records-lag`` and ``records-lead`` of each assigned partition."""
        group, client_id = self.group, self.registry.client_id

        def read(_now: float) -> dict[MetricName, float]:
            out: dict[MetricName, float] = {}
            for tp, state in states():
                tags = (
                    ("client-id", client_id),
                    ("topic", tp.topic),
                    ("partition", str(tp.partition)),
                )
                if state.highwater is not None and state.position is not None:
                    out[MetricName("records-lag", group, tags)] = float(
                        max(0, state.highwater - state.position)
                    )
                if state.log_start_offset is not None and state.position is not None:
                    out[MetricName("records-lead", group, tags)] = float(
                        state.position - state.log_start_offset
                    )
            return out

        self.registry.family(read)

    def buffer_gauges(self, buffered: Callable[[], int], limit: int) -> None:
        """Publish the bytes fetched and not yet handed out, and their bound."""
        reg, group = self.registry, self.group
        reg.gauge("fetch-buffer-bytes", group, buffered, "fetched bytes not yet handed out")
        reg.gauge(
            "fetch-buffer-max-bytes", group, lambda: limit, "the bound on fetch-buffer-bytes"
        )

    def _topic(self, topic: str) -> _TopicSensors:
        found = self._topics.get(topic)
        if found is None:
            found = self._topics[topic] = _TopicSensors(self.registry, self.group, topic)
        return found

    def fetched(self, latency_s: float, record_bytes: int, throttle_ms: int) -> None:
        """One fetch answered: its latency and the record bytes it carried."""
        self.fetches.record(record_bytes)
        self.latency.record(latency_s * 1000)
        self.throttle.record(throttle_ms)

    def partition_fetched(self, topic: str, nbytes: int) -> None:
        self.bytes.record(nbytes)
        self._topic(topic).bytes.record(nbytes)

    def handed_out(self, topic: str, count: int, lag: int | None, lead: int | None) -> None:
        """``count`` records of one partition reached the application."""
        self.records.record(count)
        self._topic(topic).records.record(count)
        if lag is not None:
            self.lag.record(lag)
        if lead is not None:
            self.lead.record(lead)

    def not_handed_out(self, topics: Iterable[str]) -> None:
        """Records counted when ``async for`` took them (up to ``max_poll_records`` at a
        time) were dropped before the application saw them (a seek, pause, rebalance or
        stop): uncounted, one ``topics`` entry per record, so ``records-consumed-total``
        is what the application received. Runs on those rare calls, not per poll."""
        per_topic: dict[str, int] = {}
        for topic in topics:
            per_topic[topic] = per_topic.get(topic, 0) + 1
        for topic, count in per_topic.items():
            self.records.record(-count)
            self._topic(topic).records.record(-count)

    def drained(self, count: int) -> None:
        """One poll handed out ``count`` records (Java's records-per-request is per fetch;
        ours counts what each poll returned, the closest cheap measure)."""
        self.per_request.record(count)


class ShareFetchMetrics(FetchMetrics):
    """The share consumer's fetches, plus its acknowledgements (Java's
    ``acknowledgements-send-rate`` / ``acknowledgements-error-rate``)."""

    def __init__(self, registry: MetricsRegistry) -> None:
        super().__init__(registry, SHARE_FETCH_GROUP)
        self.acks = registry.sensor()
        self.ack_errors = registry.sensor()
        group = self.group
        registry.publish(self.acks, "acknowledgements-send", group, _RATE_TOTAL)
        registry.publish(self.ack_errors, "acknowledgements-error", group, _RATE_TOTAL)

    def acknowledged(self, sent: int, failed: int) -> None:
        self.acks.record(sent)
        if failed:
            self.ack_errors.record(failed)


class PollMetrics:
    """``consumer-metrics``: how often the application polls."""

    def __init__(self, registry: MetricsRegistry, group: str = CONSUMER_GROUP) -> None:
        self.between = registry.sensor()
        self._last = 0.0
        registry.publish(self.between, "time-between-poll", group, ("avg", "max"), "ms")
        registry.gauge(
            "last-poll-seconds-ago",
            group,
            lambda: time.monotonic() - self._last if self._last else -1.0,
            "seconds since the application last polled (-1: never)",
        )

    def polled(self) -> None:
        now = time.monotonic()
        if self._last:
            self.between.record((now - self._last) * 1000, now)
        self._last = now


class CoordinatorMetrics:
    """Group membership: rebalances, commits, heartbeats, listener calls."""

    def __init__(
        self,
        registry: MetricsRegistry,
        assigned: Callable[[], int],
        group: str = COORDINATOR_GROUP,
    ) -> None:
        reg = self.registry = registry
        self.rebalances = reg.sensor()
        self.commits = reg.sensor()
        self.heartbeats = reg.sensor()
        self._listeners: dict[str, Sensor] = {}
        self._rebalance_from: float | None = None
        self._last_rebalance = 0.0
        self._last_heartbeat = 0.0
        self.group = group
        reg.publish(self.rebalances, "rebalance-latency", group, ("avg", "max"), "ms")
        reg.publish(self.rebalances, "rebalance-latency", group, ("total",), "ms, all rebalances")
        reg.publish(self.rebalances, "rebalance", group, ("count-total",), "rebalances completed")
        reg.gauge("rebalance-rate-per-hour", group, lambda: self.rebalances.count_rate() * 3600)
        reg.publish(self.commits, "commit-latency", group, ("avg", "max"), "ms per OffsetCommit")
        reg.publish(self.commits, "commit", group, _COUNT_RATE_TOTAL, "OffsetCommit requests")
        reg.publish(self.heartbeats, "heartbeat", group, _COUNT_RATE_TOTAL, "heartbeats answered")
        reg.publish(self.heartbeats, "heartbeat-response-time", group, ("max",), "ms")
        reg.gauge("assigned-partitions", group, assigned, "partitions the group assigned us")
        reg.gauge("last-rebalance-seconds-ago", group, lambda: _ago(self._last_rebalance))
        reg.gauge("last-heartbeat-seconds-ago", group, lambda: _ago(self._last_heartbeat))
        for kind in ("assigned", "revoked", "lost"):
            sensor = self._listeners[f"on_partitions_{kind}"] = reg.sensor()
            reg.publish(sensor, f"partition-{kind}-latency", group, ("avg", "max"), "ms")

    def rebalance_started(self) -> None:
        if self._rebalance_from is None:
            self._rebalance_from = time.monotonic()

    def rebalance_done(self) -> None:
        started, self._rebalance_from = self._rebalance_from, None
        if started is not None:
            now = self._last_rebalance = time.monotonic()
            self.rebalances.record((now - started) * 1000, now)

    def listener_ran(self, name: str, seconds: float) -> None:
        sensor = self._listeners.get(name)
        if sensor is not None:
            sensor.record(seconds * 1000)

    def committed(self, seconds: float) -> None:
        self.commits.record(seconds * 1000)

    def heartbeat(self, seconds: float) -> None:
        now = self._last_heartbeat = time.monotonic()
        self.heartbeats.record(seconds * 1000, now)


def _ago(when: float) -> float:
    """Seconds since ``when`` (monotonic), -1 if it never happened (Java's convention)."""
    return time.monotonic() - when if when else -1.0
