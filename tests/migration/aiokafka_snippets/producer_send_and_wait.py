"""aiokafka docs, "Getting started": send_and_wait in a try/finally around start/stop."""

from aiokafka import AIOKafkaProducer


async def main(bootstrap_servers: str, topic: str) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap_servers)
    await producer.start()
    try:
        metadata = await producer.send_and_wait(topic, b"Super message", partition=0)
        assert metadata.topic == topic and metadata.partition == 0 and metadata.offset >= 0
    finally:
        await producer.stop()
