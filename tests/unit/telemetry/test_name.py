"""KIP-714 names: Java metric names to telemetry names, attributes, RequestedMetrics."""

from __future__ import annotations

import pytest

from aiokproto.metrics.registry import MetricName, MetricsRegistry
from aiokproto.telemetry.name import (
    MetricSelector,
    is_cumulative,
    telemetry_attributes,
    telemetry_name,
)


@pytest.mark.parametrize(
    ("group", "name", "expected"),
    [
        # the examples of KIP-714 and Java's TelemetryMetricNamingConvention
        ("producer-metrics", "record-send-rate", "org.apache.kafka.producer.record.send.rate"),
        ("producer-metrics", "record-send-total", "org.apache.kafka.producer.record.send.total"),
        (
            "producer-metrics",
            "connection-creation-rate",
            "org.apache.kafka.producer.connection.creation.rate",
        ),
        (
            "producer-topic-metrics",
            "record-send-total",
            "org.apache.kafka.producer.topic.record.send.total",
        ),
        (
            "producer-node-metrics",
            "request-latency-avg",
            "org.apache.kafka.producer.node.request.latency.avg",
        ),
        (
            "consumer-metrics",
            "poll-idle-ratio-avg",
            "org.apache.kafka.consumer.poll.idle.ratio.avg",
        ),
        (
            "consumer-fetch-manager-metrics",
            "fetch-latency-avg",
            "org.apache.kafka.consumer.fetch.manager.fetch.latency.avg",
        ),
        (
            "consumer-coordinator-metrics",
            "commit-latency-max",
            "org.apache.kafka.consumer.coordinator.commit.latency.max",
        ),
        ("admin-client-metrics", "request-total", "org.apache.kafka.admin.client.request.total"),
        ("Producer-Metrics", "Record-Send-Rate", "org.apache.kafka.producer.record.send.rate"),
    ],
)
def test_java_names_become_telemetry_names(group: str, name: str, expected: str) -> None:
    assert telemetry_name(MetricName(name, group)) == expected


def test_tags_become_snake_case_attributes_without_client_id() -> None:
    reg = MetricsRegistry("my-client")
    metric = reg.name("request-total", "producer-node-metrics", node_id="node-1")
    assert metric.tags == (("client-id", "my-client"), ("node-id", "node-1"))
    assert telemetry_attributes(metric.tags) == (("node_id", "node-1"),)
    assert telemetry_attributes([("Topic", "t-1"), ("partition", "3")]) == (
        ("topic", "t-1"),
        ("partition", "3"),
    )


def test_totals_are_sums_and_everything_else_gauges() -> None:
    assert is_cumulative(MetricName("record-send-total", "producer-metrics"))
    assert is_cumulative(MetricName("connection-close-total", "producer-metrics"))
    for name in ("record-send-rate", "batch-size-avg", "batch-size-max", "buffer-total-bytes"):
        assert not is_cumulative(MetricName(name, "producer-metrics"))


def test_requested_metrics_empty_selects_nothing() -> None:
    none = MetricSelector.from_requested([])
    assert none.nothing and not none("org.apache.kafka.producer.record.send.rate")
    assert MetricSelector.from_requested(None).nothing


@pytest.mark.parametrize("everything", [["*"], [""]])
def test_requested_metrics_star_or_one_empty_string_selects_everything(
    everything: list[str],
) -> None:
    sel = MetricSelector.from_requested(everything)
    assert sel.everything and not sel.nothing
    assert sel("org.apache.kafka.producer.record.send.rate")
    assert sel("anything")


def test_requested_metrics_are_prefixes() -> None:
    sel = MetricSelector.from_requested(
        ["org.apache.kafka.producer.record.send", "org.apache.kafka.consumer.fetch.manager."]
    )
    assert not sel.nothing and not sel.everything
    assert sel("org.apache.kafka.producer.record.send.rate")
    assert sel("org.apache.kafka.producer.record.send.total")
    assert sel("org.apache.kafka.consumer.fetch.manager.fetch.latency.avg")
    assert not sel("org.apache.kafka.producer.record.error.rate")
    assert not sel("org.apache.kafka.producer.topic.record.send.total")
    assert not sel("org.apache.kafka.consumer.coordinator.commit.latency.max")
    # a prefix is matched as text: "*" among other prefixes is no wildcard
    star = MetricSelector.from_requested(["*", "org.apache.kafka.admin."])
    assert not star("org.apache.kafka.producer.record.send.rate")
    assert star("org.apache.kafka.admin.client.request.total")
