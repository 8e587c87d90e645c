"""Topic and config administration against the real broker."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from aiokproto.admin import (
    Admin,
    AdminBatchError,
    AlterConfigOp,
    AlterConfigOpType,
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
    NewPartitions,
    NewTopic,
)
from aiokproto.errors import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    KafkaConfigError,
    TopicAlreadyExistsError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)

Helper = Callable[..., Awaitable[None]]


async def test_create_topics_reports_each_topic(
    admin: Admin, topic_name: str, wait_for_topics: Helper
) -> None:
    first = NewTopic(
        topic_name, num_partitions=2, replication_factor=1, topic_configs={"retention.ms": "1000"}
    )
    created = await admin.create_topics([first])
    assert created[topic_name].num_partitions == 2
    assert created[topic_name].replication_factor == 1
    assert isinstance(created[topic_name].topic_id, uuid.UUID)

    other = topic_name + "-b"
    with pytest.raises(AdminBatchError) as info:
        await admin.create_topics([first, NewTopic(other, num_partitions=1)])
    assert set(info.value.errors) == {topic_name}
    assert isinstance(info.value.errors[topic_name], TopicAlreadyExistsError)
    assert info.value.results[other].num_partitions == 1
    assert topic_name in str(info.value) and "TopicAlreadyExistsError" in str(info.value)
    await wait_for_topics(admin, other)


async def test_create_topics_validate_only_and_broker_side_errors(
    admin: Admin, topic_name: str
) -> None:
    result = await admin.create_topics([NewTopic(topic_name, num_partitions=4)], validate_only=True)
    assert result[topic_name].num_partitions == 4
    assert topic_name not in await admin.list_topics()
    with pytest.raises(AdminBatchError) as info:
        await admin.create_topics([NewTopic(topic_name, 1, replication_factor=5)])
    assert isinstance(info.value.errors[topic_name], InvalidReplicationFactorError)


async def test_bad_new_topic_fails_before_any_request() -> None:
    with pytest.raises(KafkaConfigError, match="num_partitions"):
        NewTopic("t", num_partitions=0)
    with pytest.raises(KafkaConfigError, match="not both"):
        NewTopic("t", num_partitions=1, replica_assignments={0: [1]})
    admin = Admin(bootstrap_servers="127.0.0.1:1")
    with pytest.raises(KafkaConfigError, match="twice"):
        await admin.create_topics([NewTopic("a"), NewTopic("a")])


async def test_list_topics_hides_internal_topics(admin: Admin, topic: str) -> None:
    visible = await admin.list_topics()
    assert topic in visible
    assert not any(name.startswith("__") for name in visible)
    assert set(visible) <= set(await admin.list_topics(include_internal=True))


async def test_describe_topics_by_name_and_id(admin: Admin, topic: str) -> None:
    by_name = await admin.describe_topics([topic], include_authorized_operations=True)
    desc = by_name[topic]
    assert desc.name == topic and not desc.is_internal
    assert [p.partition for p in desc.partitions] == [0, 1, 2]
    for part in desc.partitions:
        assert part.leader is not None
        assert part.isr == part.replicas == (part.leader,)
    assert desc.topic_id is not None
    assert desc.authorized_operations  # no authorizer: everything is allowed

    by_id = await admin.describe_topics([desc.topic_id])
    assert by_id[desc.topic_id].name == topic
    assert by_id[desc.topic_id].authorized_operations is None

    missing_id = uuid.uuid4()
    with pytest.raises(AdminBatchError) as info:
        await admin.describe_topics([topic, "no-such-topic-" + topic, missing_id])
    assert set(info.value.results) == {topic}
    assert isinstance(info.value.errors["no-such-topic-" + topic], UnknownTopicOrPartitionError)
    assert isinstance(info.value.errors[missing_id], UnknownTopicIdError)


async def test_delete_topics_by_name_and_id(admin: Admin, topic_name: str, create: Helper) -> None:
    a, b = topic_name + "-a", topic_name + "-b"
    await create(admin, NewTopic(a, 1), NewTopic(b, 1))
    topic_id = (await admin.describe_topics([b]))[b].topic_id
    assert topic_id is not None
    assert await admin.delete_topics([a, topic_id]) == {a: None, topic_id: None}
    with pytest.raises(AdminBatchError) as info:
        await admin.delete_topics([a])
    assert isinstance(info.value.errors[a], UnknownTopicOrPartitionError)
    remaining = await admin.list_topics()
    assert a not in remaining and b not in remaining


async def test_create_partitions(admin: Admin, topic: str) -> None:
    missing = "no-such-topic-" + topic
    assert await admin.create_partitions({topic: NewPartitions(5)}) == {topic: None}
    async with asyncio.timeout(10):  # the new partitions reach the broker's metadata soon
        while len((await admin.describe_topics([topic]))[topic].partitions) < 5:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
    with pytest.raises(AdminBatchError) as info:
        await admin.create_partitions({topic: NewPartitions(2), missing: NewPartitions(2)})
    assert isinstance(info.value.errors[topic], InvalidPartitionsError)
    assert isinstance(info.value.errors[missing], UnknownTopicOrPartitionError)
    with pytest.raises(KafkaConfigError):
        NewPartitions(0)


async def test_describe_configs_of_topic_and_broker(
    admin: Admin, topic_name: str, create: Helper
) -> None:
    await create(admin, NewTopic(topic_name, 1, topic_configs={"retention.ms": "12345"}))
    broker_id = (await admin.describe_cluster()).brokers[0].node_id
    topic_res = ConfigResource(ConfigResourceType.TOPIC, topic_name)
    broker_res = ConfigResource(ConfigResourceType.BROKER, str(broker_id))
    configs = await admin.describe_configs(
        [topic_res, broker_res], include_synonyms=True, include_documentation=True
    )
    retention = configs[topic_res]["retention.ms"]
    assert retention.value == "12345"
    assert retention.source is ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert not retention.is_default
    assert retention.synonyms and retention.synonyms[0].value == "12345"
    assert retention.documentation
    assert configs[broker_res]["num.io.threads"].value == "4"
    assert configs[broker_res]["num.io.threads"].source is ConfigSource.STATIC_BROKER_CONFIG

    missing = ConfigResource(ConfigResourceType.TOPIC, "no-such-topic-" + topic_name)
    with pytest.raises(AdminBatchError) as info:
        await admin.describe_configs([topic_res, missing])
    assert topic_res in info.value.results
    assert isinstance(info.value.errors[missing], UnknownTopicOrPartitionError)
    with pytest.raises(KafkaConfigError):
        await admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "x")])


async def _configs_when(
    admin: Admin, res: ConfigResource, done: Callable[[dict[str, Any]], bool], within: float = 10
) -> dict[str, Any]:
    """The resource's configs once ``done`` holds for them (the last ones after
    ``within`` seconds, for the caller's asserts to explain)."""
    loop = asyncio.get_running_loop()
    give_up = loop.time() + within
    while True:
        configs = (await admin.describe_configs([res]))[res]
        if done(configs) or loop.time() > give_up:
            return configs
        await asyncio.sleep(0.05)


async def test_incremental_alter_configs(admin: Admin, topic: str) -> None:
    res = ConfigResource(ConfigResourceType.TOPIC, topic)
    changes = [
        AlterConfigOp("retention.ms", "60000"),
        AlterConfigOp("cleanup.policy", "compact", AlterConfigOpType.APPEND),
    ]
    assert await admin.incremental_alter_configs({res: changes}) == {res: None}
    # Kafka 4.4 answers DescribeConfigs from the broker's metadata, which takes the
    # change a moment after the controller acknowledged it: wait until it is there
    configs = await _configs_when(admin, res, lambda c: c["retention.ms"].value == "60000")
    assert configs["retention.ms"].value == "60000"
    assert configs["cleanup.policy"].value == "delete,compact"

    await admin.incremental_alter_configs(
        {
            res: [
                AlterConfigOp("retention.ms", op_type=AlterConfigOpType.DELETE),
                AlterConfigOp("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT),
            ]
        }
    )
    configs = await _configs_when(
        admin, res, lambda c: c["retention.ms"].source is not ConfigSource.DYNAMIC_TOPIC_CONFIG
    )
    # the topic's override is gone (the test broker sets its own retention.ms)
    assert configs["retention.ms"].source is not ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert configs["retention.ms"].value != "60000"
    assert configs["cleanup.policy"].value == "compact"

    missing = ConfigResource(ConfigResourceType.TOPIC, "no-such-topic-" + topic)
    with pytest.raises(AdminBatchError) as info:
        await admin.incremental_alter_configs(
            {
                res: [AlterConfigOp("retention.ms", "1")],
                missing: [AlterConfigOp("retention.ms", "1")],
            },
            validate_only=True,
        )
    assert res in info.value.results
    assert isinstance(info.value.errors[missing], UnknownTopicOrPartitionError)
