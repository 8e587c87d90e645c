"""A broker that keeps answering an error gets a request per back-off, never one per
answer (fake broker: these answers are hard to get from a real one on demand).

Before: a ShareFetch partition error (leader moved), and a fenced join of a share or
KIP-848 member, were retried at once, about 10,000 requests a second at 100% CPU.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from aiokproto import Consumer, ShareConsumer
from aiokproto.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatResponse
from aiokproto.protocol.messages.find_coordinator import (
    FindCoordinatorResponse,
    FindCoordinatorResponseCoordinator,
)
from aiokproto.protocol.messages.metadata import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from aiokproto.protocol.messages.share_acknowledge import ShareAcknowledgeResponse
from aiokproto.protocol.messages.share_fetch import (
    ShareFetchableTopicResponse,
    ShareFetchResponse,
    ShareFetchResponsePartitionData,
)
from aiokproto.protocol.messages.share_group_heartbeat import (
    ShareGroupHeartbeatResponse,
    ShareGroupHeartbeatResponseAssignment,
    ShareGroupHeartbeatResponseTopicPartitions,
)
from tests.fake_broker import FakeBroker, Received, Reply

TOPIC, TOPIC_ID = "t", uuid.UUID(int=0x1234)
NOT_LEADER, UNKNOWN_MEMBER, FENCED = 6, 25, 110
BACKOFF = {"retry_backoff_ms": 100, "retry_backoff_max_ms": 1000}


def _cluster(answers: dict[int, Callable[[Received], Any]]) -> FakeBroker:
    """One broker, leader of t-0 and coordinator of every group; ``answers`` by api key."""

    def script(rec: Received) -> Reply | None:
        if rec.api_key in answers:
            return Reply(response=answers[rec.api_key](rec))
        if rec.api_key == 3:
            return Reply(
                response=MetadataResponse(
                    brokers=[MetadataResponseBroker(node_id=1, host=fake.host, port=fake.port)],
                    cluster_id="fake",
                    controller_id=1,
                    topics=[
                        MetadataResponseTopic(
                            name=TOPIC,
                            topic_id=TOPIC_ID,
                            partitions=[
                                MetadataResponsePartition(
                                    partition_index=0, leader_id=1, replica_nodes=[1], isr_nodes=[1]
                                )
                            ],
                        )
                    ],
                )
            )
        if rec.api_key == 10:
            return Reply(
                response=FindCoordinatorResponse(
                    coordinators=[
                        FindCoordinatorResponseCoordinator(
                            key=k, node_id=1, host=fake.host, port=fake.port
                        )
                        for k in rec.request.coordinator_keys
                    ]
                )
            )
        return None

    fake = FakeBroker(script)
    return fake


def _share_member(rec: Received) -> ShareGroupHeartbeatResponse:
    return ShareGroupHeartbeatResponse(
        member_id=rec.request.member_id,
        member_epoch=1,
        heartbeat_interval_ms=3000,
        assignment=ShareGroupHeartbeatResponseAssignment(
            topic_partitions=[
                ShareGroupHeartbeatResponseTopicPartitions(topic_id=TOPIC_ID, partitions=[0])
            ]
        ),
    )


def _not_leader(rec: Received) -> ShareFetchResponse:
    # every answer names t-0 (a real broker answers for the session's partitions)
    return ShareFetchResponse(
        acquisition_lock_timeout_ms=30_000,
        responses=[
            ShareFetchableTopicResponse(
                topic_id=TOPIC_ID,
                partitions=[
                    ShareFetchResponsePartitionData(
                        partition_index=0, error_code=NOT_LEADER, records=b""
                    )
                ],
            )
        ],
    )


async def _count_for(fake: FakeBroker, api_key: int, seconds: float) -> int:
    start = sum(1 for r in fake.received if r.api_key == api_key)
    await asyncio.sleep(seconds)
    return sum(1 for r in fake.received if r.api_key == api_key) - start


async def _poll(consumer: Any) -> None:
    while True:
        await consumer.getmany(timeout_ms=200)


async def test_a_share_fetch_partition_error_waits_retry_backoff() -> None:
    fake = _cluster({76: _share_member, 78: _not_leader, 79: lambda r: ShareAcknowledgeResponse()})
    async with (
        fake,
        ShareConsumer(TOPIC, bootstrap_servers=fake.bootstrap, group_id="g", **BACKOFF) as sc,
    ):
        poller = asyncio.ensure_future(_poll(sc))
        try:
            await asyncio.sleep(0.5)
            fetches = await _count_for(fake, 78, 2.0)
        finally:
            poller.cancel()
    assert 5 <= fetches <= 30, fetches  # about 10 a second: one per retry_backoff_ms


@pytest.mark.parametrize("code", [FENCED, UNKNOWN_MEMBER])
async def test_a_share_member_fenced_at_every_join_backs_off(code: int) -> None:
    def fenced(rec: Received) -> ShareGroupHeartbeatResponse:
        return ShareGroupHeartbeatResponse(error_code=code, member_id=rec.request.member_id)

    fake = _cluster({76: fenced})
    async with (
        fake,
        ShareConsumer(TOPIC, bootstrap_servers=fake.bootstrap, group_id="g", **BACKOFF) as sc,
    ):
        poller = asyncio.ensure_future(_poll(sc))
        try:
            await asyncio.sleep(0.5)
            beats = await _count_for(fake, 76, 2.0)
        finally:
            poller.cancel()
    assert 1 <= beats <= 12, beats  # growing to one a second


@pytest.mark.parametrize("code", [FENCED, UNKNOWN_MEMBER])
async def test_a_kip848_member_fenced_at_every_join_backs_off(code: int) -> None:
    def fenced(rec: Received) -> ConsumerGroupHeartbeatResponse:
        return ConsumerGroupHeartbeatResponse(error_code=code, member_id=rec.request.member_id)

    fake = _cluster({68: fenced})
    async with (
        fake,
        Consumer(
            TOPIC,
            bootstrap_servers=fake.bootstrap,
            group_id="g",
            group_protocol="consumer",
            **BACKOFF,
        ) as c,
    ):
        poller = asyncio.ensure_future(_poll(c))
        try:
            await asyncio.sleep(0.5)
            beats = await _count_for(fake, 68, 2.0)
        finally:
            poller.cancel()
    assert 1 <= beats <= 12, beats
