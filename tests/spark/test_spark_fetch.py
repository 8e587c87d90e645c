"""The executor-side range reader against the real broker, without Spark."""

from __future__ import annotations

import time
from typing import Any

import pytest

from aiokproto.admin import Admin
from aiokproto.errors import KafkaTimeoutError
from aiokproto.spark.errors import DataLossError
from aiokproto.spark.fetch import drive, iter_range
from aiokproto.spark.planning import OffsetRange
from aiokproto.structs import TopicPartition
from tests.spark.helpers import create_topic, create_topic_async, produce


def offsets_of(_topic: str, _partition: int, records: list[Any]) -> list[int]:
    return [r.offset for r in records]


async def read(bootstrap: str, r: OffsetRange, **kw: Any) -> list[int]:
    out: list[int] = []
    async for chunk in iter_range({"bootstrap_servers": bootstrap}, r, offsets_of, **kw):
        out.extend(chunk)
    return out


async def test_range_is_exact_and_chunked(bootstrap: str, topic_name: str) -> None:
    await create_topic_async(bootstrap, topic_name)
    produce(bootstrap, topic_name, [(None, b"x", None)] * 50)
    chunks = [
        c
        async for c in iter_range(
            {"bootstrap_servers": bootstrap},
            OffsetRange(topic_name, 0, 7, 33),
            offsets_of,
            max_records=10,
        )
    ]
    assert all(len(c) <= 10 for c in chunks)
    assert [o for c in chunks for o in c] == list(range(7, 33))


def test_drive_closes_the_consumer_when_abandoned(bootstrap: str, topic_name: str) -> None:
    create_topic(bootstrap, topic_name)
    produce(bootstrap, topic_name, [(None, b"x", None)] * 30)
    it = drive(
        iter_range(
            {"bootstrap_servers": bootstrap},
            OffsetRange(topic_name, 0, 0, 30),
            offsets_of,
            max_records=5,
        )
    )
    assert next(it) == [0, 1, 2, 3, 4]
    it.close()  # Spark stops early (LIMIT): the consumer and loop are shut down
    assert list(it) == []


async def test_deleted_after_planning(bootstrap: str, topic_name: str) -> None:
    await create_topic_async(bootstrap, topic_name)
    produce(bootstrap, topic_name, [(None, b"x", None)] * 10)
    async with Admin(bootstrap_servers=bootstrap) as admin:
        await admin.delete_records({TopicPartition(topic_name, 0): 4})
    r = OffsetRange(topic_name, 0, 0, 10)
    with pytest.raises(DataLossError, match="failOnDataLoss=false"):
        await read(bootstrap, r)
    assert await read(bootstrap, r, fail_on_data_loss=False) == list(range(4, 10))


async def test_range_ending_in_a_transaction_marker(bootstrap: str, topic_name: str) -> None:
    from confluent_kafka import Producer

    await create_topic_async(bootstrap, topic_name)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": topic_name})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic_name, b"%d" % i, partition=0)
    producer.commit_transaction(30)
    # offsets 0-4 are records, 5 is the commit marker: the range must end at 6, not wait
    started = time.monotonic()
    got = await read(bootstrap, OffsetRange(topic_name, 0, 0, 6), poll_timeout_ms=20_000)
    assert got == [0, 1, 2, 3, 4]
    assert time.monotonic() - started < 10


async def test_no_progress_times_out(bootstrap: str, topic_name: str) -> None:
    await create_topic_async(bootstrap, topic_name)
    produce(bootstrap, topic_name, [(None, b"x", None)] * 3)
    # a range beyond the end of the log (planned from a stale answer) fails, never hangs
    with pytest.raises(KafkaTimeoutError, match="pollTimeoutMs"):
        await read(bootstrap, OffsetRange(topic_name, 0, 0, 10), poll_timeout_ms=1_500)
