"""aiokafka docs, "Consumer client", at-least-once: enable_auto_commit=False,
getmany() batches, commit() after processing; committed() reads it back."""

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition


async def main(bootstrap_servers: str, topic: str) -> None:
    async with AIOKafkaProducer(bootstrap_servers=bootstrap_servers) as producer:
        for i in range(30):
            await producer.send(topic, b"%d" % i, partition=0)

    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap_servers,
        group_id=topic + "-manual",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_poll_records=None,
    )
    await consumer.start()
    total = 0
    try:
        while total < 30:
            result = await consumer.getmany(timeout_ms=10 * 1000, max_records=7)
            for tp, messages in result.items():
                if messages:
                    total += len(messages)
                    assert len(messages) <= 7
                    # commit progress only for this partition
                    await consumer.commit({tp: messages[-1].offset + 1})
        assert await consumer.committed(TopicPartition(topic, 0)) == 30
        assert await consumer.committed(TopicPartition(topic, 1)) is None
    finally:
        await consumer.stop()
