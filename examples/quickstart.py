"""aiokproto quickstart: run with ``make demo``.

Starts a local single-node Kafka (unless KAFKA_BOOTSTRAP_SERVERS names a cluster),
creates a topic with the Admin client, writes a record batch built by aiokproto's
record codec through the protocol layer, reads it back and lists the offsets.
(The Producer and Consumer classes replace the middle part as they land.)
"""

from __future__ import annotations

import asyncio
import os
import time

from aiokproto.admin import Admin, NewTopic, OffsetSpec, TopicPartition
from aiokproto.cluster.client import ClusterClient
from aiokproto.config import split_options
from aiokproto.errors import for_code
from aiokproto.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from aiokproto.protocol.messages.produce import (
    ProduceRequest,
    ProduceRequestPartitionProduceData,
    ProduceRequestTopicProduceData,
)
from aiokproto.records import RecordBatchBuilder, compression, read_batches
from aiokproto.testing import PLAINTEXT_ONLY, LocalKafka

TOPIC = "quickstart-events"


async def demo(bootstrap: str) -> None:
    async with Admin(bootstrap_servers=bootstrap) as admin:
        cluster = await admin.describe_cluster()
        print(f"cluster {cluster.cluster_id}: {len(cluster.brokers)} broker(s)")
        if TOPIC not in await admin.list_topics():
            await admin.create_topics([NewTopic(TOPIC, num_partitions=3, replication_factor=1)])
        (description,) = (await admin.describe_topics([TOPIC])).values()
        print(f"topic {TOPIC}: {len(description.partitions)} partitions")

        config, _ = split_options({"bootstrap_servers": bootstrap}, (), "quickstart")
        async with ClusterClient(config) as client:
            client.metadata.track([TOPIC])
            snap = await client.metadata.wait_for(lambda s: s.leader_for(TOPIC, 0) is not None, 30)
            leader = snap.leader_for(TOPIC, 0)
            assert leader is not None
            topic_id = snap.topics[TOPIC].topic_id

            builder = RecordBatchBuilder(compression=compression.ZSTD)
            now = int(time.time() * 1000)
            for i in range(5):
                builder.append(now, f"user-{i}".encode(), f"event {i}".encode(), [("src", b"demo")])
            request = ProduceRequest(
                acks=-1,
                timeout_ms=10_000,
                topic_data=[
                    ProduceRequestTopicProduceData(
                        name=TOPIC,
                        topic_id=topic_id,
                        partition_data=[
                            ProduceRequestPartitionProduceData(index=0, records=builder.build())
                        ],
                    )
                ],
            )
            # A brand-new partition may not be ready for a moment; the Producer retries
            # such errors itself, this raw request has to do it by hand.
            for _ in range(50):
                produced = await client.send(leader, request)
                part = produced.responses[0].partition_responses[0]
                if not part.error_code or not for_code(part.error_code).retriable:
                    break
                await asyncio.sleep(0.1)
            print(f"wrote 5 records at offset {part.base_offset} (error code {part.error_code})")

            fetched = await client.send(
                leader,
                FetchRequest(
                    max_wait_ms=500,
                    min_bytes=1,
                    topics=[
                        FetchTopic(
                            topic=TOPIC,
                            topic_id=topic_id,
                            partitions=[
                                FetchPartition(
                                    partition=0,
                                    fetch_offset=part.base_offset,
                                    partition_max_bytes=1 << 20,
                                )
                            ],
                        )
                    ],
                ),
            )
            records = fetched.responses[0].partitions[0].records or b""
            for batch in read_batches(records):
                for record in batch:
                    print(f"  offset {record.offset}: {record.key!r} -> {record.value!r}")

        ends = await admin.list_offsets({TopicPartition(TOPIC, 0): OffsetSpec.latest()})
        print(f"end offset of {TOPIC}[0]: {ends[TopicPartition(TOPIC, 0)].offset}")


def main() -> None:
    external = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if external:
        asyncio.run(demo(external))
        return
    with LocalKafka(security=PLAINTEXT_ONLY) as kafka:
        print(f"started Kafka {kafka.version} at {kafka.bootstrap_servers}")
        asyncio.run(demo(kafka.bootstrap_servers))
    print("broker stopped")


if __name__ == "__main__":
    main()
