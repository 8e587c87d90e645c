"""Producer metrics under Java's names (groups ``producer-metrics`` and
``producer-topic-metrics``).

Recorded once per batch, never per record: a batch's first send counts its records as
sent (``record-send-*``, as Java's Sender does), a resend counts them as retried, a
failure as errors.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from aiokproto.metrics.registry import MetricName, MetricsRegistry
from aiokproto.metrics.sensor import Sensor

if TYPE_CHECKING:
    from aiokproto.producer.batch import ProducerBatch

GROUP = "producer-metrics"
TOPIC_GROUP = "producer-topic-metrics"
_RATE_TOTAL = ("rate", "total")
#: what each topic's ``_TopicSensors.read`` returns, in order
_TOPIC_NAMES = (
    "record-send-rate", "record-send-total", "byte-rate", "byte-total",
    "record-error-rate", "record-error-total", "record-retry-rate", "record-retry-total",
    "compression-rate-avg",
)  # fmt: skip
_monotonic = time.monotonic


class _TopicSensors:
    """One topic's sensors. Made when the producer first sends to the topic, so it
    costs little (a service's cold start meets hundreds of topics at once): the error
    and retry sensors are made when first recorded or read (with the topic's start,
    so they read as if made with it) and the metric names on the first read."""

    __slots__ = ("_errors", "_retries", "bytes", "compression", "names", "sends", "start")

    def __init__(self, reg: MetricsRegistry) -> None:
        self.start = start = _monotonic()
        self.sends = reg.sensor(start)
        self.bytes = reg.sensor(start)
        self.compression = reg.sensor(start)
        self._errors: Sensor | None = None
        self._retries: Sensor | None = None
        self.names: tuple[MetricName, ...] = ()

    def errors(self, reg: MetricsRegistry) -> Sensor:
        if self._errors is None:
            self._errors = reg.sensor(self.start)
        return self._errors

    def retries(self, reg: MetricsRegistry) -> Sensor:
        if self._retries is None:
            self._retries = reg.sensor(self.start)
        return self._retries

    def read(self, reg: MetricsRegistry, topic: str, now: float) -> dict[MetricName, float]:
        """The topic's metrics, as ``publish`` would name them (Java's
        ``producer-topic-metrics``, tagged ``client-id`` and ``topic``)."""
        if not self.names:
            self.names = tuple(reg.name(name, TOPIC_GROUP, topic=topic) for name in _TOPIC_NAMES)
        sends, size, errors, retries = self.sends, self.bytes, self.errors(reg), self.retries(reg)
        values = (
            sends.rate(now), sends.sum_total, size.rate(now), size.sum_total,
            errors.rate(now), errors.sum_total, retries.rate(now), retries.sum_total,
            self.compression.avg(now),
        )  # fmt: skip
        return dict(zip(self.names, values, strict=True))


class ProducerMetrics:
    def __init__(self, registry: MetricsRegistry) -> None:
        self.registry = reg = registry
        self._topics: dict[str, _TopicSensors] = {}
        self.sends = reg.sensor()
        self.errors = reg.sensor()
        self.retries = reg.sensor()
        self.batch_size = reg.sensor()
        self.compression = reg.sensor()
        self.queue_time = reg.sensor()
        self.per_request = reg.sensor()
        self.throttle = reg.sensor()
        reg.family(self._read_topics)
        reg.publish(self.sends, "record-send", GROUP, _RATE_TOTAL, "records sent")
        reg.publish(self.errors, "record-error", GROUP, _RATE_TOTAL, "records that failed")
        reg.publish(self.retries, "record-retry", GROUP, _RATE_TOTAL, "records sent again")
        reg.publish(self.batch_size, "batch-size", GROUP, ("avg", "max"), "bytes per batch")
        reg.publish(
            self.compression, "compression-rate", GROUP, ("avg",), "compressed/uncompressed"
        )
        reg.publish(self.queue_time, "record-queue-time", GROUP, ("avg", "max"), "ms buffered")
        reg.publish(self.per_request, "records-per-request", GROUP, ("avg",))
        reg.publish(self.throttle, "produce-throttle-time", GROUP, ("avg", "max"), "ms")

    def gauges(
        self,
        *,
        available: Callable[[], float],
        total: Callable[[], float],
        waiting: Callable[[], float],
        in_flight: Callable[[], float],
    ) -> None:
        reg = self.registry
        reg.gauge("buffer-available-bytes", GROUP, available, "buffer memory not in use")
        reg.gauge("buffer-total-bytes", GROUP, total, "buffer_memory")
        reg.gauge("waiting-threads", GROUP, waiting, "send() calls waiting for buffer memory")
        reg.gauge("requests-in-flight", GROUP, in_flight, "produce requests awaiting answers")

    def _topic(self, topic: str) -> _TopicSensors:
        found = self._topics.get(topic)
        if found is None:
            found = self._topics[topic] = _TopicSensors(self.registry)
        return found

    def _read_topics(self, now: float) -> dict[MetricName, float]:
        """``producer-topic-metrics`` of every topic sent to: named and computed when
        read, not when the topic is first seen."""
        reg, out = self.registry, {}
        for topic, sensors in list(self._topics.items()):
            out.update(sensors.read(reg, topic, now))
        return out

    def forget_topic(self, topic: str) -> None:
        """Drop a topic's metrics (the producer no longer uses it)."""
        self._topics.pop(topic, None)

    def batches_sent(self, batches: list[ProducerBatch], now: float) -> None:
        """Batches leaving for the first time together (built, ``now`` on the loop's
        clock): each counts as one value of each sensor (its records, its size, its
        compression ratio, its records' time in the buffer), recorded at once per
        sensor (at 1,000 partitions, seven recordings per one-record batch were ~7% of
        the producer's CPU)."""
        records = 0
        most, fewest = -math.inf, math.inf
        sizes = 0
        big, small = -math.inf, math.inf
        ratios = 0.0
        ratio_max, ratio_min = -math.inf, math.inf
        oldest = newest = batches[0].created
        created = 0.0
        topic = batches[0].topic
        mixed = False
        for batch in batches:
            builder = batch.builder
            count = builder.record_count
            size = len(batch.payload or b"")
            ratio = size / (builder.estimated_size or size or 1)
            records += count
            if count > most:
                most = count
            if count < fewest:
                fewest = count
            sizes += size
            if size > big:
                big = size
            if size < small:
                small = size
            ratios += ratio
            if ratio > ratio_max:
                ratio_max = ratio
            if ratio < ratio_min:
                ratio_min = ratio
            at = batch.created
            created += at
            if at < oldest:
                oldest = at
            elif at > newest:
                newest = at
            if batch.topic != topic:
                mixed = True
        n = len(batches)
        self.sends.record_many(n, records, most, fewest, now)
        self.batch_size.record_many(n, sizes, big, small, now)
        self.compression.record_many(n, ratios, ratio_max, ratio_min, now)
        self.queue_time.record_many(
            n, (n * now - created) * 1000, (now - oldest) * 1000, (now - newest) * 1000, now
        )
        if mixed:  # more than one topic: each its own
            for batch in batches:
                self._topic_sent(batch, now)
            return
        t = self._topics.get(topic) or self._topic(topic)
        t.sends.record_many(n, records, most, fewest, now)
        t.bytes.record_many(n, sizes, big, small, now)
        t.compression.record_many(n, ratios, ratio_max, ratio_min, now)

    def _topic_sent(self, batch: ProducerBatch, now: float) -> None:
        size = len(batch.payload or b"")
        t = self._topics.get(batch.topic) or self._topic(batch.topic)
        t.sends.record(batch.record_count, now)
        t.bytes.record(size, now)
        t.compression.record(size / (batch.builder.estimated_size or size or 1), now)

    def batch_retried(self, batch: ProducerBatch) -> None:
        self.retries.record(batch.record_count)
        self._topic(batch.topic).retries(self.registry).record(batch.record_count)

    def batch_failed(self, batch: ProducerBatch) -> None:
        self.errors.record(batch.record_count)
        self._topic(batch.topic).errors(self.registry).record(batch.record_count)

    def request_sent(self, records: int) -> None:
        self.per_request.record(records)

    def throttled(self, ms: float) -> None:
        self.throttle.record(ms)
