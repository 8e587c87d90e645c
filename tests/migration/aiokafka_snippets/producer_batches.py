"""aiokafka's batch_produce example: create_batch(), append() until full, send_batch()."""

import random

from aiokafka import AIOKafkaProducer


async def main(bootstrap_servers: str, topic: str) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap_servers, max_batch_size=16384)
    await producer.start()
    try:
        batch = producer.create_batch()
        i = 0
        while i < 100:
            metadata = batch.append(key=None, value=b"message %d" % i, timestamp=None)
            if metadata is None:
                break  # the batch is full
            i += 1
        assert batch.record_count() == i == 100
        partitions = await producer.partitions_for(topic)
        partition = random.choice(sorted(partitions))
        fut = await producer.send_batch(batch, topic, partition=partition)
        record = await fut
        assert record.partition == partition and record.offset >= 0
    finally:
        await producer.stop()
