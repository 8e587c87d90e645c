"""Fetch paths against a real broker: transactions, compaction, oversized batches."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from aiokproto.consumer import Consumer, ConsumerRecord
from aiokproto.net.connection import BrokerConnection
from aiokproto.producer import Producer
from aiokproto.protocol.messages.fetch import FetchRequest
from aiokproto.structs import TopicPartition
from tests.consumer.conftest import aproduce, ck, create_topic


async def drain_until_end(consumer: Consumer, tp: TopicPartition, end: int) -> list[ConsumerRecord]:
    """Everything up to ``end`` (the position reaches it even past control records)."""
    out: list[ConsumerRecord] = []
    deadline = time.monotonic() + 30
    while await consumer.position(tp) < end:
        assert time.monotonic() < deadline, f"stuck at {await consumer.position(tp)} < {end}"
        for recs in (await consumer.getmany(timeout_ms=200)).values():
            out.extend(recs)
    return out


def transactional_writes(bootstrap: str, topic: str) -> None:
    """aborted a0..a4, committed c0..c4, aborted b0..b2, plain p0 (non-transactional)."""
    producer = ck.Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"tx-{uuid.uuid4().hex}"}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, value=f"a{i}".encode(), partition=0)
    producer.flush(30)
    producer.abort_transaction(30)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, value=f"c{i}".encode(), partition=0)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, value=f"b{i}".encode(), partition=0)
    producer.flush(30)
    producer.abort_transaction(30)
    plain = ck.Producer({"bootstrap.servers": bootstrap})
    plain.produce(topic, value=b"p0", partition=0)
    assert plain.flush(30) == 0


async def markers_written(bootstrap: str, tp: TopicPartition) -> None:
    """Until the last stable offset equals the high watermark: abort_transaction()
    returns once the coordinator logged the abort, and the markers follow (a
    read_committed end offset read before that stops short of later records)."""
    async with (
        Consumer(bootstrap_servers=bootstrap) as uncommitted,
        Consumer(bootstrap_servers=bootstrap, isolation_level="read_committed") as committed,
        asyncio.timeout(30),
    ):
        while True:
            lso = (await committed.end_offsets([tp]))[tp]
            if lso == (await uncommitted.end_offsets([tp]))[tp]:
                return
            await asyncio.sleep(0.05)


async def test_read_committed_hides_aborted_transactions(kafka: Any, topic_name: str) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    await asyncio.to_thread(transactional_writes, kafka.bootstrap_servers, topic_name)
    tp = TopicPartition(topic_name, 0)
    await markers_written(kafka.bootstrap_servers, tp)
    results = {}
    for level in ("read_committed", "read_uncommitted"):
        async with Consumer(
            bootstrap_servers=kafka.bootstrap_servers,
            auto_offset_reset="earliest",
            isolation_level=level,
        ) as consumer:
            consumer.assign([tp])
            end = (await consumer.end_offsets([tp]))[tp]
            results[level] = [r.value for r in await drain_until_end(consumer, tp, end)]
            assert await consumer.getmany(timeout_ms=200) == {}
            assert consumer.last_stable_offset(tp) == end
    assert results["read_committed"] == [b"c0", b"c1", b"c2", b"c3", b"c4", b"p0"]
    assert results["read_uncommitted"] == (
        [f"a{i}".encode() for i in range(5)]
        + [f"c{i}".encode() for i in range(5)]
        + [f"b{i}".encode() for i in range(3)]
        + [b"p0"]
    )


async def test_open_transaction_blocks_read_committed_at_lso(kafka: Any, topic_name: str) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    await aproduce(kafka.bootstrap_servers, topic_name, [(0, None, b"before", None)])

    producer = ck.Producer(
        {"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": f"tx-{uuid.uuid4().hex}"}
    )

    def open_txn() -> None:
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce(topic_name, value=b"pending", partition=0)
        producer.flush(30)

    await asyncio.to_thread(open_txn)
    tp = TopicPartition(topic_name, 0)
    try:
        async with Consumer(
            bootstrap_servers=kafka.bootstrap_servers,
            auto_offset_reset="earliest",
            isolation_level="read_committed",
        ) as consumer:
            consumer.assign([tp])
            got = await drain_until_end(consumer, tp, 1)
            assert [r.value for r in got] == [b"before"]
            assert await consumer.getmany(timeout_ms=500) == {}
            assert consumer.last_stable_offset(tp) == 1
            await asyncio.to_thread(producer.commit_transaction, 30)
            got = []
            async with asyncio.timeout(30):
                while not got:
                    for recs in (await consumer.getmany(timeout_ms=200)).values():
                        got.extend(recs)
            assert [r.value for r in got] == [b"pending"]
    finally:
        await asyncio.to_thread(producer.flush, 5)


async def test_big_records_with_small_partition_fetch_size(kafka: Any, topic_name: str) -> None:
    """Batches larger than max_partition_fetch_bytes and cut-off trailing batches."""
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=2)
    big = [(i % 2, None, bytes([i]) * 30_000, None) for i in range(12)]
    await aproduce(
        kafka.bootstrap_servers, topic_name, big, **{"batch.size": 40_000, "linger.ms": 0}
    )
    tps = [TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)]
    async with Consumer(
        bootstrap_servers=kafka.bootstrap_servers,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=45_000,
        fetch_max_bytes=50_000,
    ) as consumer:
        consumer.assign(tps)
        got: list[ConsumerRecord] = []
        async with asyncio.timeout(30):
            while len(got) < 12:
                for recs in (await consumer.getmany(timeout_ms=200)).values():
                    got.extend(recs)
    by_partition = {p: [r.value for r in got if r.partition == p] for p in (0, 1)}
    assert by_partition[0] == [bytes([i]) * 30_000 for i in range(0, 12, 2)]
    assert by_partition[1] == [bytes([i]) * 30_000 for i in range(1, 12, 2)]


async def test_single_batch_bigger_than_every_limit(kafka: Any, topic_name: str) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=2)
    records = [(1, None, b"small", None), (0, None, b"x" * 200_000, None), (0, None, b"y", None)]
    await aproduce(kafka.bootstrap_servers, topic_name, records)
    async with Consumer(
        bootstrap_servers=kafka.bootstrap_servers,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=1_000,
        fetch_max_bytes=1_000,
    ) as consumer:
        consumer.assign([TopicPartition(topic_name, 1), TopicPartition(topic_name, 0)])
        got: list[ConsumerRecord] = []
        async with asyncio.timeout(30):
            while len(got) < 3:
                for recs in (await consumer.getmany(timeout_ms=200)).values():
                    got.extend(recs)
    assert sorted((r.partition, r.offset, len(r.value)) for r in got) == [
        (0, 0, 200_000),
        (0, 1, 1),
        (1, 0, 5),
    ]


async def test_compacted_topic_gaps(kafka: Any, topic_name: str) -> None:
    await create_topic(
        kafka.bootstrap_servers,
        topic_name,
        configs={
            "cleanup.policy": "compact",
            "segment.ms": "100",
            "min.cleanable.dirty.ratio": "0.01",
            "min.compaction.lag.ms": "0",
            "delete.retention.ms": "100",
        },
    )
    tp = TopicPartition(topic_name, 0)
    # many overwrites of few keys; each produce call its own segment-rolling batch
    for round_ in range(4):
        await aproduce(
            kafka.bootstrap_servers,
            topic_name,
            [(0, f"k{i}".encode(), f"r{round_}".encode(), None) for i in range(5)],
        )
        await asyncio.sleep(0.3)
    async with Consumer(
        bootstrap_servers=kafka.bootstrap_servers, auto_offset_reset="earliest"
    ) as consumer:
        consumer.assign([tp])
        end = (await consumer.end_offsets([tp]))[tp]
        assert end == 20
        # the cleaner may or may not have run: either way the latest value per key wins,
        # offsets strictly increase, and the position reaches the end
        got = await drain_until_end(consumer, tp, end)
    offsets = [r.offset for r in got]
    assert offsets == sorted(set(offsets))
    latest = {r.key: r.value for r in got}
    assert latest == {f"k{i}".encode(): b"r3" for i in range(5)}
    assert len(got) <= 20


async def test_caught_up_records_reach_a_waiting_reader_before_the_next_fetch(
    kafka: Any, topic_name: str, monkeypatch: Any
) -> None:
    """A lagging consumer writes its next fetch before the reader gets the records (the
    broker prepares it while the reader works); a caught-up one hands the records over
    first (its next fetch would only wait at the broker)."""
    await create_topic(kafka.bootstrap_servers, topic_name)
    tp = TopicPartition(topic_name, 0)
    events: list[str] = []
    write = BrokerConnection._write

    def logged_write(self: BrokerConnection, request: Any, *args: Any) -> Any:
        if request.API_KEY == FetchRequest.API_KEY:
            events.append("fetch")
        return write(self, request, *args)

    monkeypatch.setattr(BrokerConnection, "_write", logged_write)

    async def read(consumer: Consumer) -> int:
        got = await consumer.getmany(timeout_ms=10_000)
        events.append("got")  # in the same step getmany returned in
        return sum(len(records) for records in got.values())

    async with Producer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=0) as producer:
        for _ in range(20):  # 20 batches of one record, each bigger than a fetch takes
            await (await producer.send(topic_name, b"x" * 1024, partition=0))
        async with Consumer(
            bootstrap_servers=kafka.bootstrap_servers,
            auto_offset_reset="earliest",
            max_partition_fetch_bytes=1024,
            fetch_max_wait_ms=10_000,  # no empty answers while the test looks
        ) as consumer:
            consumer.assign([tp])
            events.clear()
            assert await read(consumer) >= 1
            assert events[:3] == ["fetch", "fetch", "got"]  # lagging: prefetch first
            async with asyncio.timeout(30):
                while await consumer.position(tp) < 20:
                    await read(consumer)
                await asyncio.sleep(0.2)  # the next fetch is written and waits at the broker
                events.clear()
                reader = asyncio.create_task(read(consumer))
                await (await producer.send(topic_name, b"late", partition=0))
                assert await reader == 1
                await asyncio.sleep(0.2)
            assert events == ["got", "fetch"]  # caught up: the reader first
