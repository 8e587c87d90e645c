"""On the 3-node cluster: a partition leader dies mid-traffic and nobody notices."""

from __future__ import annotations

import asyncio

import pytest

from aiokproto import Admin, NewTopic, OffsetSpec, TopicPartition
from aiokproto.testing import LocalKafka
from tests.clients import client_for

pytestmark = pytest.mark.cluster


async def test_killed_leader_is_replaced_without_user_visible_errors(
    kafka_cluster: LocalKafka, topic_name: str
) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    tp = TopicPartition(topic_name, 0)
    async with Admin(bootstrap_servers=bootstrap, request_timeout_ms=3000) as admin:
        await admin.create_topics([NewTopic(topic_name, num_partitions=3, replication_factor=3)])
        async with client_for(bootstrap) as client:
            client.metadata.track([topic_name])
            snap = await client.metadata.wait_for(
                lambda s: s.leader_for(topic_name, 0) is not None, 30
            )
            old_leader = snap.leader_for(topic_name, 0)
            assert old_leader is not None

            calls = 0
            stop = asyncio.Event()

            async def traffic() -> None:
                nonlocal calls
                while not stop.is_set():
                    result = await admin.list_offsets({tp: OffsetSpec.latest()})
                    assert result[tp].offset >= 0
                    calls += 1
                    await asyncio.sleep(0.02)

            runner = asyncio.ensure_future(traffic())
            # a brand-new partition may need a moment before its first answer
            async with asyncio.timeout(30):
                while calls == 0:
                    assert not runner.done(), runner.exception()
                    await asyncio.sleep(0.05)
            before = calls
            await asyncio.to_thread(kafka_cluster.kill_node, old_leader)
            # the cache learns the new leader on its own (disconnect -> refresh)
            snap = await client.metadata.wait_for(
                lambda s: s.leader_for(topic_name, 0) not in (None, old_leader), 60
            )
            after_failover = calls
            while calls < after_failover + 5:  # traffic keeps flowing against the new leader
                assert not runner.done(), runner.exception()
                await asyncio.sleep(0.05)
            stop.set()
            await runner  # raises if any call failed
    assert before > 0 and calls > after_failover
    assert snap.leader_for(topic_name, 0) != old_leader
