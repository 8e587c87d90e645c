"""OpenTelemetry fixtures: the SDK with in-memory exporters, instrumented per test."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

from aiokproto.otel import AiokprotoInstrumentor


@dataclass
class Otel:
    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    tracer_provider: TracerProvider
    meter_provider: MeterProvider

    def spans(self, name: str | None = None) -> list[ReadableSpan]:
        found = list(self.exporter.get_finished_spans())
        return [s for s in found if name is None or s.name == name]

    def points(self, instrument: str) -> list[Any]:
        """Every data point of ``instrument`` in a fresh collection."""
        data = self.reader.get_metrics_data()
        out: list[Any] = []
        if data is None:
            return out
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    if metric.name == instrument:
                        out.extend(metric.data.data_points)
        return out


def make_otel() -> Otel:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    return Otel(exporter, reader, tracer_provider, meter_provider)


@pytest.fixture
def otel() -> Iterator[Otel]:
    o = make_otel()
    instrumentor = AiokprotoInstrumentor()
    instrumentor.instrument(tracer_provider=o.tracer_provider, meter_provider=o.meter_provider)
    try:
        yield o
    finally:
        instrumentor.uninstrument()
        o.meter_provider.shutdown()
