"""Partition-scoped calls (to each leader) and broker fan-outs, against the real broker."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from aiokproto.admin import (
    Admin,
    AdminBatchError,
    DeletedRecords,
    ElectionType,
    IsolationLevel,
    OffsetSpec,
    TopicPartition,
)
from aiokproto.errors import (
    ElectionNotNeededError,
    KafkaConfigError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
)
from aiokproto.testing.discovery import KafkaService

Produce = Callable[[str, str, int, list[int]], None]


async def test_list_offsets_every_spec(
    admin: Admin, kafka: KafkaService, topic: str, produce: Produce
) -> None:
    base = int(time.time() * 1000) - 60_000
    # Timestamps out of order: the max-timestamp record is not the last one.
    produce(kafka.bootstrap_servers, topic, 1, [base, base + 1000, base + 5000, base + 2000])
    p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    found = await admin.list_offsets(
        {p0: OffsetSpec.latest(), p1: OffsetSpec.latest()},
        isolation_level=IsolationLevel.READ_COMMITTED,
    )
    assert found[p0].offset == 0 and found[p1].offset == 4
    assert (await admin.list_offsets({p1: OffsetSpec.earliest()}))[p1].offset == 0
    by_time = await admin.list_offsets({p1: OffsetSpec.for_timestamp(base + 1500)})
    assert by_time[p1].offset == 2 and by_time[p1].timestamp == base + 5000
    newest = await admin.list_offsets({p1: OffsetSpec.max_timestamp()})
    assert newest[p1].offset == 2 and newest[p1].timestamp == base + 5000
    assert newest[p1].leader_epoch == 0
    later = await admin.list_offsets({p1: OffsetSpec.for_timestamp(base + 999_999)})
    assert later[p1].offset == -1


async def test_list_offsets_reports_unknown_partitions(admin: Admin, topic: str) -> None:
    good, bad_partition = TopicPartition(topic, 0), TopicPartition(topic, 99)
    bad_topic = TopicPartition("no-such-topic-" + topic, 0)
    began = time.monotonic()
    with pytest.raises(AdminBatchError) as info:
        await admin.list_offsets(
            {tp: OffsetSpec.latest() for tp in (good, bad_partition, bad_topic)}
        )
    assert time.monotonic() - began < 5  # reported at once, not retried until the timeout
    assert info.value.results == {good: (0, -1, 0)}
    assert isinstance(info.value.errors[bad_partition], UnknownTopicOrPartitionError)
    assert isinstance(info.value.errors[bad_topic], UnknownTopicOrPartitionError)
    assert "no-such-topic" not in await admin.list_topics()  # lookups never create topics
    with pytest.raises(KafkaConfigError):
        await admin.list_offsets({good: -1})  # type: ignore[dict-item]


async def test_delete_records(
    admin: Admin, kafka: KafkaService, topic: str, produce: Produce
) -> None:
    produce(kafka.bootstrap_servers, topic, 0, [1, 2, 3, 4, 5])
    produce(kafka.bootstrap_servers, topic, 2, [1, 2])
    p0, p1, p2 = (TopicPartition(topic, p) for p in range(3))
    done = await admin.delete_records({p0: 3, p2: -1})
    assert done == {p0: DeletedRecords(3), p2: DeletedRecords(2)}
    earliest = await admin.list_offsets({p0: OffsetSpec.earliest(), p2: OffsetSpec.earliest()})
    assert earliest[p0].offset == 3 and earliest[p2].offset == 2
    with pytest.raises(AdminBatchError) as info:
        await admin.delete_records({p0: 4, p1: 10})
    assert info.value.results == {p0: DeletedRecords(4)}
    assert isinstance(info.value.errors[p1], OffsetOutOfRangeError)


async def test_elect_leaders(admin: Admin, topic: str) -> None:
    p0 = TopicPartition(topic, 0)
    missing = TopicPartition("no-such-topic-" + topic, 0)
    with pytest.raises(AdminBatchError) as info:
        await admin.elect_leaders(ElectionType.PREFERRED, [p0, missing])
    assert isinstance(info.value.errors[p0], ElectionNotNeededError)
    assert isinstance(info.value.errors[missing], UnknownTopicOrPartitionError)
    # All partitions: the broker leaves out those that already have their leader.
    assert await admin.elect_leaders(ElectionType.PREFERRED) == {}
    with pytest.raises(AdminBatchError) as info:
        await admin.elect_leaders(ElectionType.UNCLEAN, [p0])
    assert isinstance(info.value.errors[p0], ElectionNotNeededError)


async def test_describe_log_dirs(
    admin: Admin, kafka: KafkaService, topic: str, produce: Produce
) -> None:
    produce(kafka.bootstrap_servers, topic, 0, [1, 2])
    broker = (await admin.describe_cluster()).brokers[0].node_id
    everything = await admin.describe_log_dirs()
    assert list(everything) == [broker]
    (log_dir,) = everything[broker].values()
    assert log_dir.error is None
    assert TopicPartition(topic, 0) in log_dir.replicas
    assert log_dir.replicas[TopicPartition(topic, 0)].size > 0
    assert log_dir.total_bytes and log_dir.usable_bytes
    only = await admin.describe_log_dirs([broker], [TopicPartition(topic, 1)])
    (log_dir,) = only[broker].values()
    assert list(log_dir.replicas) == [TopicPartition(topic, 1)]
