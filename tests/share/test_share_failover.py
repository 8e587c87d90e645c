"""On the 3-node cluster: a share consumer keeps going when the leader of its partition
dies. What it had acquired from the dead leader is acknowledged nowhere, so those
records come back (delivery count 2) from the new leader; none is lost."""

from __future__ import annotations

import asyncio
import time

import pytest

from aiokproto import Admin, NewTopic
from aiokproto.share import ShareConsumer
from aiokproto.testing import LocalKafka
from tests.consumer.test_consume_cluster import produce_some
from tests.share.conftest import configure_share_group

pytestmark = pytest.mark.cluster


async def test_share_consumer_survives_leader_kill(
    kafka_cluster: LocalKafka, topic_name: str
) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    group = f"s-{topic_name}"
    async with Admin(bootstrap_servers=bootstrap, request_timeout_ms=5000) as admin:
        await admin.create_topics([NewTopic(topic_name, num_partitions=1, replication_factor=3)])
    await configure_share_group(bootstrap, group, lock_ms=3000)
    await asyncio.to_thread(produce_some, bootstrap, topic_name, 0, 200)
    seen: dict[int, int] = {}
    leader = None
    try:
        async with ShareConsumer(
            topic_name,
            bootstrap_servers=bootstrap,
            group_id=group,
            request_timeout_ms=5000,
            max_poll_records=20,
        ) as sc:
            deadline = time.monotonic() + 60
            while len(seen) < 100:
                assert time.monotonic() < deadline
                for recs in (await sc.getmany(timeout_ms=200)).values():
                    for r in recs:
                        seen[int(r.value)] = max(seen.get(int(r.value), 0), r.delivery_count)
            leader = sc._client.metadata.snapshot.leader_for(topic_name, 0) if sc._client else None
            assert leader is not None
            await asyncio.to_thread(kafka_cluster.kill_node, leader)
            await asyncio.to_thread(produce_some, bootstrap, topic_name, 200, 100)
            deadline = time.monotonic() + 90
            while len(seen) < 300:
                assert time.monotonic() < deadline, f"stuck at {len(seen)} records"
                for recs in (await sc.getmany(timeout_ms=200)).values():
                    for r in recs:
                        seen[int(r.value)] = max(seen.get(int(r.value), 0), r.delivery_count)
            assert sc._client is not None
            assert sc._client.metadata.snapshot.leader_for(topic_name, 0) != leader
    finally:
        if leader is not None:
            await asyncio.to_thread(kafka_cluster.restart_node, leader)
    assert sorted(seen) == list(range(300))
