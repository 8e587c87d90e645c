"""The hand-written OTLP encoder, decoded with the official opentelemetry-proto package,
and the collector that turns snapshots into OTLP metrics (no sockets)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiokproto.metrics.registry import MetricsRegistry
from aiokproto.records.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD, decompress
from aiokproto.telemetry.name import MetricSelector
from aiokproto.telemetry.otlp import CUMULATIVE, DELTA, DataPoint, OtlpMetric, encode_metrics_data
from aiokproto.telemetry.payload import (
    TelemetryCollector,
    build_payload,
    choose_compression,
)

metrics_pb2 = pytest.importorskip("opentelemetry.proto.metrics.v1.metrics_pb2")

ALL = MetricSelector.from_requested(["*"])
T0 = 1_700_000_000_000_000_000


def decode(data: bytes) -> Any:
    return metrics_pb2.MetricsData.FromString(data)


def attrs(kvs: Any) -> list[tuple[str, str]]:
    return [(kv.key, kv.value.string_value) for kv in kvs]


def by_name(data: Any) -> dict[str, Any]:
    (rm,) = data.resource_metrics
    (sm,) = rm.scope_metrics
    return {m.name: m for m in sm.metrics}


def test_gauges_and_sums_decode_with_opentelemetry_proto() -> None:
    metrics = [
        OtlpMetric(
            "org.apache.kafka.producer.record.send.rate",
            "gauge",
            [DataPoint(12.5, T0 + 5, 0, ())],
            description="records sent",
        ),
        OtlpMetric(
            "org.apache.kafka.producer.record.send.total",
            "sum",
            [DataPoint(2000.0, T0 + 5, T0, ())],
            temporality=CUMULATIVE,
        ),
        OtlpMetric(
            "org.apache.kafka.producer.topic.record.send.total",
            "sum",
            [
                DataPoint(3.0, T0 + 5, T0 + 1, (("topic", "a"),)),
                DataPoint(4.0, T0 + 5, T0 + 2, (("topic", "b"),)),
            ],
            temporality=DELTA,
        ),
        OtlpMetric(
            "org.apache.kafka.producer.node.request.latency.avg",
            "gauge",
            [DataPoint(-0.0, T0, 0, (("node_id", "node-1"), ("empty", "")))],
        ),
    ]
    data = decode(
        encode_metrics_data(
            metrics,
            resource=(("transactional_id", "tx-1"), ("client_rack", "rack-é")),
            scope_name="aiokproto",
            scope_version="0.1.0",
        )
    )
    (rm,) = data.resource_metrics
    assert attrs(rm.resource.attributes) == [
        ("transactional_id", "tx-1"),
        ("client_rack", "rack-é"),
    ]
    (sm,) = rm.scope_metrics
    assert (sm.scope.name, sm.scope.version) == ("aiokproto", "0.1.0")
    found = by_name(data)
    assert list(found) == [m.name for m in metrics]

    rate = found["org.apache.kafka.producer.record.send.rate"]
    assert rate.WhichOneof("data") == "gauge" and rate.description == "records sent"
    (p,) = rate.gauge.data_points
    assert p.WhichOneof("value") == "as_double" and p.as_double == 12.5
    assert p.time_unix_nano == T0 + 5 and p.start_time_unix_nano == 0 and not p.attributes

    total = found["org.apache.kafka.producer.record.send.total"]
    assert total.WhichOneof("data") == "sum"
    assert total.sum.is_monotonic
    assert total.sum.aggregation_temporality == metrics_pb2.AGGREGATION_TEMPORALITY_CUMULATIVE
    (p,) = total.sum.data_points
    assert (p.as_double, p.start_time_unix_nano, p.time_unix_nano) == (2000.0, T0, T0 + 5)

    topic = found["org.apache.kafka.producer.topic.record.send.total"]
    assert topic.sum.aggregation_temporality == metrics_pb2.AGGREGATION_TEMPORALITY_DELTA
    assert [(attrs(p.attributes), p.as_double) for p in topic.sum.data_points] == [
        ([("topic", "a")], 3.0),
        ([("topic", "b")], 4.0),
    ]

    node = found["org.apache.kafka.producer.node.request.latency.avg"]
    (p,) = node.gauge.data_points
    assert attrs(p.attributes) == [("node_id", "node-1"), ("empty", "")]
    # a value every decoder reads back bit for bit
    assert math.copysign(1.0, p.as_double) == -1.0


def test_no_metrics_is_an_empty_message() -> None:
    assert encode_metrics_data([]) == b""
    assert not decode(b"").resource_metrics


_text = st.text(max_size=20)
_point = st.builds(
    DataPoint,
    value=st.floats(allow_nan=False),
    time_ns=st.integers(0, 2**64 - 1),
    start_ns=st.integers(0, 2**64 - 1),
    attributes=st.lists(st.tuples(_text, _text), max_size=3),
)
_metric = st.builds(
    OtlpMetric,
    name=_text,
    kind=st.sampled_from(["gauge", "sum"]),
    points=st.lists(_point, min_size=1, max_size=3),
    description=_text,
    temporality=st.sampled_from([DELTA, CUMULATIVE]),
)


@settings(max_examples=200, deadline=None)
@given(
    metrics=st.lists(_metric, min_size=1, max_size=4),
    resource=st.lists(st.tuples(_text, _text), max_size=3),
)
def test_whatever_is_encoded_decodes_to_the_same(
    metrics: list[OtlpMetric], resource: list[tuple[str, str]]
) -> None:
    data = decode(encode_metrics_data(metrics, resource, "s", "v"))
    (rm,) = data.resource_metrics
    assert attrs(rm.resource.attributes) == resource
    (sm,) = rm.scope_metrics
    assert len(sm.metrics) == len(metrics)
    for got, want in zip(sm.metrics, metrics, strict=True):
        assert (got.name, got.description) == (want.name, want.description)
        assert got.WhichOneof("data") == want.kind
        body = got.gauge if want.kind == "gauge" else got.sum
        if want.kind == "sum":
            assert body.aggregation_temporality == want.temporality and body.is_monotonic
        assert [
            (p.as_double, p.time_unix_nano, p.start_time_unix_nano, attrs(p.attributes))
            for p in body.data_points
        ] == [(p.value, p.time_ns, p.start_ns, list(p.attributes)) for p in want.points]


# -- the collector ---------------------------------------------------------------------


def _registry() -> tuple[MetricsRegistry, Any, Any]:
    reg = MetricsRegistry("c1")
    sends = reg.sensor()
    topic = reg.sensor()
    reg.publish(sends, "record-send", "producer-metrics", ("rate", "total"), "records sent")
    reg.publish(topic, "record-send", "producer-topic-metrics", ("total",), topic="t1")
    latency = reg.sensor()
    reg.publish(latency, "request-latency", "producer-metrics", ("avg", "max"))
    reg.gauge("buffer-total-bytes", "producer-metrics", lambda: 1024)
    return reg, sends, topic


def _points(collected: Any) -> dict[str, tuple[str, list[DataPoint]]]:
    return {m.name: (m.kind, list(m.points)) for m in collected.metrics}


def test_cumulative_sums_count_since_the_start_and_gauges_are_values() -> None:
    reg, sends, topic = _registry()
    collector = TelemetryCollector(T0)
    sends.record(5)
    topic.record(5)
    got = _points(collector.collect(reg.snapshot(), ALL, False, T0 + 10))
    assert got["org.apache.kafka.producer.record.send.total"] == (
        "sum",
        [DataPoint(5.0, T0 + 10, T0, ())],
    )
    assert got["org.apache.kafka.producer.topic.record.send.total"] == (
        "sum",
        [DataPoint(5.0, T0 + 10, T0, (("topic", "t1"),))],
    )
    kind, (rate,) = got["org.apache.kafka.producer.record.send.rate"]
    assert kind == "gauge" and rate.value > 0 and rate.start_ns == 0
    assert got["org.apache.kafka.producer.buffer.total.bytes"] == (
        "gauge",
        [DataPoint(1024.0, T0 + 10, 0, ())],
    )
    # nothing recorded in the window: NaN averages are left out
    assert "org.apache.kafka.producer.request.latency.avg" not in got
    sends.record(3)
    got = _points(collector.collect(reg.snapshot(), ALL, False, T0 + 20))
    assert got["org.apache.kafka.producer.record.send.total"][1] == [
        DataPoint(8.0, T0 + 20, T0, ())
    ]
    temporalities = {
        m.temporality for m in collector.collect(reg.snapshot(), ALL, False, T0).metrics
    }
    assert temporalities == {CUMULATIVE}


def test_delta_sums_count_since_the_last_accepted_push() -> None:
    reg, sends, _ = _registry()
    collector = TelemetryCollector(T0)
    sends.record(5)
    first = collector.collect(reg.snapshot(), ALL, True, T0 + 10)
    total = "org.apache.kafka.producer.record.send.total"
    assert _points(first)[total][1] == [DataPoint(5.0, T0 + 10, T0, ())]
    assert {m.temporality for m in first.metrics} == {DELTA}
    collector.commit(first)
    sends.record(2)
    rejected = collector.collect(reg.snapshot(), ALL, True, T0 + 20)
    assert _points(rejected)[total][1] == [DataPoint(2.0, T0 + 20, T0 + 10, ())]
    # not committed (the broker refused that push): the next delta covers both
    sends.record(1)
    second = collector.collect(reg.snapshot(), ALL, True, T0 + 30)
    assert _points(second)[total][1] == [DataPoint(3.0, T0 + 30, T0 + 10, ())]
    collector.commit(second)
    third = collector.collect(reg.snapshot(), ALL, True, T0 + 40)
    assert _points(third)[total][1] == [DataPoint(0.0, T0 + 40, T0 + 30, ())]


def test_a_temporality_change_starts_over() -> None:
    reg, sends, _ = _registry()
    collector = TelemetryCollector(T0)
    sends.record(5)
    collector.commit(collector.collect(reg.snapshot(), ALL, True, T0 + 10))
    sends.record(1)
    got = _points(collector.collect(reg.snapshot(), ALL, False, T0 + 20))
    assert got["org.apache.kafka.producer.record.send.total"][1] == [
        DataPoint(6.0, T0 + 20, T0 + 20, ())
    ]


def test_metrics_registered_later_start_at_the_previous_collect_and_removed_ones_restart() -> None:
    reg, _, _ = _registry()
    collector = TelemetryCollector(T0)
    collector.collect(reg.snapshot(), ALL, False, T0 + 10)
    node = reg.sensor()
    reg.publish(node, "request", "producer-node-metrics", ("total",), node_id="node-1")
    node.record(1)
    name = "org.apache.kafka.producer.node.request.total"
    got = _points(collector.collect(reg.snapshot(), ALL, False, T0 + 20))
    assert got[name][1] == [DataPoint(1.0, T0 + 20, T0 + 10, (("node_id", "node-1"),))]
    reg.remove("producer-node-metrics", node_id="node-1")
    assert name not in _points(collector.collect(reg.snapshot(), ALL, False, T0 + 30))
    node2 = reg.sensor()
    reg.publish(node2, "request", "producer-node-metrics", ("total",), node_id="node-1")
    got = _points(collector.collect(reg.snapshot(), ALL, False, T0 + 40))
    assert got[name][1] == [DataPoint(0.0, T0 + 40, T0 + 30, (("node_id", "node-1"),))]


def test_only_requested_metrics_are_collected() -> None:
    reg, sends, _ = _registry()
    sends.record(1)
    collector = TelemetryCollector(T0)
    sel = MetricSelector.from_requested(["org.apache.kafka.producer.topic."])
    names = {m.name for m in collector.collect(reg.snapshot(), sel, False, T0 + 1).metrics}
    assert names == {"org.apache.kafka.producer.topic.record.send.total"}
    none = MetricSelector.from_requested([])
    assert not collector.collect(reg.snapshot(), none, False, T0 + 2).metrics


# -- compression -----------------------------------------------------------------------


def test_the_first_accepted_codec_we_know_is_used() -> None:
    assert choose_compression([ZSTD, LZ4, GZIP, SNAPPY]) == ZSTD  # what Apache brokers send
    assert choose_compression([9, GZIP]) == GZIP  # unknown ids are skipped
    assert choose_compression([NONE, LZ4]) == LZ4
    assert choose_compression([]) == NONE
    assert choose_compression([42]) == NONE


@pytest.mark.parametrize("codec", [NONE, GZIP, SNAPPY, LZ4, ZSTD])
def test_payloads_decompress_to_valid_otlp(codec: int) -> None:
    reg, sends, _ = _registry()
    sends.record(7)
    collected = TelemetryCollector(T0).collect(reg.snapshot(), ALL, False, T0 + 1)
    used, data, raw_size = build_payload(
        collected.metrics, (("group_id", "g"),), ("aiokproto", "0.1.0"), [codec]
    )
    assert used == codec
    raw = decompress(codec, data) if codec != NONE else data
    assert len(raw) == raw_size
    found = by_name(decode(raw))
    assert found["org.apache.kafka.producer.record.send.total"].sum.data_points[0].as_double == 7


def test_an_empty_payload_is_sent_uncompressed() -> None:
    assert build_payload([], (), ("aiokproto", "0.1.0"), [ZSTD]) == (NONE, b"", 0)
