"""aiokafka docs, "SSL": create_ssl_context() with the CA that signed the broker."""

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.helpers import create_ssl_context


async def main(bootstrap_servers: str, topic: str, cafile: str) -> None:
    context = create_ssl_context(cafile=cafile)
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap_servers, security_protocol="SSL", ssl_context=context
    )
    await producer.start()
    try:
        meta = await producer.send_and_wait(topic, b"over TLS", partition=0)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap_servers, security_protocol="SSL", ssl_context=context
    )
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, meta.offset)
        assert (await consumer.getone()).value == b"over TLS"
    finally:
        await consumer.stop()
