"""``client.metrics()`` through the OTel metrics API: what the reader collects equals what
the client reports, per client, for Producer, Admin and Consumer."""

from __future__ import annotations

import asyncio
import gc
import math
from typing import Any

import pytest
from opentelemetry.sdk.metrics.export import Gauge, Sum

from aiokproto import Admin, Consumer, Producer
from aiokproto.metrics import MetricsSnapshot
from aiokproto.otel import observe_metrics
from aiokproto.otel.metrics import bridge_for
from aiokproto.structs import TopicPartition
from tests.otel.conftest import Otel, make_otel
from tests.producer.helpers import create_topic


def collect(otel: Otel) -> dict[str, tuple[Any, dict[frozenset[tuple[str, Any]], float]]]:
    """instrument name -> (its data, {attributes: value})."""
    data = otel.reader.get_metrics_data()
    out: dict[str, tuple[Any, dict[frozenset[tuple[str, Any]], float]]] = {}
    if data is None:
        return out
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            assert sm.scope.name == "aiokproto"
            for metric in sm.metrics:
                points = {frozenset(p.attributes.items()): p.value for p in metric.data.data_points}
                out[metric.name] = (metric.data, points)
    return out


def collect_all(otel: Otel) -> dict[str, tuple[Any, dict[frozenset[tuple[str, Any]], float]]]:
    """A collection that covers every metric name seen so far: the first one finds the
    names that appeared since the client was made (per topic, per broker), whose
    instruments are created right after it."""
    collect(otel)
    assert bridge_for(otel.meter_provider).wait_idle()
    return collect(otel)


def assert_matches(
    got: dict[str, tuple[Any, dict[frozenset[tuple[str, Any]], float]]],
    snapshot: MetricsSnapshot,
    *,
    stable: bool,
) -> int:
    """Every metric of the snapshot is in the collection under ``{group}.{name}`` with its
    tags as attributes (NaN: absent); counters are monotonic sums. With ``stable`` (a
    stopped client) every value is equal, else the cumulative counts."""
    checked = 0
    keysets: dict[str, set[frozenset[str]]] = {}
    for metric, value in snapshot.items():
        if not math.isnan(value):
            keys = frozenset(k for k, _ in metric.tags)
            keysets.setdefault(f"{metric.group}.{metric.name}", set()).add(keys)
    for metric, value in snapshot.items():
        name = f"{metric.group}.{metric.name}"
        data, points = got.get(name, (None, {}))  # a metric without points is left out
        attrs = frozenset(metric.tags)
        if math.isnan(value):
            assert attrs not in points, (name, points)
            continue
        keys = frozenset(k for k, _ in metric.tags)
        if metric.name.endswith("-total") and any(keys < other for other in keysets[name]):
            # a count also reported per topic: only the finest is observed
            assert attrs not in points, (name, points)
            continue
        if metric.name.endswith("-total"):
            assert isinstance(data, Sum) and data.is_monotonic, name
        else:
            assert isinstance(data, Gauge), name
        if metric.name.endswith("-seconds-ago"):  # a clock: read a moment apart
            assert points[attrs] == pytest.approx(value, abs=2.0), (name, attrs)
        elif stable or metric.name.endswith("-total"):
            assert points[attrs] == pytest.approx(value), (name, attrs)
            checked += 1
    return checked


async def test_producer_metrics_reach_the_reader_with_the_clients_values(
    kafka: Any, topic_name: str, otel: Otel
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    p = Producer(bootstrap_servers=kafka.bootstrap_servers, client_id="otel-m")
    async with p:
        for h in [await p.send(topic_name, b"x" * 100) for _ in range(50)]:
            await h
        live = p.metrics()
        got = collect_all(otel)
        assert_matches(got, live, stable=False)
    after = p.metrics()
    got = collect_all(otel)
    assert assert_matches(got, after, stable=True) > 30
    assert got["producer-metrics.record-send-total"][1] == {
        frozenset({("client-id", "otel-m")}): 50
    }
    assert got["producer-topic-metrics.record-send-total"][1] == {
        frozenset({("client-id", "otel-m"), ("topic", topic_name)}): 50
    }
    nodes = got["producer-node-metrics.request-total"][1]
    assert nodes and all(dict(attrs)["node-id"].startswith("node-") for attrs in nodes)


async def test_admin_metrics_and_a_dropped_client_is_not_kept_alive(kafka: Any, otel: Otel) -> None:
    admin = Admin(bootstrap_servers=kafka.bootstrap_servers, client_id="otel-a")
    async with admin:
        await admin.list_topics()
    got = collect_all(otel)
    assert assert_matches(got, admin.metrics(), stable=True) > 5
    assert got["admin-client-metrics.request-total"][1][frozenset({("client-id", "otel-a")})] > 0

    bridge = bridge_for(otel.meter_provider)
    assert admin in bridge.clients()
    del admin
    gc.collect()
    assert bridge.clients() == []
    got = collect(otel)
    assert not any(points for _, points in got.values())


async def test_two_clients_are_reported_side_by_side(kafka: Any, otel: Otel) -> None:
    a = Producer(bootstrap_servers=kafka.bootstrap_servers, client_id="one", buffer_memory=1 << 20)
    b = Producer(bootstrap_servers=kafka.bootstrap_servers, client_id="two", buffer_memory=1 << 21)
    got = collect(otel)
    assert got["producer-metrics.buffer-total-bytes"][1] == {
        frozenset({("client-id", "one")}): 1 << 20,
        frozenset({("client-id", "two")}): 1 << 21,
    }
    assert math.isnan(a.metrics().value("batch-size-avg"))
    assert "producer-metrics.batch-size-avg" not in got  # NaN (no sample) is not observed
    del a, b


async def test_consumer_metrics_reach_the_reader(kafka: Any, topic_name: str, otel: Otel) -> None:
    if not hasattr(Consumer, "metrics"):
        pytest.skip("Consumer.metrics() does not exist yet")
    await create_topic(kafka.bootstrap_servers, topic_name)
    async with Producer(bootstrap_servers=kafka.bootstrap_servers) as p:
        await p.send_batch(topic_name, [b"r%d" % i for i in range(20)])
        await p.flush()
    c = Consumer(
        bootstrap_servers=kafka.bootstrap_servers, auto_offset_reset="earliest", client_id="otel-c"
    )
    async with c:
        c.assign([TopicPartition(topic_name, 0)])
        n = 0
        async with asyncio.timeout(20):
            while n < 20:
                n += sum(map(len, (await c.getmany(timeout_ms=500)).values()))
    got = collect_all(otel)
    snap = c.metrics()
    assert assert_matches(got, snap, stable=True) > 10
    consumed = got["consumer-fetch-manager-metrics.records-consumed-total"][1]
    assert sum(consumed.values()) == 20  # the finest granularity only: no double count


async def test_observe_metrics_without_the_instrumentor_and_stop() -> None:
    o = make_otel()
    p = Producer(bootstrap_servers="localhost:1", client_id="explicit")
    stop = observe_metrics(p, meter_provider=o.meter_provider)
    got = collect(o)
    assert got["producer-metrics.buffer-total-bytes"][1] == {
        frozenset({("client-id", "explicit")}): p.options.buffer_memory
    }
    stop()
    got = collect(o)
    assert not any(points for _, points in got.values())
    o.meter_provider.shutdown()
