"""Consumer-group administration against the real broker (requests go to coordinators)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as RdTopicPartition

from aiokproto.admin import Admin, AdminBatchError, OffsetAndMetadata, TopicPartition
from aiokproto.errors import (
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    NonEmptyGroupError,
    UnknownMemberIdError,
    UnknownTopicOrPartitionError,
)
from aiokproto.testing.discovery import KafkaService

Produce = Callable[[str, str, int, list[int]], None]


def group_name() -> str:
    return f"g-{uuid.uuid4().hex[:10]}"


async def test_offsets_of_a_simple_group(admin: Admin, topic: str) -> None:
    group = group_name()
    p0, p1, p2 = (TopicPartition(topic, p) for p in range(3))
    missing = TopicPartition("no-such-topic-" + topic, 0)
    with pytest.raises(AdminBatchError) as info:
        await admin.alter_consumer_group_offsets(
            group, {p0: 5, p1: OffsetAndMetadata(7, "meta", 0), missing: 1}
        )
    assert info.value.results == {p0: None, p1: None}
    assert isinstance(info.value.errors[missing], UnknownTopicOrPartitionError)

    committed = await admin.list_consumer_group_offsets(group)
    assert committed == {p0: OffsetAndMetadata(5, "", None), p1: OffsetAndMetadata(7, "meta", 0)}
    assert await admin.list_consumer_group_offsets(group, [p1, p2]) == {p1: committed[p1]}

    listed = {g.group_id: g for g in await admin.list_consumer_groups()}
    assert listed[group].is_simple_consumer_group
    assert listed[group].state == "Empty"
    assert group in {g.group_id for g in await admin.list_consumer_groups(states=["Empty"])}
    assert group not in {g.group_id for g in await admin.list_consumer_groups(states=["Stable"])}

    described = (await admin.describe_consumer_groups([group]))[group]
    assert described.state == "Empty" and described.members == ()
    assert described.is_simple_consumer_group

    assert await admin.delete_consumer_group_offsets(group, [p0]) == {p0: None}
    assert list(await admin.list_consumer_group_offsets(group)) == [p1]

    other = group_name()
    with pytest.raises(AdminBatchError) as info:
        await admin.delete_consumer_groups([group, other])
    assert info.value.results == {group: None}
    assert isinstance(info.value.errors[other], GroupIdNotFoundError)
    assert await admin.list_consumer_group_offsets(group) == {}


async def test_group_with_an_active_member(
    admin: Admin, kafka: KafkaService, topic: str, produce: Produce
) -> None:
    produce(kafka.bootstrap_servers, topic, 0, [1])
    group = group_name()
    consumer = Consumer(
        {
            "bootstrap.servers": kafka.bootstrap_servers,
            "group.id": group,
            "client.id": "member-client",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic])
        for _ in range(100):
            await asyncio.to_thread(consumer.poll, 0.2)
            if consumer.assignment():
                break
        assert consumer.assignment()
        described = (
            await admin.describe_consumer_groups([group], include_authorized_operations=True)
        )[group]
        assert described.state == "Stable"
        assert described.partition_assignor
        (member,) = described.members
        assert member.client_id == "member-client"
        assert sorted(member.assignment) == [TopicPartition(topic, p) for p in range(3)]
        assert described.authorized_operations
        assert described.coordinator.node_id >= 0

        p0 = TopicPartition(topic, 0)
        with pytest.raises(AdminBatchError) as info:
            await admin.alter_consumer_group_offsets(group, {p0: 1})
        assert isinstance(info.value.errors[p0], UnknownMemberIdError)
        consumer.commit(offsets=[RdTopicPartition(topic, 0, 1)], asynchronous=False)
        with pytest.raises(AdminBatchError) as info:
            await admin.delete_consumer_group_offsets(group, [p0])
        assert isinstance(info.value.errors[p0], GroupSubscribedToTopicError)
        with pytest.raises(AdminBatchError) as info:
            await admin.delete_consumer_groups([group])
        assert isinstance(info.value.errors[group], NonEmptyGroupError)
    finally:
        await asyncio.to_thread(consumer.close)
    # The member left: the group is empty, its offsets may be changed and deleted.
    p1 = TopicPartition(topic, 1)
    await admin.alter_consumer_group_offsets(group, {p0: 1, p1: 1})
    # (p1 keeps the group alive: Kafka 3.9 drops an empty group with no offsets left)
    assert await admin.delete_consumer_group_offsets(group, [p0]) == {p0: None}
    assert await admin.delete_consumer_groups([group]) == {group: None}


async def test_describe_unknown_group(admin: Admin) -> None:
    group = group_name()
    try:
        described = await admin.describe_consumer_groups([group])
    except AdminBatchError as exc:  # DescribeGroups v6+ says GROUP_ID_NOT_FOUND
        assert isinstance(exc.errors[group], GroupIdNotFoundError)
    else:  # older brokers describe a "Dead" group
        assert described[group].state == "Dead"
