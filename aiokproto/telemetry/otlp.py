"""A minimal OTLP ``MetricsData`` protobuf encoder (pure, no protobuf dependency).

KIP-714 pushes metrics as an OpenTelemetry ``MetricsData`` message (``opentelemetry/
proto/metrics/v1/metrics.proto``). Only a small fixed subset is ever written: one
``ResourceMetrics`` (resource attributes, one ``ScopeMetrics``), and per metric either a
``Gauge`` or a ``Sum`` of ``NumberDataPoint``s with string attributes, times and a
double value. The protobuf wire format of that subset is a few lines, so the runtime
does not depend on ``protobuf``; the tests decode the output with the official
``opentelemetry-proto`` package.

Field numbers (from the .proto files):

* MetricsData: resource_metrics=1
* ResourceMetrics: resource=1, scope_metrics=2
* Resource: attributes=1
* ScopeMetrics: scope=1, metrics=2
* InstrumentationScope: name=1, version=2
* Metric: name=1, description=2, unit=3, gauge=5, sum=7
* Gauge: data_points=1
* Sum: data_points=1, aggregation_temporality=2 (enum), is_monotonic=3 (bool)
* NumberDataPoint: start_time_unix_nano=2 (fixed64), time_unix_nano=3 (fixed64),
  as_double=4 (double), attributes=7
* KeyValue: key=1, value=2; AnyValue: string_value=1
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from aiokproto.protocol.varint import encode_uvarint

#: AggregationTemporality
DELTA: Final = 1
CUMULATIVE: Final = 2

# wire types
_VARINT = 0
_I64 = 1
_LEN = 2

_FIXED64 = struct.Struct("<Q")
_DOUBLE = struct.Struct("<d")

Attributes = Sequence[tuple[str, str]]


@dataclass(frozen=True, slots=True)
class DataPoint:
    """One NumberDataPoint: a double value with its attributes and times (ns since
    the epoch; ``start_ns`` 0 means unset)."""

    value: float
    time_ns: int
    start_ns: int = 0
    attributes: Attributes = ()


@dataclass(frozen=True, slots=True)
class OtlpMetric:
    """One Metric: a gauge, or a monotonic sum of the given temporality."""

    name: str
    kind: Literal["gauge", "sum"]
    points: Sequence[DataPoint]
    description: str = ""
    temporality: int = CUMULATIVE


def _tag(field: int, wire: int) -> bytes:
    return encode_uvarint((field << 3) | wire)


def _len_field(out: bytearray, field: int, payload: bytes | bytearray) -> None:
    out += _tag(field, _LEN)
    out += encode_uvarint(len(payload))
    out += payload


def _str_field(out: bytearray, field: int, text: str) -> None:
    _len_field(out, field, text.encode("utf-8"))


def _key_value(key: str, value: str) -> bytes:
    any_value = bytearray()
    _str_field(any_value, 1, value)  # AnyValue.string_value (set even when empty)
    kv = bytearray()
    _str_field(kv, 1, key)
    _len_field(kv, 2, any_value)
    return bytes(kv)


def _attributes(out: bytearray, field: int, attributes: Attributes) -> None:
    for key, value in attributes:
        _len_field(out, field, _key_value(key, value))


def _data_point(point: DataPoint) -> bytes:
    out = bytearray()
    if point.start_ns:
        out += _tag(2, _I64)
        out += _FIXED64.pack(point.start_ns)
    out += _tag(3, _I64)
    out += _FIXED64.pack(point.time_ns)
    out += _tag(4, _I64)
    out += _DOUBLE.pack(point.value)
    _attributes(out, 7, point.attributes)
    return bytes(out)


def _metric(metric: OtlpMetric) -> bytes:
    body = bytearray()
    for point in metric.points:
        _len_field(body, 1, _data_point(point))
    if metric.kind == "sum":
        body += _tag(2, _VARINT)
        body += encode_uvarint(metric.temporality)
        body += _tag(3, _VARINT)
        body += b"\x01"  # is_monotonic
    out = bytearray()
    _str_field(out, 1, metric.name)
    if metric.description:
        _str_field(out, 2, metric.description)
    _len_field(out, 5 if metric.kind == "gauge" else 7, body)
    return bytes(out)


def encode_metrics_data(
    metrics: Iterable[OtlpMetric],
    resource: Attributes = (),
    scope_name: str = "",
    scope_version: str = "",
) -> bytes:
    """The serialized ``MetricsData``: one resource, one scope, every metric; no
    metrics is an empty message (b"", as Java's client sends it)."""
    metrics = list(metrics)
    if not metrics:
        return b""
    scope = bytearray()
    if scope_name:
        _str_field(scope, 1, scope_name)
    if scope_version:
        _str_field(scope, 2, scope_version)
    scope_metrics = bytearray()
    _len_field(scope_metrics, 1, scope)
    for metric in metrics:
        _len_field(scope_metrics, 2, _metric(metric))
    res = bytearray()
    _attributes(res, 1, resource)
    resource_metrics = bytearray()
    _len_field(resource_metrics, 1, res)
    _len_field(resource_metrics, 2, scope_metrics)
    out = bytearray()
    _len_field(out, 1, resource_metrics)
    return bytes(out)
