"""Consumer-group administration against the real broker (requests go to coordinators)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as RdTopicPartition

from aiokproto.admin import (
    Admin,
    AdminBatchError,
    ConsumerGroupDescription,
    NewTopic,
    OffsetAndMetadata,
    TopicPartition,
)
from aiokproto.consumer import Consumer as AioConsumer
from aiokproto.errors import (
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    NonEmptyGroupError,
    UnknownMemberIdError,
    UnknownTopicOrPartitionError,
)
from aiokproto.testing.discovery import KafkaService

Produce = Callable[[str, str, int, list[int]], None]
Create = Callable[..., Awaitable[None]]


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


@pytest.mark.kafka39
async def test_describe_unknown_group(admin: Admin) -> None:
    group = group_name()
    try:
        described = await admin.describe_consumer_groups([group])
    except AdminBatchError as exc:  # DescribeGroups v6+ says GROUP_ID_NOT_FOUND
        assert isinstance(exc.errors[group], GroupIdNotFoundError)
    else:  # older brokers describe a "Dead" group
        assert described[group].state == "Dead"


# -- KIP-848: ConsumerGroupDescribe, with DescribeGroups for classic groups ---------


@contextlib.asynccontextmanager
async def consumer_protocol_members(
    kafka: KafkaService, group: str, topic: str, count: int
) -> AsyncIterator[list[AioConsumer]]:
    """``count`` members of a consumer-protocol group, polled until each owns partitions
    and they share the topic's partitions out between them."""
    async with contextlib.AsyncExitStack() as stack:
        members = [
            await stack.enter_async_context(
                AioConsumer(
                    topic,
                    bootstrap_servers=kafka.bootstrap_servers,
                    group_id=group,
                    group_protocol="consumer",
                    auto_offset_reset="earliest",
                    client_id=f"member-{i}",
                )
            )
            for i in range(count)
        ]
        async with asyncio.timeout(45):
            while not _shared_out([m.assignment() for m in members]):
                await asyncio.gather(*(m.getmany(timeout_ms=100) for m in members))
        polls = [asyncio.create_task(_keep_polling(m)) for m in members]
        try:
            yield members
        finally:
            for task in polls:
                task.cancel()
            await asyncio.gather(*polls, return_exceptions=True)


async def _keep_polling(consumer: AioConsumer) -> None:
    while True:
        await consumer.getmany(timeout_ms=200)


def _shared_out(assignments: list[frozenset[TopicPartition]]) -> bool:
    """Every member owns partitions and no partition is owned twice."""
    owned = [tp for a in assignments for tp in a]
    return all(assignments) and len(owned) == len(set(owned))


async def _reconciled(admin: Admin, group: str, members: int) -> ConsumerGroupDescription:
    """The group's description once it is Stable with every member's acknowledged
    assignment equal to its target (clients own partitions a heartbeat earlier)."""
    async with asyncio.timeout(30):
        while True:
            described = (
                await admin.describe_consumer_groups([group], include_authorized_operations=True)
            )[group]
            settled = all(
                m.assignment and m.assignment == m.target_assignment for m in described.members
            )
            if described.state == "Stable" and len(described.members) == members and settled:
                return described
            await asyncio.sleep(0.2)


@contextlib.contextmanager
def classic_member(kafka: KafkaService, group: str, topic: str) -> Iterator[Consumer]:
    """A member of a classic group (librdkafka, protocol "consumer", range/roundrobin)."""
    consumer = Consumer(
        {
            "bootstrap.servers": kafka.bootstrap_servers,
            "group.id": group,
            "client.id": "classic-client",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe([topic])
        yield consumer
    finally:
        consumer.close()


async def _until_assigned(consumer: Consumer) -> None:
    for _ in range(150):
        await asyncio.to_thread(consumer.poll, 0.2)
        if consumer.assignment():
            return
    raise AssertionError("the classic member got no partitions")


async def test_describe_consumer_protocol_group(
    admin: Admin, kafka: KafkaService, topic_name: str, create: Create
) -> None:
    if kafka.version.startswith("3."):
        pytest.skip("group_protocol='consumer' needs Kafka 4.x")
    await create(admin, NewTopic(topic_name, num_partitions=4, replication_factor=1))
    group = group_name()
    everything = {TopicPartition(topic_name, p) for p in range(4)}
    async with consumer_protocol_members(kafka, group, topic_name, 2) as consumers:
        described = await _reconciled(admin, group, 2)
        owned = {c.assignment() for c in consumers}
    assert described.type == "consumer" and not described.is_simple_consumer_group
    assert described.group_epoch and described.group_epoch > 0
    assert described.assignment_epoch == described.group_epoch
    assert described.server_assignor in ("uniform", "range")
    assert described.partition_assignor == described.server_assignor
    assert described.authorized_operations
    assert described.coordinator.node_id >= 0
    assert {m.client_id for m in described.members} == {"member-0", "member-1"}
    for m in described.members:
        assert m.member_epoch and m.member_epoch > 0
        assert m.subscribed_topic_names == (topic_name,)
        assert m.subscribed_topic_regex is None
        assert m.group_instance_id is None and m.rack is None and m.host
        assert m.target_assignment == m.assignment
    current = [set(m.assignment) for m in described.members]
    assert set().union(*current) == everything
    assert sum(map(len, current)) == 4  # no partition twice
    assert {frozenset(a) for a in current} == owned  # what the clients themselves own

    listed = {g.group_id: g for g in await admin.list_consumer_groups()}
    assert listed[group].type == "consumer" and listed[group].protocol_type == "consumer"
    consumer_groups = await admin.list_consumer_groups(types=["consumer"])
    assert group in {g.group_id for g in consumer_groups}
    assert group not in {g.group_id for g in await admin.list_consumer_groups(types=["classic"])}


@pytest.mark.kafka39  # 3.9.1 answers ConsumerGroupDescribe with UNSUPPORTED_VERSION
async def test_describe_classic_group_through_the_fallback(
    admin: Admin, kafka: KafkaService, topic: str
) -> None:
    group = group_name()
    with classic_member(kafka, group, topic) as consumer:
        await _until_assigned(consumer)
        described = (await admin.describe_consumer_groups([group]))[group]
        listed = {g.group_id: g for g in await admin.list_consumer_groups(types=["classic"])}
    assert described.type == "classic" and described.state == "Stable"
    assert described.partition_assignor in ("range", "roundrobin")
    assert described.server_assignor is None
    assert described.group_epoch is None and described.assignment_epoch is None
    (member,) = described.members
    assert member.client_id == "classic-client"
    assert sorted(member.assignment) == [TopicPartition(topic, p) for p in range(3)]
    assert member.member_epoch is None and member.target_assignment is None
    assert member.subscribed_topic_names is None
    assert listed[group].type == "classic" and listed[group].protocol_type == "consumer"


async def test_describe_both_kinds_and_an_unknown_group_in_one_call(
    admin: Admin, kafka: KafkaService, topic_name: str, create: Create
) -> None:
    if kafka.version.startswith("3."):
        pytest.skip("group_protocol='consumer' needs Kafka 4.x")
    await create(admin, NewTopic(topic_name, num_partitions=2, replication_factor=1))
    new, simple, unknown = group_name(), group_name(), group_name()
    await admin.alter_consumer_group_offsets(simple, {TopicPartition(topic_name, 0): 0})
    async with consumer_protocol_members(kafka, new, topic_name, 1):
        await _reconciled(admin, new, 1)
        with pytest.raises(AdminBatchError) as info:
            await admin.describe_consumer_groups([new, simple, unknown])
    results = info.value.results
    assert results[new].type == "consumer"
    assert set(results[new].members[0].assignment) == {
        TopicPartition(topic_name, p) for p in range(2)
    }
    assert results[simple].type == "classic" and results[simple].is_simple_consumer_group
    assert results[simple].state == "Empty" and results[simple].members == ()
    assert list(info.value.errors) == [unknown]
    assert isinstance(info.value.errors[unknown], GroupIdNotFoundError)
