"""commit({tp: (offset, metadata)}), seek_to_committed() and last_poll_timestamp()."""

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition


async def main(bootstrap_servers: str, topic: str) -> None:
    async with AIOKafkaProducer(bootstrap_servers=bootstrap_servers) as producer:
        for i in range(10):
            await producer.send(topic, b"%d" % i, partition=0)

    tp = TopicPartition(topic, 0)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap_servers,
        group_id=topic + "-committed",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    try:
        consumer.assign([tp])
        await consumer.commit({tp: (6, "checkpoint")})
        # the position may have been looked up before the commit landed: go to it
        assert await consumer.seek_to_committed(tp) == {tp: 6}
        msg = await consumer.getone()
        assert msg.offset == 6
        assert consumer.last_poll_timestamp(tp) > 0
        consumer.seek(tp, 0)
        found = await consumer.seek_to_committed(tp)
        assert found == {tp: 6}
        assert await consumer.position(tp) == 6
    finally:
        await consumer.stop()
