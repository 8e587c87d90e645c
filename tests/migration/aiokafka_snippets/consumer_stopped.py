"""getone() waiting in one task, stop() in another: the waiter gets
ConsumerStoppedError, as aiokafka's does."""

import asyncio

from aiokafka import AIOKafkaConsumer, ConsumerStoppedError


async def main(bootstrap_servers: str, topic: str) -> None:
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap_servers)
    await consumer.start()
    waiter = asyncio.ensure_future(consumer.getone())
    await asyncio.sleep(0.5)
    await consumer.stop()
    try:
        await asyncio.wait_for(waiter, 10)
    except ConsumerStoppedError:
        pass
    else:
        raise AssertionError("getone() after stop() must raise ConsumerStoppedError")
