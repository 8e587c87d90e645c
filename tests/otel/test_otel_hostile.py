"""The OpenTelemetry extra used as a hostile user would: spans of sends that are cancelled
or outlive ``uninstrument()``, a metrics bridge read by a pull reader (Prometheus-style,
the SDK's default collect timeout), nothing left running after ``uninstrument()``."""

from __future__ import annotations

import asyncio
import gc
import threading
import weakref
from typing import Any

import pytest
from opentelemetry.trace import StatusCode

from aiokproto import Producer
from aiokproto.metrics import MetricsSnapshot
from aiokproto.otel import AiokprotoInstrumentor, observe_metrics
from aiokproto.otel.metrics import bridge_for
from tests.otel.conftest import make_otel
from tests.producer.helpers import create_topic


class _Counting(Producer):
    """A producer that counts its metrics() calls."""

    calls = 0

    def metrics(self) -> MetricsSnapshot:
        self.calls += 1
        return super().metrics()


async def test_a_pull_reader_reads_each_client_once_per_collection() -> None:
    """InMemoryMetricReader and Prometheus' reader collect with the SDK's default timeout,
    which gives every callback of one collection its own CallbackOptions: the bridge
    must still read each client's metrics() once per collection, not once per
    instrument (tens of full snapshots, each thousands of metrics with many topics)."""
    o = make_otel()
    p = _Counting(bootstrap_servers="localhost:1")
    stop = observe_metrics(p, meter_provider=o.meter_provider)
    try:
        o.reader.get_metrics_data()  # the first collection
        for _ in range(3):
            p.calls = 0
            data = o.reader.get_metrics_data()
            assert data is not None and len(data.resource_metrics[0].scope_metrics[0].metrics) > 10
            assert p.calls == 1
    finally:
        stop()
        o.meter_provider.shutdown()


async def test_cancelled_and_in_flight_sends_end_their_spans_across_uninstrument(
    kafka: Any, topic_name: str
) -> None:
    from tests.faults.proxy import PRODUCE, FaultProxy

    await create_topic(kafka.bootstrap_servers, topic_name)
    o = make_otel()
    instrumentor = AiokprotoInstrumentor()
    instrumentor.instrument(tracer_provider=o.tracer_provider, meter_provider=o.meter_provider)
    uninstrumented = False
    try:
        async with FaultProxy(kafka.bootstrap_servers) as proxy:
            # Produce answers take 0.7 s: the first record holds the whole buffer
            proxy.listeners[0].latency(700, which="response", apis=[PRODUCE])
            async with Producer(
                bootstrap_servers=proxy.bootstrap_servers, buffer_memory=4096, linger_ms=0
            ) as p:
                first = await p.send(topic_name, b"a" * 3000)
                waiting = asyncio.ensure_future(p.send(topic_name, b"b" * 3000))
                await asyncio.sleep(0.1)
                assert p.metrics().value("waiting-threads") == 1
                waiting.cancel()  # cancelled while waiting for buffer memory
                await asyncio.gather(waiting, return_exceptions=True)
                assert p.metrics().value("waiting-threads") == 0
                instrumentor.uninstrument()  # while the first is in flight
                uninstrumented = True
                meta = await first
    finally:
        if not uninstrumented:
            instrumentor.uninstrument()
    cancelled, delivered = sorted(o.spans(), key=lambda s: s.start_time or 0)[::-1]
    assert cancelled.status.status_code is StatusCode.ERROR
    assert cancelled.attributes is not None
    assert cancelled.attributes["error.type"] == "CancelledError"
    assert delivered.status.status_code is StatusCode.UNSET
    assert delivered.attributes is not None
    assert delivered.attributes["messaging.kafka.offset"] == meta.offset
    o.meter_provider.shutdown()


async def test_a_periodic_reader_thread_sees_no_errors_and_nothing_outlives_uninstrument(
    kafka: Any, topic_name: str, caplog: Any
) -> None:
    """An exporter thread collecting every 20 ms while clients produce, consume and
    stop: no metrics() call fails (the bridge would log it), and once uninstrumented
    and dropped, no thread or task of ours runs and no client is kept alive."""
    import logging

    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import (
        MetricExporter,
        MetricExportResult,
        PeriodicExportingMetricReader,
    )

    from aiokproto import Consumer
    from aiokproto.structs import TopicPartition

    class Exports(MetricExporter):
        count = 0

        def export(self, metrics_data: Any, timeout_millis: float = 0, **kw: Any) -> Any:
            self.count += 1
            return MetricExportResult.SUCCESS

        def force_flush(self, timeout_millis: float = 0) -> bool:
            return True

        def shutdown(self, timeout_millis: float = 0, **kw: Any) -> None:
            pass

    await create_topic(kafka.bootstrap_servers, topic_name, partitions=4)
    exports = Exports()
    provider = MeterProvider(
        metric_readers=[PeriodicExportingMetricReader(exports, export_interval_millis=20)]
    )
    o = make_otel()
    threads_before = set(threading.enumerate())
    instrumentor = AiokprotoInstrumentor()
    instrumentor.instrument(tracer_provider=o.tracer_provider, meter_provider=provider)
    try:
        with caplog.at_level(logging.DEBUG, logger="aiokproto.otel"):
            producer = Producer(bootstrap_servers=kafka.bootstrap_servers)
            consumer = Consumer(
                bootstrap_servers=kafka.bootstrap_servers, auto_offset_reset="earliest"
            )
            async with producer, consumer:
                tps = [TopicPartition(topic_name, i) for i in range(4)]
                for i in range(40):
                    consumer.assign(tps[: i % 4 + 1])
                    await producer.send_batch(topic_name, [b"x"] * 10, partition=i % 4)
                    await consumer.getmany(timeout_ms=5)
                    await asyncio.sleep(0.005)
                await producer.flush()
            await asyncio.sleep(0.1)
        assert exports.count >= 5
        assert not [r for r in caplog.records if r.name.startswith("aiokproto.otel")]
    finally:
        instrumentor.uninstrument()
        provider.shutdown()
        o.meter_provider.shutdown()
    refs: list[weakref.ref[Any]] = [weakref.ref(producer), weakref.ref(consumer)]
    del producer, consumer
    await asyncio.sleep(0)  # send_batch span watchers finish
    gc.collect()
    assert [r() for r in refs] == [None, None]
    assert bridge_for(provider).wait_idle(1.0)
    left = [t for t in threading.enumerate() if t not in threads_before and t.is_alive()]
    assert left == []
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_instrumenting_never_turns_a_refused_send_into_an_accepted_one(
    kafka: Any, topic_name: str
) -> None:
    """Headers the producer refuses (a traceparent whose value is not bytes) must be
    refused the same when instrumented, not silently replaced by our own context."""
    from aiokproto.producer.producer import SerializationError

    await create_topic(kafka.bootstrap_servers, topic_name)
    bad: list[Any] = [
        [("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")],
        [("tracestate", 5), ("x", b"1")],
        (("traceparent", bytearray(b"garbage")), ("y", "not bytes")),
    ]
    o = make_otel()
    instrumentor = AiokprotoInstrumentor()
    instrumentor.instrument(tracer_provider=o.tracer_provider, meter_provider=o.meter_provider)
    try:
        async with Producer(bootstrap_servers=kafka.bootstrap_servers) as p:
            for headers in bad:
                with pytest.raises(SerializationError):
                    await p.send(topic_name, b"v", headers=headers)
                with pytest.raises(SerializationError):
                    await p.send_batch(topic_name, [b"v"], headers=headers)
    finally:
        instrumentor.uninstrument()
        o.meter_provider.shutdown()
    spans = o.spans()
    assert len(spans) == 2 * len(bad)
    assert all(s.status.status_code is StatusCode.ERROR for s in spans)
