"""aiokafka docs, "Manual partition assignment": assign(), seek(), seek_to_beginning(),
seek_to_end(), position(), highwater(), end_offsets(), beginning_offsets()."""

import asyncio

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition


async def main(bootstrap_servers: str, topic: str) -> None:
    async with AIOKafkaProducer(bootstrap_servers=bootstrap_servers) as producer:
        for i in range(10):
            await producer.send(topic, b"%d" % i, partition=1)

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap_servers)
    await consumer.start()
    try:
        tp = TopicPartition(topic, 1)
        consumer.assign([tp])
        assert consumer.assignment() == {tp}
        await consumer.seek_to_beginning(tp)
        assert await consumer.position(tp) == 0
        consumer.seek(tp, 5)
        msg = await consumer.getone()
        assert msg.offset == 5 and msg.value == b"5"
        assert consumer.highwater(tp) == 10
        assert await consumer.end_offsets([tp]) == {tp: 10}
        assert await consumer.beginning_offsets([tp]) == {tp: 0}
        await consumer.seek_to_end(tp)
        assert await consumer.position(tp) == 10
        assert await consumer.getmany(tp, timeout_ms=200) == {}
        # nothing more arrives; a getone() with a deadline is the aiokafka idiom
        try:
            await asyncio.wait_for(consumer.getone(), 0.5)
        except TimeoutError:
            pass
        else:
            raise AssertionError("no record was expected")
    finally:
        await consumer.stop()
