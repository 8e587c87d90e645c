"""aiokafka docs: pause() a partition (back-pressure), resume() it later."""

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition


async def main(bootstrap_servers: str, topic: str) -> None:
    async with AIOKafkaProducer(bootstrap_servers=bootstrap_servers) as producer:
        for p in (0, 1):
            for i in range(5):
                await producer.send(topic, b"%d" % i, partition=p)

    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap_servers, auto_offset_reset="earliest")
    await consumer.start()
    try:
        consumer.assign([tp0, tp1])
        consumer.pause(tp0)
        assert consumer.paused() == {tp0}
        got = 0
        while got < 5:
            batch = await consumer.getmany(timeout_ms=5000)
            assert tp0 not in batch
            got += sum(len(msgs) for msgs in batch.values())
        consumer.resume(tp0)
        assert consumer.paused() == set()
        msg = await consumer.getone()
        assert msg.partition == 0
    finally:
        await consumer.stop()
