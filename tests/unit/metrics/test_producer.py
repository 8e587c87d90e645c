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
