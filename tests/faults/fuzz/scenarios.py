"""Short client sessions, run against the real broker to record and against the
replaying fake broker to fuzz.

Both runs must send the same requests, so everything that shapes a request is fixed
here: names (from the corpus), keys, partitions, options. Every scenario is bounded:
``BOUND_S`` is the longest it may take when each step uses its whole timeout.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiokproto import Admin, Consumer, NewTopic, OffsetSpec, Producer, TopicPartition
from aiokproto.admin import ConfigResource, ConfigResourceType

# Small timeouts so that a hang shows quickly; the same for recording and replay.
REQUEST_TIMEOUT_MS = 1000
API_TIMEOUT_MS = 3000
COMMON: dict[str, Any] = {
    "client_id": "fuzz",
    "request_timeout_ms": REQUEST_TIMEOUT_MS,
    "default_api_timeout_ms": API_TIMEOUT_MS,
    "socket_connection_setup_timeout_ms": 1000,
    "retry_backoff_ms": 50,
    "retry_backoff_max_ms": 200,
    "reconnect_backoff_ms": 50,
    "reconnect_backoff_max_ms": 200,
}
DELIVERY_TIMEOUT_MS = 3000
MAX_BLOCK_MS = 2000
PRODUCER: dict[str, Any] = {
    **COMMON,
    "delivery_timeout_ms": DELIVERY_TIMEOUT_MS,
    "max_block_ms": MAX_BLOCK_MS,
    "linger_ms": 0,
}
POLL_MS = 300
POLLS = 6
CONSUMER: dict[str, Any] = {
    **COMMON,
    "auto_offset_reset": "earliest",
    "fetch_max_wait_ms": 200,
}
GROUP: dict[str, Any] = {
    **CONSUMER,
    "enable_auto_commit": False,
    "session_timeout_ms": 6000,
    "heartbeat_interval_ms": 100,
    "rebalance_timeout_ms": 2000,
}
STOP_MS = 2000
PARTITIONS = 3


@dataclass(frozen=True)
class Names:
    """What the recording session called its topics and group."""

    topic: str  # PARTITIONS partitions, created by the setup
    new_topic: str  # created and deleted by admin_topics
    group: str
    records: int  # records in ``topic`` once the producing scenarios ran

    @classmethod
    def from_corpus(cls, names: dict[str, str]) -> Names:
        return cls(names["topic"], names["new_topic"], names["group"], int(names["records"]))

    def as_corpus(self) -> dict[str, str]:
        return {
            "topic": self.topic,
            "new_topic": self.new_topic,
            "group": self.group,
            "records": str(self.records),
        }


Scenario = Callable[[str, Names], Awaitable[None]]


async def produce(bootstrap: str, names: Names) -> None:
    """Idempotent producer, gzip: acknowledged records to chosen partitions, then one
    placed by its key."""
    async with Producer(bootstrap_servers=bootstrap, compression_type="gzip", **PRODUCER) as p:
        for partition in range(PARTITIONS - 1):
            await p.send_and_wait(
                names.topic, b"value-%d" % partition, key=b"k%d" % partition, partition=partition
            )
        await p.send_and_wait(names.topic, b"keyed-value", key=b"keyed")


BATCH = 12


async def produce_batch(bootstrap: str, names: Names) -> None:
    """``send_batch`` of keyed records over every partition, zstd."""
    async with Producer(bootstrap_servers=bootstrap, compression_type="zstd", **PRODUCER) as p:
        delivery = await p.send_batch(
            names.topic,
            [b"batch-value-%d" % i for i in range(BATCH)],
            keys=[b"batch-key-%d" % i for i in range(BATCH)],
            headers=[("h", b"v")],
        )
        await delivery


async def _poll(consumer: Consumer, wanted: int) -> int:
    """Poll until every record came, then once more (an empty fetch, recorded too)."""
    got = 0
    for _ in range(POLLS):
        if got >= wanted:
            await consumer.getmany(timeout_ms=POLL_MS)
            break
        batch = await consumer.getmany(timeout_ms=POLL_MS)
        got += sum(len(records) for records in batch.values())
    return got


async def consume(bootstrap: str, names: Names) -> None:
    """Assigned partitions, no group: fetch everything from the beginning."""
    consumer = Consumer(bootstrap_servers=bootstrap, **CONSUMER)
    await consumer.start()
    try:
        consumer.assign([TopicPartition(names.topic, p) for p in range(PARTITIONS)])
        await _poll(consumer, names.records)
    finally:
        await consumer.stop(timeout_ms=STOP_MS)


async def group(bootstrap: str, names: Names) -> None:
    """A group member: join, sync, heartbeat, fetch, commit, offset fetch, leave."""
    consumer = Consumer(names.topic, bootstrap_servers=bootstrap, group_id=names.group, **GROUP)
    await consumer.start()
    try:
        await _poll(consumer, names.records)
        await consumer.commit()
        await consumer.committed(TopicPartition(names.topic, 0))
    finally:
        await consumer.stop(timeout_ms=STOP_MS)


async def admin_topics(bootstrap: str, names: Names) -> None:
    """Create, describe and delete a topic."""
    async with Admin(bootstrap_servers=bootstrap, **COMMON) as admin:
        new = NewTopic(names.new_topic, num_partitions=2, replication_factor=1)
        await admin.create_topics([new])
        await admin.describe_topics([names.new_topic])
        await admin.delete_topics([names.new_topic])


async def admin_info(bootstrap: str, names: Names) -> None:
    """Cluster, configs, groups and offsets."""
    async with Admin(bootstrap_servers=bootstrap, **COMMON) as admin:
        await admin.describe_cluster()
        await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, names.topic)])
        await admin.list_consumer_groups()
        await admin.list_offsets(
            {
                TopicPartition(names.topic, 0): OffsetSpec.latest(),
                TopicPartition(names.topic, 1): OffsetSpec.earliest(),
            }
        )
        await admin.list_consumer_group_offsets(names.group)


async def consume_offsets(bootstrap: str, names: Names) -> None:
    """Offsets without a group: first, last, by time; seek to the end, position."""
    consumer = Consumer(bootstrap_servers=bootstrap, **CONSUMER)
    await consumer.start()
    try:
        tps = [TopicPartition(names.topic, p) for p in range(PARTITIONS)]
        consumer.partitions_for_topic(names.topic)
        await consumer.beginning_offsets(tps)
        await consumer.end_offsets(tps)
        await consumer.offsets_for_times({tps[0]: 0})
        consumer.assign(tps)
        await consumer.seek_to_end(tps[1])
        await consumer.position(tps[1])
    finally:
        await consumer.stop(timeout_ms=STOP_MS)


PLAIN_RECORDS = 6


async def produce_plain(bootstrap: str, names: Names) -> None:
    """acks=1 without idempotence, lz4, lingering: several partitions per request."""
    options = {**PRODUCER, "linger_ms": 20, "acks": 1, "enable_idempotence": False}
    async with Producer(bootstrap_servers=bootstrap, compression_type="lz4", **options) as p:
        handles = [
            await p.send(names.topic, b"plain-%d" % i, partition=i % PARTITIONS)
            for i in range(PLAIN_RECORDS)
        ]
        for handle in handles:
            await handle


async def admin_groups(bootstrap: str, names: Names) -> None:
    """Describe the group, set its offsets, delete it."""
    async with Admin(bootstrap_servers=bootstrap, **COMMON) as admin:
        await admin.describe_consumer_groups([names.group])
        await admin.alter_consumer_group_offsets(names.group, {TopicPartition(names.topic, 0): 1})
        await admin.delete_consumer_groups([names.group])


# Recording order matters: later scenarios see what earlier ones wrote (the consumers
# expect ``Names.records`` records, so producing scenarios after them add none).
SCENARIOS: dict[str, Scenario] = {
    "produce": produce,
    "produce_batch": produce_batch,
    "consume": consume,
    "group": group,
    "admin_topics": admin_topics,
    "admin_info": admin_info,
    "consume_offsets": consume_offsets,
    "produce_plain": produce_plain,
    "admin_groups": admin_groups,
}

# The longest each scenario may take (seconds) with every step using its whole
# timeout, plus slack for back-offs: a case running longer is a hang.
_START_S = API_TIMEOUT_MS / 1000  # bootstrap metadata
_SLACK_S = 2.0
_DELIVERY_S = DELIVERY_TIMEOUT_MS / 1000
_SEND_S = MAX_BLOCK_MS / 1000 + _DELIVERY_S
BOUND_S: dict[str, float] = {
    # start (+ InitProducerId), each send (metadata wait + delivery), stop (waits up
    # to the delivery timeout)
    "produce": 2 * _START_S + PARTITIONS * _SEND_S + _DELIVERY_S + _SLACK_S,
    "produce_batch": 2 * _START_S + _SEND_S + _DELIVERY_S + _SLACK_S,
    # start, POLLS polls, stop
    "consume": _START_S + POLLS * POLL_MS / 1000 + STOP_MS / 1000 + _SLACK_S,
    # start, polls, commit, committed, stop
    "group": _START_S + POLLS * POLL_MS / 1000 + 2 * _START_S + STOP_MS / 1000 + _SLACK_S,
    # start, then three (admin_topics, admin_groups) or five (admin_info) calls of the
    # API timeout
    "admin_topics": 4 * _START_S + _SLACK_S,
    "admin_info": 6 * _START_S + _SLACK_S,
    "admin_groups": 4 * _START_S + _SLACK_S,
    # start, six calls of the API timeout, stop
    "consume_offsets": 7 * _START_S + STOP_MS / 1000 + _SLACK_S,
    # start, the first send waits for metadata, deliveries (concurrent), stop
    "produce_plain": _START_S + _SEND_S + 2 * _DELIVERY_S + _SLACK_S,
}
