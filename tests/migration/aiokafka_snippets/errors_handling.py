"""aiokafka docs, "Error handling": the error classes aiokafka code catches."""

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import (
    MessageSizeTooLargeError,
    OffsetOutOfRangeError,
)


async def main(bootstrap_servers: str, topic: str) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap_servers, max_request_size=10_000, api_version="auto"
    )
    await producer.start()
    try:
        try:
            await producer.send_and_wait(topic, b"x" * 20_000)
        except MessageSizeTooLargeError:
            pass
        else:
            raise AssertionError("a record over max_request_size must fail")
        # the producer goes on
        await producer.send_and_wait(topic, b"ok", partition=0)
    finally:
        await producer.stop()

    tp = TopicPartition(topic, 0)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap_servers, auto_offset_reset="none")
    await consumer.start()
    try:
        consumer.assign([tp])
        consumer.seek(tp, 1000)
        try:
            await consumer.getmany(timeout_ms=5000)
        except OffsetOutOfRangeError as err:
            assert err.args[0] == {tp: 1000}
        else:
            raise AssertionError(
                "an out-of-range position with auto_offset_reset='none' must raise"
            )
    finally:
        await consumer.stop()
