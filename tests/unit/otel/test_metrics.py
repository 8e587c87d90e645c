"""``client.metrics()`` as OpenTelemetry instruments: only the finest granularity of a
count is kept."""

from __future__ import annotations

from aiokproto.metrics.registry import MetricName
from aiokproto.otel.metrics import _finest


def test_only_the_finest_granularity_of_a_count_is_kept() -> None:
    client = MetricName("records-consumed-total", "g", (("client-id", "c"),))
    topic_a = MetricName("records-consumed-total", "g", (("client-id", "c"), ("topic", "a")))
    topic_b = MetricName("records-consumed-total", "g", (("client-id", "c"), ("topic", "b")))
    assert _finest([(client, 5.0), (topic_a, 2.0), (topic_b, 3.0)]) == [
        (topic_a, 2.0),
        (topic_b, 3.0),
    ]
    assert _finest([(client, 5.0)]) == [(client, 5.0)]
    other = MetricName("records-consumed-total", "g", (("client-id", "d"),))
    assert _finest([(client, 5.0), (other, 1.0)]) == [(client, 5.0), (other, 1.0)]
