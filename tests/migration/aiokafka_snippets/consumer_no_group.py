"""aiokafka's simple_consumer example: topics, no group_id, async for."""

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer


async def main(bootstrap_servers: str, topic: str) -> None:
    async with AIOKafkaProducer(bootstrap_servers=bootstrap_servers) as producer:
        for i in range(6):
            await producer.send(topic, b"%d" % i, partition=i % 2)

    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap_servers, auto_offset_reset="earliest"
    )
    await consumer.start()
    got = []
    try:
        async for msg in consumer:
            got.append(msg.value)
            if len(got) == 6:
                break
    finally:
        await consumer.stop()
    assert sorted(got) == [b"0", b"1", b"2", b"3", b"4", b"5"]
