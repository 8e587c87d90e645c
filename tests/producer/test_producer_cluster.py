"""On the 3-node cluster: an idempotent producer rides out its leader's death and return.

200,000 small records over three RF=3 partitions (min.insync.replicas=2) while the
leader of partition 0 is killed and restarted; read back with librdkafka, every record
is there exactly once and in order per partition.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from aiokproto.producer import DeliveryFuture, Producer
from aiokproto.testing import LocalKafka
from tests.producer.helpers import consume, create_topic

pytestmark = pytest.mark.cluster

TOTAL = 200_000
PARTITIONS = 3
CHUNK = 2_000  # records per partition per round


async def test_idempotent_producer_survives_leader_kill_and_restart(
    kafka_cluster: LocalKafka, topic_name: str
) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    await create_topic(
        bootstrap, topic_name, partitions=PARTITIONS, replication=3,
        configs={"min.insync.replicas": "2"},
    )
    began = time.monotonic()
    async with Producer(
        bootstrap_servers=bootstrap,
        request_timeout_ms=5000,
        retry_backoff_ms=50,
        retry_backoff_max_ms=500,
        delivery_timeout_ms=60_000,
        linger_ms=5,
    ) as producer:
        assert producer.options.enable_idempotence
        await producer.partitions_for(topic_name)
        assert producer._client is not None
        leader = producer._client.metadata.snapshot.leader_for(topic_name, 0)
        assert leader is not None

        handles: list[DeliveryFuture] = []
        sent = [0] * PARTITIONS

        async def produce(count: int, pause: float) -> None:
            """``count`` records round-robin over the partitions, in chunks with pauses."""
            for start in range(0, count, CHUNK):
                for i in range(start, min(count, start + CHUNK)):
                    p = i % PARTITIONS
                    value = b"%d:%d" % (p, sent[p])
                    handles.append(await producer.send(topic_name, value, partition=p))
                    sent[p] += 1
                await asyncio.sleep(pause)

        await produce(60_000, 0.01)
        await asyncio.to_thread(kafka_cluster.kill_node, leader)
        await produce(40_000, 0.05)  # while the cluster notices and elects
        restart = asyncio.ensure_future(asyncio.to_thread(kafka_cluster.restart_node, leader))
        await produce(40_000, 0.1)  # while the node comes back
        await asyncio.wait_for(restart, 60)
        await produce(TOTAL - sum(sent), 0.01)
        await producer.flush(timeout_ms=60_000)
        failures = [h.exception() for h in handles if h.exception() is not None]
        assert not failures, failures[:3]
        assert sum(sent) == TOTAL
        # the kill was felt: some batches needed more than one attempt
        retried = {id(h._batch) for h in handles if h._batch and h._batch.attempts > 1}
        print(f"batches retried: {len(retried)}")
        assert retried

    got = await asyncio.to_thread(consume, bootstrap, topic_name, TOTAL, PARTITIONS, 60.0)
    by_partition: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for msg in got:
        by_partition[msg.partition()].append(msg.value())
    for p, values in by_partition.items():
        expected = [b"%d:%d" % (p, i) for i in range(sent[p])]
        assert len(values) == len(expected), (p, len(values), len(expected))
        assert values == expected  # nothing lost, duplicated or reordered
    assert time.monotonic() - began < 90
