"""aiokafka docs, "Getting started": a group consumer iterated with async for
(auto-commit on); a second consumer in the group starts after the committed offsets."""

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer


async def main(bootstrap_servers: str, topic: str) -> None:
    async with AIOKafkaProducer(bootstrap_servers=bootstrap_servers) as producer:
        for i in range(20):
            await producer.send(topic, b"m%d" % i, partition=i % 2)
        await producer.flush()

    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap_servers,
        group_id=topic + "-group",
        auto_offset_reset="earliest",
        auto_commit_interval_ms=100,
    )
    await consumer.start()
    seen = []
    try:
        async for msg in consumer:
            seen.append((msg.partition, msg.offset, msg.value))
            if len(seen) == 20:
                break
    finally:
        await consumer.stop()  # commits what was consumed
    assert sorted(v for _, _, v in seen) == sorted(b"m%d" % i for i in range(20))

    async with AIOKafkaProducer(bootstrap_servers=bootstrap_servers) as producer:
        await producer.send_and_wait(topic, b"later", partition=0)
    async with AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap_servers,
        group_id=topic + "-group",
        auto_offset_reset="earliest",
    ) as again:
        msg = await again.getone()
        assert msg.value == b"later"
