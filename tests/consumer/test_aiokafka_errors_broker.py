"""aiokafka's error names caught where aiokafka code catches them, against the broker."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import aiokproto
from aiokproto import Admin, Consumer, NewTopic, Producer, TopicPartition
from aiokproto.errors import (
    IllegalOperation,
    MessageSizeTooLargeError,
    OffsetOutOfRangeError,
)


async def test_out_of_range_is_caught_as_aiokafka_catches_it(kafka: Any, topic_name: str) -> None:
    tp = TopicPartition(topic_name, 0)
    async with Producer(bootstrap_servers=kafka.bootstrap_servers) as producer:
        await producer.send_and_wait(topic_name, b"v", partition=0)
    async with Consumer(
        bootstrap_servers=kafka.bootstrap_servers, auto_offset_reset="none"
    ) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 1000)  # beyond the end
        try:
            async with asyncio.timeout(30):
                while True:
                    await consumer.getmany(timeout_ms=200)
        except OffsetOutOfRangeError as err:  # aiokafka: err.args[0] is {tp: offset}
            assert err.args[0] == {tp: 1000}
        else:  # pragma: no cover - the loop ends only by raising
            raise AssertionError("no OffsetOutOfRangeError")


async def test_commit_without_a_group_and_a_stopped_consumer(kafka: Any, topic_name: str) -> None:
    consumer = Consumer(topic_name, bootstrap_servers=kafka.bootstrap_servers)
    await consumer.start()
    with pytest.raises(IllegalOperation, match="group_id"):
        await consumer.commit()
    await consumer.stop()
    with pytest.raises(aiokproto.ConsumerStoppedError):
        await consumer.getone()


async def test_message_size_too_large_from_the_client_and_from_the_broker(
    kafka: Any, topic_name: str
) -> None:
    async with Admin(bootstrap_servers=kafka.bootstrap_servers) as admin:
        await admin.create_topics(
            [NewTopic(topic_name, 1, 1, topic_configs={"max.message.bytes": "2000"})]
        )
    async with Producer(
        bootstrap_servers=kafka.bootstrap_servers, max_request_size=10_000, linger_ms=0
    ) as producer:
        # the client refuses a record over max_request_size (aiokafka: on send)
        with pytest.raises(MessageSizeTooLargeError):
            await producer.send_and_wait(topic_name, b"x" * 20_000)
        # the broker refuses one over the topic's max.message.bytes (code 10)
        with pytest.raises(MessageSizeTooLargeError) as info:
            await producer.send_and_wait(topic_name, b"x" * 5_000)
        assert getattr(info.value, "errno", None) == 10
