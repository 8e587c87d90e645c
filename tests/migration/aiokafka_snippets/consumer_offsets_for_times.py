"""aiokafka docs: look up offsets by timestamp and seek there."""

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition


async def main(bootstrap_servers: str, topic: str) -> None:
    base = 1_700_000_000_000
    async with AIOKafkaProducer(bootstrap_servers=bootstrap_servers) as producer:
        for i in range(10):
            await producer.send(topic, b"%d" % i, partition=0, timestamp_ms=base + i * 1000)

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap_servers)
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        found = await consumer.offsets_for_times({tp: base + 4500})
        assert found[tp].offset == 5 and found[tp].timestamp == base + 5000
        none = await consumer.offsets_for_times({tp: base + 60_000})
        assert none[tp] is None
        consumer.seek(tp, found[tp].offset)
        msg = await consumer.getone()
        assert msg.value == b"5" and msg.timestamp == base + 5000
    finally:
        await consumer.stop()
