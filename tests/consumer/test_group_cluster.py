"""On the 3-node cluster: the group coordinator dies and the member carries on."""

from __future__ import annotations

import asyncio
import time

import pytest

from aiokproto.admin import Admin, NewTopic
from aiokproto.cluster.coordinators import GROUP
from aiokproto.consumer.group import ClassicGroupDriver, GroupConfig
from aiokproto.consumer.subscription import SubscriptionState
from aiokproto.structs import OffsetAndMetadata, TopicPartition
from aiokproto.testing import LocalKafka
from tests.clients import client_for

pytestmark = pytest.mark.cluster


async def test_commits_survive_coordinator_failover(
    kafka_cluster: LocalKafka, topic_name: str
) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    group = f"g-{topic_name}"
    async with Admin(bootstrap_servers=bootstrap) as admin:
        await admin.create_topics([NewTopic(topic_name, num_partitions=2, replication_factor=3)])
    tp0, tp1 = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)
    sub = SubscriptionState()
    sub.subscribe([topic_name])
    config = GroupConfig(group, session_timeout_ms=15000, heartbeat_interval_ms=500)
    async with client_for(bootstrap, request_timeout_ms=5000) as client:
        async with ClassicGroupDriver(client, sub, config) as member:
            assert await member.wait_for_assignment(30)
            assert sub.assigned() == {tp0, tp1}
            await member.commit({tp0: OffsetAndMetadata(1), tp1: OffsetAndMetadata(1)})
            old = (await client.coordinators.find(GROUP, group)).node_id
            generation = member.generation_id

            await asyncio.to_thread(kafka_cluster.kill_node, old)
            started = time.monotonic()
            await member.commit({tp0: OffsetAndMetadata(2)}, timeout_ms=60000)
            took = time.monotonic() - started
            new = (await client.coordinators.find(GROUP, group)).node_id
            assert new != old
            got = await member.fetch_committed([tp0, tp1])
            assert got == {tp0: OffsetAndMetadata(2), tp1: OffsetAndMetadata(1)}
            # the member kept (or got back) its partitions
            assert await member.wait_for_assignment(30)
            assert sub.assigned() == {tp0, tp1}
            await asyncio.sleep(2)  # heartbeats to the new coordinator work
            assert member.state.value == "stable"
            print(
                f"commit after killing coordinator {old}: {took:.1f} s "
                f"(generation {generation} -> {member.generation_id})"
            )
