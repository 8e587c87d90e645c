"""Producer test helpers: topics through Admin, read-back through librdkafka."""

from __future__ import annotations

import time
import uuid
from typing import Any

from aiokproto.admin import Admin, NewTopic

# Fail fast in tests instead of minutes of retries when something is wrong.
FAST: dict[str, Any] = {
    "default_api_timeout_ms": 20_000,
    "retry_backoff_ms": 50,
    "retry_backoff_max_ms": 500,
    "max_block_ms": 20_000,
}


async def create_topic(
    bootstrap: str,
    name: str,
    partitions: int = 1,
    replication: int = 1,
    configs: dict[str, str] | None = None,
) -> str:
    async with Admin(bootstrap_servers=bootstrap) as admin:
        await admin.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=replication,
                      topic_configs=configs or {})]
        )
    return name


def consume(bootstrap: str, topic: str, count: int, partitions: int = 1,
            within: float = 60.0) -> list[Any]:
    """Read ``count`` messages from offset 0 of every partition with librdkafka."""
    import confluent_kafka

    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"producer-test-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.max.bytes": 8 << 20,
        }
    )
    consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[Any] = []
    deadline = time.monotonic() + within
    try:
        while len(got) < count and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=10_000, timeout=0.5):
                assert msg.error() is None, msg.error()
                got.append(msg)
    finally:
        consumer.close()
    return got
