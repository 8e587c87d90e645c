"""aiokafka docs, "Serialization": JSON values, str keys; a consumer with the
matching deserializers reads them back."""

import json

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer


def serializer(value: object) -> bytes:
    return json.dumps(value).encode()


def deserializer(serialized: bytes) -> object:
    return json.loads(serialized)


async def main(bootstrap_servers: str, topic: str) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap_servers,
        value_serializer=serializer,
        key_serializer=str.encode,
        compression_type="gzip",
    )
    await producer.start()
    try:
        await producer.send_and_wait(topic, {"a": 1}, key="k", partition=0)
        await producer.send_and_wait(topic, [1, 2, 3], key="k", partition=0)
    finally:
        await producer.stop()

    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap_servers,
        auto_offset_reset="earliest",
        value_deserializer=deserializer,
        key_deserializer=bytes.decode,
    )
    await consumer.start()
    try:
        got = [await consumer.getone(), await consumer.getone()]
    finally:
        await consumer.stop()
    assert [(m.key, m.value) for m in got] == [("k", {"a": 1}), ("k", [1, 2, 3])]
