"""Producer metrics without a broker: batches counted together per drain read as the
same values as each batch counted alone."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from aiokproto.metrics.producer import GROUP, TOPIC_GROUP, ProducerMetrics
from aiokproto.metrics.registry import MetricsRegistry
from aiokproto.metrics.sensor import Sensor


def _batch(topic: str, records: int, size: int, raw: int, created: float) -> Any:
    builder = SimpleNamespace(record_count=records, estimated_size=raw)
    return SimpleNamespace(
        topic=topic,
        builder=builder,
        record_count=records,
        payload=b"x" * size,
        created=created,
    )


def _values(registry: MetricsRegistry) -> dict[tuple[str, str, str], float]:
    return {(n.name, n.group, n.tag("topic") or ""): v for n, v in registry.snapshot().items()}


@pytest.mark.parametrize("topics", [("a",), ("a", "b")])
def test_batches_sent_together_read_as_each_sent_alone(topics: tuple[str, ...]) -> None:
    now = Sensor()._start + 5.0
    batches = [
        _batch(topics[i % len(topics)], records, size, raw, now - age)
        for i, (records, size, raw, age) in enumerate(
            [(1, 90, 100, 0.004), (7, 300, 600, 0.012), (2, 150, 150, 0.001), (1, 80, 90, 0.02)]
        )
    ]
    together = ProducerMetrics(MetricsRegistry("test"))
    together.batches_sent(batches, now)
    alone = ProducerMetrics(MetricsRegistry("test"))
    for batch in batches:
        alone.batches_sent([batch], now)
    a, b = _values(together.registry), _values(alone.registry)
    assert a.keys() == b.keys()
    for key in a:
        assert a[key] == pytest.approx(b[key], nan_ok=True), key
    assert a[("record-send-total", GROUP, "")] == 11
    assert a[("batch-size-max", GROUP, "")] == 300
    assert a[("record-queue-time-max", GROUP, "")] == pytest.approx(20.0)
    assert a[("record-send-total", TOPIC_GROUP, "a")] == (11 if len(topics) == 1 else 3)


def test_topic_metrics_are_named_on_read_and_read_as_published() -> None:
    """Per-topic sensors are made cheaply at the first send and named on the first
    read; the snapshot carries Java's nine ``producer-topic-metrics`` per topic, with
    errors and retries (sensors made on first use) reading 0 until recorded."""
    reg = MetricsRegistry("c1")
    metrics = ProducerMetrics(reg)
    now = Sensor()._start
    metrics.batches_sent([_batch("t1", 3, 50, 100, now)], now)
    metrics.batches_sent([_batch("t2", 1, 80, 80, now)], now)
    snap = reg.snapshot()
    topic = {m: v for m, v in snap.items() if m.group == TOPIC_GROUP}
    assert {m.tags for m in topic} == {(("client-id", "c1"), ("topic", t)) for t in ("t1", "t2")}
    assert sorted(m.name for m in topic if m.tag("topic") == "t1") == sorted(
        [f"{p}-{s}" for p in ("record-send", "byte", "record-error", "record-retry")
         for s in ("rate", "total")] + ["compression-rate-avg"]
    )  # fmt: skip
    assert snap.value("record-send-total", TOPIC_GROUP, {"topic": "t1"}) == 3
    assert snap.value("byte-total", TOPIC_GROUP, {"topic": "t2"}) == 80
    assert snap.value("compression-rate-avg", TOPIC_GROUP, {"topic": "t1"}) == 0.5
    assert snap.value("record-error-total", TOPIC_GROUP, {"topic": "t1"}) == 0.0
    assert snap.value("record-retry-rate", TOPIC_GROUP, {"topic": "t1"}) == 0.0
    metrics.batch_failed(_batch("t1", 4, 50, 100, now))
    metrics.batch_retried(_batch("t2", 2, 80, 80, now))
    snap = reg.snapshot()
    assert snap.value("record-error-total", TOPIC_GROUP, {"topic": "t1"}) == 4
    assert snap.value("record-retry-total", TOPIC_GROUP, {"topic": "t2"}) == 2
    assert snap.value("record-error-total", GROUP) == 4
    metrics.forget_topic("t1")
    assert {m.tag("topic") for m in reg.snapshot() if m.group == TOPIC_GROUP} == {"t2"}


def test_a_sensor_made_late_reads_as_one_made_at_its_start() -> None:
    """What lets a topic's error and retry sensors be made on first use: a sensor given
    a ``start`` 50 s ago measures its rate from then, as one made then would."""
    start = Sensor()._start - 50.0
    late = Sensor(10.0, 3, start=start)
    late.record(5.0, start + 25.0)
    late.record(7.0, start + 26.0)
    # over the 26 s since the start (more than the 20 s minimum of two windows)
    assert late.rate(start + 26.0) == pytest.approx(12.0 / 26.0)
    assert late.count_rate(start + 26.0) == pytest.approx(2.0 / 26.0)
    assert late.avg(start + 26.0) == 6.0
