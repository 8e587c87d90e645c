"""Consumer.metrics() against the real broker, classic and KIP-848 groups."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aiokproto import Consumer, ConsumerRebalanceListener, Producer
from aiokproto.structs import TopicPartition
from tests.producer.helpers import create_topic


async def _produce(bootstrap: str, topic: str, count: int, partitions: int) -> None:
    async with Producer(bootstrap_servers=bootstrap, linger_ms=5) as p:
        handles = [await p.send(topic, b"v" * 50, partition=i % partitions) for i in range(count)]
        for h in handles:
            await h


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
async def test_group_consumer_metrics(kafka: Any, topic_name: str, protocol: str) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=3)
    await _produce(kafka.bootstrap_servers, topic_name, 3_000, 3)
    assigned: list[int] = []

    class Listener(ConsumerRebalanceListener):
        async def on_partitions_revoked(self, revoked: frozenset[TopicPartition]) -> None:
            pass

        async def on_partitions_assigned(self, got: frozenset[TopicPartition]) -> None:
            assigned.append(len(got))
            await asyncio.sleep(0.05)  # shows up in partition-assigned-latency

        async def on_partitions_lost(self, lost: frozenset[TopicPartition]) -> None:
            pass

    c = Consumer(
        bootstrap_servers=kafka.bootstrap_servers,
        client_id="c-test",
        group_id=f"g-{topic_name}",
        group_protocol=protocol,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        max_poll_records=500,
    )
    c.subscribe([topic_name], listener=Listener())
    before = c.metrics()
    assert before.value("records-consumed-total", "consumer-fetch-manager-metrics") == 0
    assert before.value("last-poll-seconds-ago") == -1
    async with c:
        seen = 0
        async for _ in c:
            seen += 1
            if seen == 3_000:
                break
        await c.commit()
        m = c.metrics()
    fetch = "consumer-fetch-manager-metrics"
    assert m.value("records-consumed-total", fetch) == 3_000
    assert m.value("records-consumed-total", fetch, {"topic": topic_name}) == 3_000
    assert m.value("bytes-consumed-total", fetch) > 3_000 * 50
    assert m.value("fetch-total", fetch) >= 1
    assert m.value("fetch-latency-avg", fetch) > 0
    assert m.value("fetch-size-max", fetch) > 0
    assert m.value("records-lag-max", fetch) >= 0
    # per partition: everything read, so no lag left
    lags = m.find("records-lag", fetch)
    assert len(lags) == 3 and set(lags.values()) == {0.0}
    assert {n.tag("partition") for n in lags} == {"0", "1", "2"}
    coord = "consumer-coordinator-metrics"
    assert m.value("assigned-partitions", coord) == 3
    assert m.value("rebalance-total", coord) >= 1
    assert m.value("rebalance-latency-max", coord) > 0
    assert m.value("commit-total", coord) == 1
    assert m.value("commit-latency-avg", coord) > 0
    assert m.value("partition-assigned-latency-max", coord) >= 50
    assert 0 <= m.value("last-rebalance-seconds-ago", coord) < 60
    assert m.value("time-between-poll-max", "consumer-metrics") >= 0
    assert m.value("request-total", "consumer-metrics") > 0
    for name in m:
        assert name.tag("client-id") == "c-test"
    after = c.metrics()
    assert after.value("connection-count", "consumer-metrics") == 0


async def test_lag_shows_what_is_not_consumed(kafka: Any, topic_name: str) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    await _produce(kafka.bootstrap_servers, topic_name, 1_000, 1)
    tp = TopicPartition(topic_name, 0)
    async with Consumer(
        bootstrap_servers=kafka.bootstrap_servers, auto_offset_reset="earliest"
    ) as c:
        c.assign([tp])
        got = await c.getmany(tp, timeout_ms=5_000, max_records=100)
        assert len(got[tp]) == 100
        m = c.metrics()
        assert m.value("records-lag", tags={"partition": "0"}) == 900
        assert m.value("records-lead", tags={"partition": "0"}) == 100
        assert m.value("records-lag-max") == 900
        # no group: no coordinator metrics
        assert not m.find("assigned-partitions")
        c.assign([])
        assert not c.metrics().find("records-lag")  # an unassigned partition disappears
