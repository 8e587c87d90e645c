"""Helpers for consumer tests: topics filled by librdkafka (confluent-kafka)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aiokproto.admin import Admin, NewTopic

ck = pytest.importorskip("confluent_kafka")

BASE_TS = 1_700_000_000_000


def produce(
    bootstrap: str,
    topic: str,
    records: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes]] | None]],
    *,
    codec: str = "none",
    timestamps: bool = True,
    **extra: Any,
) -> None:
    """Produce ``(partition, key, value, headers)`` records with librdkafka, in order."""
    # Idempotence keeps the order: without it librdkafka may retry a first request that
    # met a just-created topic's missing leader behind later ones (seen on uvloop).
    producer = ck.Producer(
        {
            "bootstrap.servers": bootstrap,
            "compression.type": codec,
            "linger.ms": 5,
            "enable.idempotence": True,
            **extra,
        }
    )
    for i, (partition, key, value, headers) in enumerate(records):
        kwargs: dict[str, Any] = {"partition": partition}
        if timestamps:
            kwargs["timestamp"] = BASE_TS + i
        producer.produce(topic, value=value, key=key, headers=headers, **kwargs)
    assert producer.flush(30) == 0


async def aproduce(bootstrap: str, topic: str, records: list[Any], **kwargs: Any) -> None:
    await asyncio.to_thread(produce, bootstrap, topic, records, **kwargs)


async def create_topic(
    bootstrap: str, topic: str, partitions: int = 1, configs: dict[str, str] | None = None
) -> None:
    async with Admin(bootstrap_servers=bootstrap) as admin:
        await admin.create_topics(
            [
                NewTopic(
                    topic,
                    num_partitions=partitions,
                    replication_factor=1,
                    topic_configs=configs or {},
                )
            ]
        )


async def set_group_timeouts(
    bootstrap: str, group: str, *, session_ms: int, heartbeat_ms: int
) -> None:
    """KIP-848 groups take their session timeout and heartbeat interval from the group's
    config (the harness lowers the broker's floors so tests can go down to 6 s)."""
    from aiokproto.admin import AlterConfigOp, ConfigResource, ConfigResourceType

    resource = ConfigResource(ConfigResourceType.GROUP, group)
    ops = [
        AlterConfigOp("consumer.session.timeout.ms", str(session_ms)),
        AlterConfigOp("consumer.heartbeat.interval.ms", str(heartbeat_ms)),
    ]
    async with Admin(bootstrap_servers=bootstrap) as admin:
        await admin.incremental_alter_configs({resource: ops})
