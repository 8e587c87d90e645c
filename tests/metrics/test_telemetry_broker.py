"""KIP-714 metrics push against a real Kafka broker of the default version (4.4.0).

A broker answers the telemetry APIs only when one of its ``metric.reporters`` provides a
telemetry exporter (``ClientTelemetryExporterProvider`` in Kafka 4.x), so this module
starts its own single node with ``java/TelemetryRecorder.java`` (compiled here against
the broker's jars) on the classpath; the recorder appends every payload it receives to
a file. A client-metrics subscription made through our Admin selects the producer
metrics of clients whose id starts with ``tele-push-``, pushed every second.
"""

from __future__ import annotations

import asyncio
import base64
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from aiokproto.admin import Admin, AlterConfigOp, ConfigResource, ConfigResourceType
from aiokproto.consumer import Consumer
from aiokproto.producer import Producer
from aiokproto.records.compression import ZSTD
from aiokproto.share import ShareConsumer
from aiokproto.testing import PLAINTEXT_ONLY, LocalKafka
from aiokproto.testing.discovery import local_jars_possible
from aiokproto.testing.jars import DEFAULT_VERSION
from tests.javac import compiled
from tests.share.test_share_consumer_broker import setup

metrics_pb2 = pytest.importorskip("opentelemetry.proto.metrics.v1.metrics_pb2")

pytestmark = pytest.mark.slow  # starts a dedicated broker (about 5 s)

KAFKA_VERSION = DEFAULT_VERSION  # the main broker version
JAVA_SOURCE = Path(__file__).parent / "java" / "TelemetryRecorder.java"
SUBSCRIPTION = ConfigResource(ConfigResourceType.CLIENT_METRICS, "aiokproto-producers")
PREFIX = "org.apache.kafka.producer."
ADMIN_PREFIX = "org.apache.kafka.admin.client."
CONSUMER_PREFIX = "org.apache.kafka.consumer."  # consumers and share consumers
SEND_TOTAL = "org.apache.kafka.producer.record.send.total"
TOPIC_SEND_TOTAL = "org.apache.kafka.producer.topic.record.send.total"


@dataclass(frozen=True)
class Push:
    instance_id: str
    client_id: str
    terminating: bool
    content_type: str
    interval_ms: int
    data: bytes

    def decoded(self) -> Any:
        return metrics_pb2.MetricsData.FromString(self.data)


@dataclass(frozen=True)
class Broker:
    kafka: LocalKafka
    received: Path

    @property
    def bootstrap(self) -> str:
        return self.kafka.bootstrap_servers

    def pushes(self) -> list[Push]:
        if not self.received.exists():
            return []
        out = []
        for line in self.received.read_text().splitlines():
            iid, cid, term, ctype, interval, data = line.split("\t")
            out.append(Push(iid, cid, term == "true", ctype, int(interval), base64.b64decode(data)))
        return out


def compiled_recorder() -> Path:
    return compiled(JAVA_SOURCE, KAFKA_VERSION)


async def subscribe(bootstrap: str) -> None:
    """The subscription, made through our Admin (resource type CLIENT_METRICS)."""
    async with Admin(bootstrap_servers=bootstrap, enable_metrics_push=False) as admin:
        await admin.incremental_alter_configs(
            {
                SUBSCRIPTION: [
                    AlterConfigOp("metrics", f"{PREFIX},{ADMIN_PREFIX},{CONSUMER_PREFIX}"),
                    AlterConfigOp("interval.ms", "1000"),
                    AlterConfigOp("match", "client_id=tele-push-.*"),
                ]
            }
        )
        deadline = time.monotonic() + 10
        while True:  # the broker applies it from its metadata log
            found = (await admin.describe_configs([SUBSCRIPTION]))[SUBSCRIPTION]
            if found.get("metrics") and found["metrics"].value:
                return
            assert time.monotonic() < deadline, f"subscription not visible: {found}"
            await asyncio.sleep(0.1)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    if not local_jars_possible(KAFKA_VERSION):
        pytest.skip("a dedicated broker needs Java 17+ and the Kafka jars (or Maven)")
    classes = compiled_recorder()
    received = tmp_path_factory.mktemp("telemetry") / "received.tsv"
    kafka = LocalKafka(
        version=KAFKA_VERSION,
        security=PLAINTEXT_ONLY,
        overrides={
            "metric.reporters": "TelemetryRecorder",
            "aiokproto.telemetry.file": str(received),
        },
        extra_classpath=[classes],
    ).start()
    try:
        asyncio.run(subscribe(kafka.bootstrap_servers))
        yield Broker(kafka, received)
    finally:
        kafka.stop()


async def produce_for(producer: Producer, topic: str, seconds: float) -> int:
    """Send a record every 20 ms for ``seconds``; how many were acknowledged."""
    handles = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        handles.append(await producer.send(topic, b"v" * 50))
        await asyncio.sleep(0.02)
    for handle in handles:
        await handle
    return len(handles)


def kafka_uuid(value: uuid.UUID) -> str:
    """How Java prints a Uuid (URL-safe base64 without padding)."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode("ascii")


async def wait_for_instance_id(client: Any) -> str:
    deadline = time.monotonic() + 10
    while (iid := client.client_instance_id()) is None:
        assert time.monotonic() < deadline, "no client instance id within 10 s"
        await asyncio.sleep(0.05)
    return kafka_uuid(iid)


def metric_names(data: Any) -> set[str]:
    return {m.name for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}


def points(data: Any, name: str) -> list[tuple[Any, Any, dict[str, str]]]:
    """(metric, data point, attributes) of every point of ``name`` in one MetricsData."""
    out = []
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name != name:
                    continue
                body = metric.sum if metric.HasField("sum") else metric.gauge
                for p in body.data_points:
                    attrs = {a.key: a.value.string_value for a in p.attributes}
                    out.append((metric, p, attrs))
    return out


async def test_a_subscribed_producer_pushes_its_metrics_as_otlp(broker: Broker) -> None:
    topic = "tele-topic"
    producer = Producer(bootstrap_servers=broker.bootstrap, client_id="tele-push-1", linger_ms=0)
    async with producer:
        iid = await wait_for_instance_id(producer)
        sent = await produce_for(producer, topic, 3.0)
        reporter = producer._telemetry
        assert reporter is not None
        assert reporter.last_push is not None and reporter.last_push[1] == ZSTD  # broker's 1st
    ours = [p for p in broker.pushes() if p.instance_id == iid]
    assert ours, f"no push from {iid}; received from {[p.client_id for p in broker.pushes()]}"
    assert all(p.client_id == "tele-push-1" for p in ours)
    assert all(p.content_type == "OTLP" for p in ours)
    assert all(p.interval_ms == 1000 for p in ours)
    # regular pushes every second, then exactly one terminating push, the last
    assert [p.terminating for p in ours] == [False] * (len(ours) - 1) + [True]
    assert len(ours) >= 3
    total = topic_total = 0.0
    for push in ours:
        data = push.decoded()
        names = metric_names(data)
        assert names and all(n.startswith(PREFIX) for n in names), names
        for metric, point, attrs in points(data, SEND_TOTAL):
            assert metric.HasField("sum") and metric.sum.is_monotonic
            # Apache brokers ask for delta temporality
            assert metric.sum.aggregation_temporality == metrics_pb2.AGGREGATION_TEMPORALITY_DELTA
            assert 0 < point.start_time_unix_nano <= point.time_unix_nano
            assert "client_id" not in attrs
            total += point.as_double
        for _, point, attrs in points(data, TOPIC_SEND_TOTAL):
            assert attrs == {"topic": topic}
            topic_total += point.as_double
        for metric, _, _ in points(data, "org.apache.kafka.producer.record.send.rate"):
            assert metric.HasField("gauge")
    # the deltas of all pushes add up to every record sent
    assert total == sent
    assert topic_total == sent
    last = ours[-1].decoded()
    per_node = points(last, "org.apache.kafka.producer.node.request.total")
    assert per_node and all("node_id" in attrs for _, _, attrs in per_node)


async def test_enable_metrics_push_false_pushes_nothing(broker: Broker) -> None:
    producer = Producer(
        bootstrap_servers=broker.bootstrap, client_id="tele-push-off", enable_metrics_push=False
    )
    async with producer:
        await produce_for(producer, "tele-topic-off", 2.0)
        assert producer.client_instance_id() is None
    assert not [p for p in broker.pushes() if p.client_id == "tele-push-off"]


async def test_without_a_matching_subscription_nothing_is_pushed(broker: Broker) -> None:
    producer = Producer(bootstrap_servers=broker.bootstrap, client_id="tele-unmatched")
    async with producer:
        iid = await wait_for_instance_id(producer)  # subscribed, to no metrics
        await produce_for(producer, "tele-topic-unmatched", 2.0)
        reporter = producer._telemetry
        assert reporter is not None and reporter.pushes == 0
    assert not [
        p for p in broker.pushes() if p.instance_id == iid or p.client_id == "tele-unmatched"
    ]


async def test_an_admin_pushes_its_metrics_too(broker: Broker) -> None:
    async with Admin(bootstrap_servers=broker.bootstrap, client_id="tele-push-admin") as admin:
        iid = await wait_for_instance_id(admin)
        for _ in range(8):
            await admin.list_topics()
            await asyncio.sleep(0.2)
    ours = [p for p in broker.pushes() if p.instance_id == iid]
    assert ours and ours[-1].terminating
    requests = points(ours[-1].decoded(), "org.apache.kafka.admin.client.request.total")
    assert requests, "the terminating push has no admin request total"
    for metric, _, _ in requests:
        assert metric.HasField("sum")


def consumed_total(pushes: list[Push], name: str) -> float:
    """The sum of every push's ``name`` points without a topic (the client's total)."""
    return sum(
        point.as_double
        for push in pushes
        for _, point, attrs in points(push.decoded(), name)
        if "topic" not in attrs
    )


async def test_a_consumer_pushes_its_metrics(broker: Broker) -> None:
    if not hasattr(Consumer, "client_instance_id"):
        pytest.skip("the Consumer has no TelemetryReporter yet")
    topic = "tele-consumed"
    async with Producer(bootstrap_servers=broker.bootstrap, enable_metrics_push=False) as p:
        for _ in range(50):
            await p.send(topic, b"x")
        await p.flush()
    consumer = Consumer(
        topic,
        bootstrap_servers=broker.bootstrap,
        group_id="tele-group",
        auto_offset_reset="earliest",
        client_id="tele-push-consumer",
    )
    got = 0
    async with consumer, asyncio.timeout(30):
        iid = await wait_for_instance_id(consumer)
        while got < 50:
            batch = await consumer.getmany(timeout_ms=500)
            got += sum(len(records) for records in batch.values())
    ours = [p for p in broker.pushes() if p.instance_id == iid]
    assert ours and ours[-1].terminating
    name = "org.apache.kafka.consumer.fetch.manager.records.consumed.total"
    assert consumed_total(ours, name) == 50


async def test_a_share_consumer_pushes_its_metrics(broker: Broker) -> None:
    if not hasattr(ShareConsumer, "client_instance_id"):
        pytest.skip("the ShareConsumer has no TelemetryReporter yet")
    topic = "tele-shared"
    group = await setup(broker.kafka, topic, 1, 40)
    consumer = ShareConsumer(
        topic, bootstrap_servers=broker.bootstrap, group_id=group, client_id="tele-push-share"
    )
    got = 0
    async with consumer, asyncio.timeout(30):
        iid = await wait_for_instance_id(consumer)
        while got < 40:
            batch = await consumer.getmany(timeout_ms=500)
            got += sum(len(records) for records in batch.values())
    ours = [p for p in broker.pushes() if p.instance_id == iid]
    assert ours and ours[-1].terminating
    name = "org.apache.kafka.consumer.share.fetch.manager.records.consumed.total"
    assert consumed_total(ours, name) == 40
