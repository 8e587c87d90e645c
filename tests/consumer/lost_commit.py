"""What the lost-partition commit tests share (classic and KIP-848 groups): a topic of
40 records, a listener that holds on_partitions_lost open, and a spy on
the member's OffsetCommits."""

from __future__ import annotations

import asyncio
from typing import Any

from aiokproto.consumer import ConsumerRebalanceListener
from aiokproto.producer import Producer
from aiokproto.structs import OffsetAndMetadata, TopicPartition
from tests.consumer.conftest import create_topic


class HoldsTheLoss(ConsumerRebalanceListener):
    """on_partitions_lost waits for ``release``: the window the commit is issued in."""

    def __init__(self) -> None:
        self.lost: list[frozenset[TopicPartition]] = []
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def on_partitions_lost(self, lost: frozenset[TopicPartition]) -> None:
        self.lost.append(lost)
        self.entered.set()
        await self.release.wait()


def record_commits(member: Any, monkeypatch: Any) -> list[tuple[int, dict[TopicPartition, int]]]:
    """Every OffsetCommit ``member`` (a group coordinator or KIP-848 driver) sends from
    now on: (generation or member epoch, offsets)."""
    real = member._offsets.commit_once
    sent: list[tuple[int, dict[TopicPartition, int]]] = []

    async def spy(
        offsets: dict[TopicPartition, OffsetAndMetadata],
        generation: int,
        member_id: str,
        deadline: float,
    ) -> dict[TopicPartition, int]:
        sent.append((generation, {tp: om.offset for tp, om in offsets.items()}))
        return await real(offsets, generation, member_id, deadline)

    monkeypatch.setattr(member._offsets, "commit_once", spy)
    return sent


async def forty_records(bootstrap: str, topic: str) -> TopicPartition:
    """A new one-partition topic holding 40 records; its partition."""
    await create_topic(bootstrap, topic, partitions=1)
    async with Producer(bootstrap_servers=bootstrap) as p:
        await p.send_batch(topic, [b"%d" % i for i in range(40)], partition=0)
    return TopicPartition(topic, 0)
