"""Helpers for the Spark tests: topics and test input written by an independent client,
and the source's and sink's reads and writes with options given as keywords."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiokproto.admin import Admin, NewTopic
from aiokproto.consumer import Consumer, ConsumerRecord
from aiokproto.structs import TopicPartition


async def create_topic_async(bootstrap: str, name: str, partitions: int = 1) -> None:
    async with Admin(bootstrap_servers=bootstrap) as admin:
        await admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
        async with asyncio.timeout(15):
            while name not in await admin.list_topics():  # noqa: ASYNC110 - polling
                await asyncio.sleep(0.05)


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    asyncio.run(create_topic_async(bootstrap, name, partitions))


def produce(
    bootstrap: str,
    topic: str,
    records: list[tuple[bytes | None, bytes | None, int | None]],
    headers: list[tuple[str, bytes]] | None = None,
    timestamp_ms: int | None = None,
) -> None:
    """Write ``(key, value, partition)`` records with librdkafka (an independent client)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    errors: list[Any] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    for key, value, partition in records:
        kwargs: dict[str, Any] = {"key": key, "value": value, "on_delivery": delivered}
        if partition is not None:
            kwargs["partition"] = partition
        if headers:
            kwargs["headers"] = headers
        if timestamp_ms is not None:
            kwargs["timestamp"] = timestamp_ms
        while True:
            try:
                producer.produce(topic, **kwargs)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    deadline = time.monotonic() + 60
    while producer.flush(1) and time.monotonic() < deadline:
        pass
    assert not errors, errors
    assert len(producer) == 0, "records still undelivered after 60 s"


def consume_all(
    bootstrap: str,
    topic: str,
    expected: int,
    timeout_s: float = 60.0,
    isolation_level: str = "read_uncommitted",
) -> list[ConsumerRecord]:
    """Read ``expected`` records of every partition of ``topic`` with the aiokproto Consumer."""

    async def go() -> list[ConsumerRecord]:
        out: list[ConsumerRecord] = []
        async with Consumer(
            bootstrap_servers=bootstrap,
            group_id=None,
            auto_offset_reset="earliest",
            isolation_level=isolation_level,
        ) as consumer:
            await consumer.topics()  # a metadata refresh that covers the topic
            parts = consumer.partitions_for_topic(topic)
            assert parts, f"topic {topic} has no partitions"
            consumer.assign([TopicPartition(topic, p) for p in sorted(parts)])
            async with asyncio.timeout(timeout_s):
                while len(out) < expected:
                    got = await consumer.getmany(timeout_ms=500)
                    for records in got.values():
                        out.extend(records)
            # nothing beyond what was expected (duplicates would show up here)
            extra = await consumer.getmany(timeout_ms=300)
            out.extend(r for records in extra.values() for r in records)
        return out

    return asyncio.run(go())


def _with(builder: Any, bootstrap: str, registry_url: str | None, options: dict[str, str]) -> Any:
    """``builder`` (a reader or writer of format aiokproto) with the bootstrap servers,
    ``schema.registry.url`` when given, then ``options`` (Spark's names) in order."""
    builder = builder.format("aiokproto").option("kafka.bootstrap.servers", bootstrap)
    if registry_url is not None:
        builder = builder.option("schema.registry.url", registry_url)
    for name, value in options.items():
        builder = builder.option(name, value)
    return builder


def read(spark: Any, bootstrap: str, registry_url: str | None = None, **options: str) -> Any:
    """A batch read of the source: its DataFrame."""
    return _with(spark.read, bootstrap, registry_url, options).load()


def read_stream(spark: Any, bootstrap: str, **options: str) -> Any:
    """A streaming read of the source: its DataFrame."""
    return _with(spark.readStream, bootstrap, None, options).load()


def write(df: Any, bootstrap: str, registry_url: str | None = None, **options: str) -> None:
    """A batch write of ``df`` by the sink (mode append)."""
    _with(df.write, bootstrap, registry_url, options).mode("append").save()
