"""The producer when a caller does something wrong: the bad call fails alone, typed, and
nothing it touched is written; everyone else's records are delivered."""

from __future__ import annotations

import asyncio
import enum
from typing import Any

import pytest

from aiokproto.errors import IllegalStateError, KafkaConfigError, KafkaError
from aiokproto.producer import Producer, SerializationError
from aiokproto.structs import TopicPartition
from tests.producer.helpers import FAST, consume, create_topic

ck = pytest.importorskip("confluent_kafka")


def producer(kafka: Any, **options: Any) -> Producer:
    return Producer(bootstrap_servers=kafka.bootstrap_servers, **{**FAST, **options})


async def end_offsets(kafka: Any, topic: str, partitions: int) -> list[int]:
    from aiokproto import Consumer

    async with Consumer(bootstrap_servers=kafka.bootstrap_servers) as c:
        ends = await c.end_offsets([TopicPartition(topic, p) for p in range(partitions)])
    return [ends[TopicPartition(topic, p)] for p in range(partitions)]


async def test_a_bad_record_fails_alone_and_the_producer_goes_on(
    kafka: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=2)
    async with producer(kafka, linger_ms=500) as p:
        good = [await p.send(topic_name, b"v%d" % i, partition=0) for i in range(100)]
        # partition 1 has no batch yet: the bad record must not leave an empty one
        with pytest.raises(SerializationError):
            await p.send(topic_name, "a str value", partition=1)  # type: ignore[arg-type]
        with pytest.raises(SerializationError):
            await p.send(topic_name, b"v", key="a str key", partition=1)  # type: ignore[arg-type]
        # nothing else goes to partition 1: an empty batch left there would be built,
        # fail, and take the sender (and every record) down with it
        metas = [await h for h in good]
        after = await p.send(topic_name, b"after", partition=0)
        assert [m.offset for m in metas] == list(range(100))
        assert (await after).offset == 100
        assert p._acc.used == 0
    got = await asyncio.to_thread(consume, kafka.bootstrap_servers, topic_name, 101, 2)
    assert sorted(m.value() for m in got) == sorted([b"v%d" % i for i in range(100)] + [b"after"])


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"headers": [(b"bytes-key", b"v")]}, SerializationError),
        ({"headers": [("k", "str value")]}, SerializationError),
        ({"headers": [("k",)]}, SerializationError),
        ({"headers": 42}, SerializationError),
        ({"timestamp_ms": "yesterday"}, SerializationError),
        ({"timestamp_ms": 1.5}, SerializationError),
        ({"partition": True}, KafkaConfigError),
        ({"partition": -1}, KafkaConfigError),
        ({"partition": "0"}, KafkaConfigError),
    ],
)
async def test_bad_arguments_are_typed_errors_that_touch_nothing(
    kafka: Any, topic_name: str, kwargs: dict[str, Any], error: type[KafkaError]
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    async with producer(kafka, linger_ms=200) as p:
        first = await p.send(topic_name, b"before")
        with pytest.raises(error):
            await p.send(topic_name, b"bad", **kwargs)
        last = await p.send(topic_name, b"after")
        assert [(await first).offset, (await last).offset] == [0, 1]
    got = await asyncio.to_thread(consume, kafka.bootstrap_servers, topic_name, 2)
    assert [m.value() for m in got] == [b"before", b"after"]


class _Partition(enum.IntEnum):
    SECOND = 1


async def test_partition_checks_are_the_same_before_and_after_the_topic_is_known(
    kafka: Any, topic_name: str
) -> None:
    # A record sent before its topic's metadata was known refused an IntEnum partition
    # that a known topic's send() took (after a metadata refresh per record).
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=2)
    for known in (False, True):
        async with producer(kafka) as p:
            if known:
                await p.partitions_for(topic_name)
            handle = await p.send(topic_name, b"v", partition=_Partition.SECOND)
            assert (await handle).partition == 1
            for bad in (True, -1, "1", 1.0):
                with pytest.raises(KafkaConfigError, match="partition must be an int >= 0"):
                    await p.send(topic_name, b"v", partition=bad)  # type: ignore[arg-type]
    got = await asyncio.to_thread(consume, kafka.bootstrap_servers, topic_name, 2, 2)
    assert [m.partition() for m in got] == [1, 1]


async def test_unhashable_topic_and_raising_serializer_are_typed(
    kafka: Any, topic_name: str
) -> None:
    def boom(value: Any) -> bytes:
        raise ValueError("cannot encode this")

    await create_topic(kafka.bootstrap_servers, topic_name)
    async with producer(kafka, value_serializer=boom) as p:
        with pytest.raises(KafkaError):
            await p.send(["not", "a", "topic"], None)  # type: ignore[arg-type]
        with pytest.raises(SerializationError, match="cannot encode this"):
            await p.send(topic_name, {"x": 1})
        with pytest.raises(SerializationError, match="cannot encode this"):
            await p.send_batch(topic_name, [{"x": 1}])
        meta = await p.send_and_wait(topic_name, None)  # None skips the serializer
        assert meta.offset == 0


async def test_bytes_like_values_are_accepted(kafka: Any, topic_name: str) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    async with producer(kafka) as p:
        await p.send_and_wait(topic_name, bytearray(b"ba"), key=memoryview(b"mv"))
        await p.send_batch(topic_name, [bytearray(b"b1"), memoryview(b"b2")])
        await p.flush()
    got = await asyncio.to_thread(consume, kafka.bootstrap_servers, topic_name, 3)
    assert [(m.key(), m.value()) for m in got] == [(b"mv", b"ba"), (None, b"b1"), (None, b"b2")]


async def test_send_batch_is_all_or_nothing(kafka: Any, topic_name: str) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=3)
    calls = 0

    def flaky_partitioner(key: bytes | None, partitions: Any, available: Any) -> int:
        nonlocal calls
        calls += 1
        if key == b"k3":
            return 99  # not a partition of the topic
        return 0

    async with producer(kafka) as p:
        with pytest.raises(SerializationError):
            await p.send_batch(topic_name, [b"a", b"b", "c-is-a-str", b"d"])  # type: ignore[list-item]
        with pytest.raises(SerializationError):
            await p.send_batch(topic_name, [b"a", b"b"], keys=[b"k", "str-key"])  # type: ignore[list-item]
        with pytest.raises(SerializationError):
            await p.send_batch(topic_name, [b"a", b"b"], keys=[b"only-one"])
        with pytest.raises(KafkaConfigError):
            await p.send_batch(topic_name, [b"a"], partition=-5)
        assert p._acc.used == 0 and not p._acc.incomplete
        await p.flush()
    async with producer(kafka, partitioner=flaky_partitioner) as p:
        with pytest.raises(KafkaError, match="partitioner returned 99"):
            await p.send_batch(
                topic_name, [b"1", b"2", b"3", b"4"], keys=[b"k1", b"k2", b"k3", b"k4"]
            )
        assert calls >= 3
        assert p._acc.used == 0 and not p._acc.incomplete
        ok = await p.send_batch(topic_name, [b"x", b"y"], keys=[b"k1", b"k2"])
        metas = await ok
        assert [m.offset for m in metas] == [0, 1]
    assert await end_offsets(kafka, topic_name, 3) == [2, 0, 0]


async def test_a_send_batch_larger_than_buffer_memory_goes_in_whole(
    kafka: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    values = [bytes([i % 251]) * 1000 for i in range(300)]  # ~300 KB, buffer is 64 KB
    async with producer(kafka, buffer_memory=65536, batch_size=16384) as p:
        first = await p.send_batch(topic_name, values[:100])
        second = await p.send_batch(topic_name, values[100:])  # waits for an empty buffer
        metas = await first + await second
    assert [m.offset for m in metas] == list(range(300))


async def test_stop_while_a_send_waits_for_metadata_fails_it_at_once(
    kafka: Any, topic_name: str
) -> None:
    # The topic does not exist and is not auto-created: send() returns at once and its
    # record waits for metadata; send_batch() waits for it.
    p = producer(kafka, max_block_ms=30_000, allow_auto_create_topics=False)
    await p.start()
    waiting = await p.send(topic_name, b"late")
    batch_waiting = asyncio.ensure_future(p.send_batch(topic_name, [b"late"]))
    await asyncio.sleep(0.3)
    assert not waiting.done() and not batch_waiting.done()
    async with asyncio.timeout(5):
        await p.stop()
        with pytest.raises(IllegalStateError):
            await waiting
        with pytest.raises(IllegalStateError):
            await batch_waiting
    assert not p._acc.incomplete


async def test_aiokafka_style_batches(kafka: Any, topic_name: str) -> None:
    # aiokafka's batch_produce example, classes renamed: append until the batch is full,
    # send it to a partition, start a new one.
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=2)
    async with producer(kafka, batch_size=400) as p:
        batch = p.create_batch()
        sent: list[tuple[int, int]] = []
        futures = []
        i = 0
        while i < 30:
            meta = batch.append(key=None, value=b"msg %02d" % i, timestamp=None)
            if meta is None:
                partition = len(sent) % 2
                futures.append(await p.send_batch(batch, topic_name, partition=partition))
                sent.append((partition, batch.record_count()))
                batch = p.create_batch()
                continue
            i += 1
        futures.append(await p.send_batch(batch, topic_name, partition=0))
        sent.append((0, batch.record_count()))
        firsts = [await f for f in futures]
        assert len(sent) > 2 and sum(n for _, n in sent) == 30  # it did fill up
        assert [m.partition for m in firsts] == [part for part, _ in sent]
        with pytest.raises(KafkaConfigError):
            await p.send_batch(p.create_batch(), topic_name, partition=0)  # empty
        bad = p.create_batch()
        with pytest.raises(SerializationError):
            bad.append(key=None, value="a str", timestamp=None)
    got = await asyncio.to_thread(consume, kafka.bootstrap_servers, topic_name, 30, 2)
    assert sorted(m.value() for m in got) == [b"msg %02d" % i for i in range(30)]
