"""aiokafka docs, "Producer client": send() returns a future; key, partition,
timestamp and headers; flush(); partitions_for()."""

import asyncio
import time

from aiokafka import AIOKafkaProducer


async def main(bootstrap_servers: str, topic: str) -> None:
    async with AIOKafkaProducer(
        bootstrap_servers=bootstrap_servers, acks="all", linger_ms=5, client_id=None
    ) as producer:
        partitions = await producer.partitions_for(topic)
        assert partitions == {0, 1}
        now = int(time.time() * 1000)
        futures = []
        for i in range(10):
            fut = await producer.send(
                topic,
                value=b"value-%d" % i,
                key=b"key",
                timestamp_ms=now,
                headers=[("origin", b"migration")],
            )
            futures.append(fut)
        await producer.flush()
        results = await asyncio.gather(*futures)
        # one key: one partition, offsets in send order
        assert len({r.partition for r in results}) == 1
        offsets = [r.offset for r in results]
        assert offsets == sorted(offsets) and len(set(offsets)) == 10
        assert all(r.timestamp == now for r in results)
        assert results[0].topic_partition.topic == topic
