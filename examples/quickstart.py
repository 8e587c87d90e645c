"""aiokproto quickstart: run with ``make demo``.

Starts a local single-node Kafka (unless KAFKA_BOOTSTRAP_SERVERS names a cluster),
creates a topic with the Admin client, produces keyed records with the Producer,
consumes them in a consumer group, commits, and shows the group's committed offsets.
"""

from __future__ import annotations

import asyncio
import os
import uuid

from aiokproto import Admin, Consumer, NewTopic, Producer, TopicPartition
from aiokproto.testing import DEFAULT_VERSION, PLAINTEXT_ONLY, LocalKafka
from aiokproto.testing.jars import is_resolved

TOPIC = "quickstart-events"
COUNT = 10


async def demo(bootstrap: str) -> None:
    async with Admin(bootstrap_servers=bootstrap) as admin:
        cluster = await admin.describe_cluster()
        print(f"cluster {cluster.cluster_id}: {len(cluster.brokers)} broker(s)")
        if TOPIC not in await admin.list_topics():
            await admin.create_topics([NewTopic(TOPIC, num_partitions=3, replication_factor=1)])
        print(f"topic {TOPIC}: 3 partitions")

    async with Producer(
        bootstrap_servers=bootstrap, acks="all", compression_type="zstd"
    ) as producer:
        deliveries = [
            await producer.send(
                TOPIC,
                f"event {i}".encode(),
                key=f"user-{i % 4}".encode(),
                headers=[("src", b"demo")],
            )
            for i in range(COUNT)
        ]
        for delivery in deliveries:
            meta = await delivery
            print(f"  produced to {meta.topic}[{meta.partition}] at offset {meta.offset}")

    group = f"quickstart-{uuid.uuid4().hex[:8]}"
    async with Consumer(
        TOPIC,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    ) as consumer:
        seen = 0
        for _ in range(30):  # bounded: a healthy broker needs one or two polls
            if seen >= COUNT:
                break
            batch = await consumer.getmany(timeout_ms=1000, max_records=100)
            for tp, records in sorted(batch.items()):
                for r in records:
                    where = f"{tp.topic}[{tp.partition}]@{r.offset}"
                    print(f"  consumed {where}: {r.key!r} -> {r.value!r}")
                seen += len(records)
        if seen < COUNT:
            raise SystemExit(f"consumed only {seen} of {COUNT} records")
        await consumer.commit()
        committed = {p: await consumer.committed(TopicPartition(TOPIC, p)) for p in range(3)}
        print(f"group {group} committed: {committed}")


def main() -> None:
    external = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if external:
        asyncio.run(demo(external))
        return
    if not is_resolved(DEFAULT_VERSION):  # else the first run is silent for ~30 s
        print(f"fetching Kafka {DEFAULT_VERSION}'s jars from Maven Central (once, about 124 MB)")
    with LocalKafka(security=PLAINTEXT_ONLY) as kafka:
        print(f"started Kafka {kafka.version} at {kafka.bootstrap_servers}")
        asyncio.run(demo(kafka.bootstrap_servers))
    print("broker stopped")


if __name__ == "__main__":
    main()
