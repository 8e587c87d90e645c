"""Producer.metrics() against the real broker: Java's names, values that add up."""

from __future__ import annotations

import math
from typing import Any

from aiokproto import Producer
from aiokproto.errors import RecordTooLargeError
from tests.producer.helpers import create_topic


async def test_counts_and_sizes_add_up(kafka: Any, topic_name: str) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=2)
    p = Producer(
        bootstrap_servers=kafka.bootstrap_servers,
        client_id="m-test",
        compression_type="gzip",
        linger_ms=5,
        buffer_memory=8 * 1024 * 1024,
    )
    before = p.metrics()
    assert before.value("record-send-total", "producer-metrics") == 0
    assert before.value("buffer-available-bytes") == 8 * 1024 * 1024
    assert math.isnan(before.value("batch-size-avg"))  # nothing recorded: NaN, as in Java
    async with p:
        handles = [await p.send(topic_name, b"x" * 100, partition=i % 2) for i in range(2_000)]
        for h in handles:
            await h
        m = p.metrics()
    assert m.value("record-send-total", "producer-metrics") == 2_000
    assert m.value("record-send-total", "producer-topic-metrics", {"topic": topic_name}) == 2_000
    assert m.value("record-error-total", "producer-metrics") == 0
    assert m.value("record-send-rate", "producer-metrics") > 0
    # 100 equal bytes per record compress well
    assert 0 < m.value("compression-rate-avg", "producer-metrics") < 0.5
    assert 0 < m.value("batch-size-avg") <= m.value("batch-size-max")
    assert m.value("records-per-request-avg") >= 1
    assert m.value("record-queue-time-max") >= m.value("record-queue-time-avg") >= 0
    assert m.value("buffer-total-bytes") == 8 * 1024 * 1024
    # every produce request was answered, and timed
    assert m.value("request-total", "producer-metrics") >= 2
    assert m.value("response-total", "producer-metrics") == m.value(
        "request-total", "producer-metrics"
    )
    assert m.value("request-latency-avg", "producer-metrics") > 0
    assert m.value("outgoing-byte-total", "producer-metrics") > 2_000 * 100 * 0.01
    assert m.value("connection-creation-total", "producer-metrics") >= 1
    # per broker, tagged node-<id> as in Java
    node = m.find("request-total", "producer-node-metrics")
    assert node and all(name.tag("node-id") is not None for name in node)
    for name in m:
        assert name.tag("client-id") == "m-test"
    # after stop the connections are closed and counted so
    after = p.metrics()
    assert after.value("connection-count") == 0
    assert after.value("connection-close-total") == after.value("connection-creation-total")
    assert after.as_dict()  # JSON-ready: NaN becomes None


async def test_errors_are_counted_per_topic(kafka: Any, topic_name: str) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    async with Producer(bootstrap_servers=kafka.bootstrap_servers) as p:
        await create_topic(
            kafka.bootstrap_servers, topic_name + "-small", configs={"max.message.bytes": "1000"}
        )
        ok = await p.send(topic_name, b"fine")
        await ok
        bad = await p.send(topic_name + "-small", b"y" * 5000)
        try:
            await bad
        except RecordTooLargeError:
            pass
        m = p.metrics()
    errors = m.find("record-error-total", "producer-topic-metrics")
    assert {n.tag("topic"): v for n, v in errors.items()} == {
        topic_name: 0,
        topic_name + "-small": 1,
    }
    assert m.value("record-error-total", "producer-metrics") == 1
