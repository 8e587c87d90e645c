"""Share group (KIP-932) administration against the real broker.

A live group is made by Kafka's own ConsoleShareConsumer, run from the broker's jars
as a subprocess (tests/share/java.py).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from aiokproto.admin import (
    Admin,
    AdminBatchError,
    AlterConfigOp,
    ConfigResource,
    ConfigResourceType,
    ShareGroupListing,
    SharePartitionOffset,
    TopicPartition,
)
from aiokproto.errors import GroupIdNotFoundError, NonEmptyGroupError, UnknownTopicOrPartitionError
from aiokproto.testing.discovery import KafkaService
from tests.share.java import java_share_consumer

Produce = Callable[[str, str, int, list[int]], None]

RECORDS_PER_PARTITION = 10


@pytest.fixture(autouse=True)
def _needs_kafka_4(kafka: Any) -> None:
    # make test also runs tests/admin against 3.9.1, which has no share groups
    if kafka.version.startswith("3."):
        pytest.skip("share groups need Kafka 4.x")


@pytest.fixture(autouse=True)
async def share_groups_enabled(admin: Admin) -> None:
    """Share groups need the finalized feature share.version >= 1 (on by default for
    a cluster formatted by Kafka 4.2+)."""
    features = await admin.describe_features()
    share = features.finalized_features.get("share.version")
    assert share is not None and share.max_version_level >= 1, features


def group_name() -> str:
    return f"sg-{uuid.uuid4().hex[:10]}"


async def _until(check: Callable[[], Awaitable[bool]], within: float, what: str) -> float:
    """Poll ``check`` until it holds; return the seconds it took."""
    began = time.monotonic()
    while not await check():
        if time.monotonic() - began > within:
            pytest.fail(f"{what}: not within {within:.0f} s")
        await asyncio.sleep(0.1)
    return time.monotonic() - began


async def _share_from_earliest(admin: Admin, group: str) -> None:
    # a new share group starts at the end of the log unless its group config says so
    await admin.incremental_alter_configs(
        {
            ConfigResource(ConfigResourceType.GROUP, group): [
                AlterConfigOp("share.auto.offset.reset", "earliest")
            ]
        }
    )


async def test_live_share_group(
    admin: Admin, kafka: KafkaService, topic: str, produce: Produce
) -> None:
    partitions = [TopicPartition(topic, p) for p in range(3)]
    for p in range(3):
        produce(kafka.bootstrap_servers, topic, p, [1_700_000_000_000] * RECORDS_PER_PARTITION)
    group = group_name()
    await _share_from_earliest(admin, group)

    async def listed() -> bool:
        return group in {g.group_id for g in await admin.list_share_groups()}

    async with java_share_consumer(kafka, topic, group) as java:
        took = await _until(listed, 60, "the share group in ListGroups")
        print(f"share group listed {took:.1f} s after the Java consumer started")
        assert ShareGroupListing(group, "Stable") in await admin.list_share_groups(
            states=["Stable"]
        )
        # a share group is not a consumer group
        assert group not in {g.group_id for g in await admin.list_consumer_groups()}

        described = (await admin.describe_share_groups([group]))[group]

        async def assigned() -> bool:
            # a member joins with no assignment; the next heartbeat brings it
            nonlocal described
            described = (await admin.describe_share_groups([group]))[group]
            return any(m.assignment for m in described.members)

        took = await _until(assigned, 30, "an assignment for the Java member")
        print(f"Java member assigned {took:.1f} s after the group was listed")
        assert described.group_id == group
        assert described.state == "Stable"
        assert described.assignor == "simple"
        assert described.group_epoch >= described.assignment_epoch > 0
        cluster = await admin.describe_cluster()
        assert described.coordinator in cluster.brokers
        (member,) = described.members
        assert member.client_id == "console-share-consumer"
        assert member.member_id and member.host
        assert member.member_epoch == described.assignment_epoch
        assert member.subscribed_topic_names == (topic,)
        # the only member is assigned every partition
        assert member.assignment == tuple(partitions)

        total = 3 * RECORDS_PER_PARTITION

        async def consumed_all() -> bool:
            return len(java.lines) >= total

        took = await _until(consumed_all, 60, f"{total} records printed by the Java consumer")
        print(f"{total} records consumed {took:.1f} s after the member was assigned")

        offsets: dict[TopicPartition, SharePartitionOffset] = {}

        async def acknowledged() -> bool:
            nonlocal offsets
            offsets = (await admin.describe_share_group_offsets({group: None}))[group]
            return sorted(offsets) == partitions and all(o.lag == 0 for o in offsets.values())

        took = await _until(acknowledged, 30, "no lag left in DescribeShareGroupOffsets")
        print(f"lag 0 in every partition {took:.1f} s after the records were printed: {offsets}")
        for o in offsets.values():
            # Kafka 4.3 keeps the start offset where it was (0) once every record of a
            # partition is acknowledged: lag, not start offset, says the work is done
            assert 0 <= o.start_offset <= RECORDS_PER_PARTITION
            assert o.leader_epoch == 0
        assert await admin.describe_share_group_offsets({group: partitions[:1]}) == {
            group: {partitions[0]: offsets[partitions[0]]}
        }

        # a group with members cannot be changed or deleted
        with pytest.raises(AdminBatchError) as info:
            await admin.alter_share_group_offsets(group, {partitions[0]: 0})
        assert isinstance(info.value.errors[partitions[0]], NonEmptyGroupError)
        with pytest.raises(AdminBatchError) as info:
            await admin.delete_share_group_offsets(group, [topic])
        assert isinstance(info.value.errors[topic], NonEmptyGroupError)
        with pytest.raises(AdminBatchError) as info:
            await admin.delete_share_groups([group])
        assert isinstance(info.value.errors[group], NonEmptyGroupError)

        began = time.monotonic()
    # the consumer leaves as it closes: the group is empty at once
    assert (await admin.describe_share_groups([group]))[group].state == "Empty"
    print(f"group empty {time.monotonic() - began:.1f} s after SIGTERM to the Java consumer")
    assert await admin.delete_share_groups([group]) == {group: None}
    assert not await listed()
    with pytest.raises(AdminBatchError) as info:
        await admin.describe_share_groups([group])
    assert isinstance(info.value.errors[group], GroupIdNotFoundError)


async def test_offsets_of_an_empty_share_group(
    admin: Admin, kafka: KafkaService, topic: str, produce: Produce
) -> None:
    """Altering the offsets of a group id never used makes an empty share group."""
    p0, p1, p2 = (TopicPartition(topic, p) for p in range(3))
    produce(kafka.bootstrap_servers, topic, 0, [1_700_000_000_000] * 10)
    group = group_name()
    assert await admin.alter_share_group_offsets(group, {p0: 4, p1: 100}) == {p0: None, p1: None}

    described = (await admin.describe_share_groups([group]))[group]
    assert (described.state, described.members) == ("Empty", ())
    assert ShareGroupListing(group, "Empty") in await admin.list_share_groups()

    offsets = (await admin.describe_share_group_offsets({group: None}))[group]
    # 10 records in p0: 6 left from offset 4; p1 starts past its end (no lag known)
    assert offsets == {
        p0: SharePartitionOffset(start_offset=4, leader_epoch=0, lag=6),
        p1: SharePartitionOffset(start_offset=100, leader_epoch=0, lag=None),
    }
    # a partition the group has no state for is left out
    assert await admin.describe_share_group_offsets({group: [p0, p2]}) == {group: {p0: offsets[p0]}}

    missing = TopicPartition("no-such-topic-" + topic, 0)
    with pytest.raises(AdminBatchError) as info:
        await admin.alter_share_group_offsets(group, {p2: 1, missing: 1})
    assert info.value.results == {p2: None}
    assert isinstance(info.value.errors[missing], UnknownTopicOrPartitionError)

    with pytest.raises(AdminBatchError) as info:
        await admin.delete_share_group_offsets(group, [topic, missing.topic])
    assert info.value.results == {topic: None}
    assert isinstance(info.value.errors[missing.topic], UnknownTopicOrPartitionError)
    assert await admin.describe_share_group_offsets({group: None}) == {group: {}}

    assert await admin.delete_share_groups([group]) == {group: None}
    assert group not in {g.group_id for g in await admin.list_share_groups()}


async def test_unknown_share_group(admin: Admin, topic: str) -> None:
    unknown = group_name()
    consumer_group = group_name()  # a simple consumer group: not a share group
    await admin.alter_consumer_group_offsets(consumer_group, {TopicPartition(topic, 0): 0})
    with pytest.raises(AdminBatchError) as info:
        await admin.describe_share_groups([unknown, consumer_group])
    assert info.value.results == {}
    assert isinstance(info.value.errors[unknown], GroupIdNotFoundError)
    assert isinstance(info.value.errors[consumer_group], GroupIdNotFoundError)
    assert consumer_group not in {g.group_id for g in await admin.list_share_groups()}

    # DescribeShareGroupOffsets does not tell an unknown group from one without state
    assert await admin.describe_share_group_offsets({unknown: None}) == {unknown: {}}

    with pytest.raises(AdminBatchError) as info:
        await admin.delete_share_groups([unknown])
    assert isinstance(info.value.errors[unknown], GroupIdNotFoundError)
