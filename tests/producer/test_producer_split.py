"""Batches the broker refuses as too large are split and sent again (KIP-126), against a
real broker: a topic with ``max.message.bytes=100000`` and 1 MB batches; every record
arrives once and in order (read back by librdkafka, or by a read_committed consumer in
a transaction); only a record too large on its own fails, alone."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from aiokproto.errors import (
    KafkaError,
    RecordTooLargeError,
    TransactionAbortableError,
    TransactionAbortedError,
)
from aiokproto.producer import Producer
from aiokproto.producer.delivery import wait_delivered
from tests.producer.helpers import FAST, consume, create_topic
from tests.producer.test_transactions_broker import read

LIMIT = {"max.message.bytes": "100000"}
COUNT = 20_000


def value(i: int) -> bytes:
    return b"%08d" % i + b"." * 1016  # 1 KB


async def test_oversized_batches_are_split_in_order_with_idempotence(
    kafka: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, configs=LIMIT)
    async with Producer(
        bootstrap_servers=kafka.bootstrap_servers, batch_size=1_000_000, linger_ms=20, **FAST
    ) as producer:
        handles = [await producer.send(topic_name, value(i)) for i in range(COUNT)]
        await wait_delivered(handles)
        offsets = [h.result().offset for h in handles]
    assert offsets == list(range(COUNT))
    got = consume(kafka.bootstrap_servers, topic_name, COUNT)
    assert [m.value() for m in got] == [value(i) for i in range(COUNT)]


async def test_oversized_batches_are_split_in_order_without_idempotence(
    kafka: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, configs=LIMIT)
    # without idempotence, order across retries needs one request in flight (as in Java)
    async with Producer(
        bootstrap_servers=kafka.bootstrap_servers,
        batch_size=1_000_000,
        linger_ms=20,
        enable_idempotence=False,
        acks=1,
        max_in_flight_requests_per_connection=1,
        **FAST,
    ) as producer:
        delivery = await producer.send_batch(topic_name, [value(i) for i in range(COUNT)])
        metas = await delivery
    assert [m.offset for m in metas] == list(range(COUNT))
    got = consume(kafka.bootstrap_servers, topic_name, COUNT)
    assert [m.value() for m in got] == [value(i) for i in range(COUNT)]


async def test_oversized_batches_are_split_inside_a_transaction(
    kafka: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, configs=LIMIT)
    async with Producer(
        bootstrap_servers=kafka.bootstrap_servers,
        transactional_id=f"split-{uuid.uuid4().hex[:8]}",
        batch_size=1_000_000,
        linger_ms=20,
        **FAST,
    ) as producer:
        await producer.begin_transaction()
        handles = [await producer.send(topic_name, value(i)) for i in range(COUNT)]
        await producer.commit_transaction()
        assert all(h.exception() is None for h in handles)
    got = await read(kafka, topic_name, 1, "read_committed", COUNT)
    assert got == [value(i) for i in range(COUNT)]


@pytest.mark.parametrize("idempotent", [True, False])
async def test_only_a_record_too_large_alone_fails(
    kafka: Any, topic_name: str, idempotent: bool
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, configs=LIMIT)
    big = b"B" * 150_000
    values = [value(i) for i in range(300)] + [big] + [value(i) for i in range(300, 600)]
    async with Producer(
        bootstrap_servers=kafka.bootstrap_servers,
        batch_size=1_000_000,
        linger_ms=50,
        enable_idempotence=idempotent,
        acks=-1 if idempotent else 1,
        max_in_flight_requests_per_connection=5 if idempotent else 1,
        **FAST,
    ) as producer:
        handles = [await producer.send(topic_name, v) for v in values]
        await producer.flush()
        errors = [h.exception() for h in handles]
        assert isinstance(errors[300], RecordTooLargeError), errors[300]
        assert errors[:300] + errors[301:] == [None] * 600
        # the producer goes on: a later record is delivered (under a new epoch when
        # idempotent: the failed record's sequence is never acknowledged)
        after = await (await producer.send(topic_name, value(600)))
    got = consume(kafka.bootstrap_servers, topic_name, 601)
    assert [m.value() for m in got] == [v for v in values if v is not big] + [value(600)]
    assert after.offset == 600


async def test_an_abortable_transaction_fails_sends_at_once_and_aborts_cleanly(
    kafka: Any, topic_name: str
) -> None:
    """Issue 34, defect 3: a record too large for the topic fails the transaction; the
    next send() raises TransactionAbortableError at once (not after max_block_ms of
    waiting for memory held by batches that will never be sent), a send waiting for
    memory raises too, the held batches fail and free their memory, and
    abort_transaction() recovers: the next transaction commits."""
    await create_topic(kafka.bootstrap_servers, topic_name, configs=LIMIT)
    async with Producer(
        bootstrap_servers=kafka.bootstrap_servers,
        transactional_id=f"abortable-{uuid.uuid4().hex[:8]}",
        batch_size=1_000_000,
        buffer_memory=400_000,
        linger_ms=2_000,  # nothing goes before a send waits for memory (that hurries)
        **{**FAST, "max_block_ms": 60_000},
    ) as producer:
        loop = asyncio.get_running_loop()
        await producer.partitions_for(topic_name)  # known: the records go in at once
        await producer.begin_transaction()
        big = await producer.send(topic_name, b"B" * 150_000)
        # buffered behind it (they fill the memory): one send ends up waiting for space
        held = [await producer.send(topic_name, value(i)) for i in range(200)]
        waiting = asyncio.ensure_future(
            producer.send_batch(topic_name, [value(i) for i in range(200, 400)])
        )
        await asyncio.sleep(0)
        assert producer._space_queue and not waiting.done()  # waits for buffer memory
        with pytest.raises(RecordTooLargeError):
            await big
        start = loop.time()
        with pytest.raises(TransactionAbortableError) as info:
            await asyncio.wait_for(waiting, 10)
        assert isinstance(info.value.__cause__, RecordTooLargeError)
        with pytest.raises(TransactionAbortableError) as info:
            await producer.send(topic_name, b"after")
        assert isinstance(info.value.__cause__, RecordTooLargeError)
        await asyncio.wait_for(asyncio.gather(*held, return_exceptions=True), 10)
        assert loop.time() - start < 10  # not max_block_ms (60 s)
        assert all(isinstance(h.exception(), TransactionAbortedError) for h in held)
        assert producer._acc.used == 0  # their memory is free again
        await producer.abort_transaction()
        await producer.begin_transaction()
        last = [await producer.send(topic_name, value(i)) for i in range(10)]
        await producer.commit_transaction()
        assert all(h.exception() is None for h in last)
    got = await read(kafka, topic_name, 1, "read_committed", 10)
    assert got == [value(i) for i in range(10)]


async def _awaited(handle: Any) -> Any:
    return await handle


async def _until_split(producer: Producer, within: float = 20) -> None:
    """Wait until a batch was refused as too large and split (its pieces queued)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not any(pq.split_limit for pq in producer._acc.partition_queues()):
        assert loop.time() < deadline, "no batch was split"
        await asyncio.sleep(0.005)


async def test_stop_mid_split_settles_every_record_at_once(kafka: Any, topic_name: str) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, configs=LIMIT)
    producer = Producer(
        bootstrap_servers=kafka.bootstrap_servers, batch_size=1_000_000, linger_ms=5, **FAST
    )
    await producer.start()
    handles = [await producer.send(topic_name, value(i)) for i in range(5000)]
    await _until_split(producer)
    await producer.stop(timeout_ms=0)
    # every handle knows its fate when stop() returns, split batches' included
    assert all(h.done() for h in handles)
    delivered = [h.result().offset for h in handles if h.exception() is None]
    assert delivered == list(range(len(delivered)))  # a prefix, in order
    got = consume(kafka.bootstrap_servers, topic_name, len(delivered) + 1, within=3)
    assert [m.value() for m in got][: len(delivered)] == [value(i) for i in range(len(delivered))]


async def test_abort_while_batches_are_split_then_a_new_transaction_commits(
    kafka: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, configs=LIMIT)
    async with Producer(
        bootstrap_servers=kafka.bootstrap_servers,
        transactional_id=f"split-abort-{uuid.uuid4().hex[:8]}",
        batch_size=1_000_000,
        linger_ms=5,
        **FAST,
    ) as producer:
        await producer.begin_transaction()
        handles = [await producer.send(topic_name, value(i)) for i in range(5000)]
        await _until_split(producer)
        waiter = asyncio.ensure_future(asyncio.gather(*handles))
        await producer.abort_transaction()
        assert all(h.done() for h in handles)
        assert any(isinstance(h.exception(), TransactionAbortedError) for h in handles)
        with pytest.raises(KafkaError):
            await waiter  # a task awaiting them sees the abort, not a hang
        assert producer._acc.used == 0
        await producer.begin_transaction()
        last = [await producer.send(topic_name, value(i)) for i in range(5000, 7000)]
        await producer.commit_transaction()
        assert all(h.exception() is None for h in last)
    got = await read(kafka, topic_name, 1, "read_committed", 2000)
    assert got == [value(i) for i in range(5000, 7000)]


async def test_cancelled_waiters_leave_split_records_to_be_delivered(
    kafka: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, configs=LIMIT)
    async with Producer(
        bootstrap_servers=kafka.bootstrap_servers, batch_size=1_000_000, linger_ms=5, **FAST
    ) as producer:
        handles = [await producer.send(topic_name, value(i)) for i in range(3000)]
        waiters = [asyncio.create_task(_awaited(h)) for h in handles[::100]]
        bulk = asyncio.ensure_future(wait_delivered(handles))
        await _until_split(producer)
        for w in waiters:
            w.cancel()
        bulk.cancel()
        handles[5].cancel()  # the handle only: its record is still delivered
        await producer.flush()
        assert all(w.cancelled() for w in waiters) and bulk.cancelled()
        assert handles[5].cancelled()
        offsets = [h.result().offset for i, h in enumerate(handles) if i != 5]
    assert offsets == [i for i in range(3000) if i != 5]
    got = consume(kafka.bootstrap_servers, topic_name, 3000)
    assert [m.value() for m in got] == [value(i) for i in range(3000)]


@pytest.mark.parametrize("codec", ["zstd", "lz4"])
async def test_split_callbacks_batch_deliveries_and_memory_with_compression(
    kafka: Any, topic_name: str, codec: str
) -> None:
    """Review of KIP-126 under compression (random-ish values, so pieces are refused
    and split again): each on_delivery callback runs once with its record's own offset,
    a send_batch's metadata match the log, and the buffer charge sums back to zero."""
    import random

    await create_topic(kafka.bootstrap_servers, topic_name, partitions=2, configs=LIMIT)
    rng = random.Random(7)
    values = [b"%08d" % i + rng.randbytes(1016) for i in range(4000)]
    calls: dict[int, list[tuple[Any, Any]]] = {}

    def report(i: int) -> Any:
        return lambda error, meta: calls.setdefault(i, []).append((error, meta))

    async with Producer(
        bootstrap_servers=kafka.bootstrap_servers,
        batch_size=1_000_000,
        linger_ms=20,
        compression_type=codec,
        **FAST,
    ) as producer:
        handles = [
            await producer.send(topic_name, v, partition=i % 2, on_delivery=report(i))
            for i, v in enumerate(values[:2000])
        ]
        delivery = await producer.send_batch(topic_name, values[2000:], partition=0)
        metas = await delivery
        await wait_delivered(handles)
        await producer.flush()
        assert any(pq.split_limit for pq in producer._acc.partition_queues())
        assert producer._acc.used == 0 and not producer._acc.incomplete
    assert sorted(calls) == list(range(2000))
    assert all(len(c) == 1 and c[0][0] is None for c in calls.values())
    for i, h in enumerate(handles):
        meta = calls[i][0][1]
        assert (meta.partition, meta.offset) == (i % 2, h.result().offset)
    p1 = [h.result().offset for h in handles[1::2]]
    assert p1 == list(range(1000))
    p0 = [h.result().offset for h in handles[0::2]] + [m.offset for m in metas]
    assert p0 == list(range(3000))
    got = consume(kafka.bootstrap_servers, topic_name, 4000, partitions=2)
    by_partition: dict[int, list[bytes]] = {0: [], 1: []}
    for m in got:
        by_partition[m.partition()].append(m.value())
    assert by_partition[1] == values[1:2000:2]
    assert by_partition[0] == values[0:2000:2] + values[2000:]


async def test_records_too_large_amid_pipelined_batches_keep_one_producer_id(
    kafka: Any, topic_name: str
) -> None:
    """Review of KIP-360: records too large alone, refused while later batches of the
    partition are numbered and in flight (answered after the local epoch bump): every
    other record is delivered once and in order, and the producer id never changes."""
    await create_topic(kafka.bootstrap_servers, topic_name, configs=LIMIT)
    big = b"B" * 150_000
    values: list[bytes] = []
    for i in range(3000):
        values.append(value(i))
        if i % 150 == 75:
            values.append(big)
    async with Producer(
        bootstrap_servers=kafka.bootstrap_servers,
        batch_size=16_384,
        linger_ms=0,
        **FAST,
    ) as producer:
        handles = []
        for v in values:
            handles.append(await producer.send(topic_name, v))
            if len(handles) % 7 == 0:
                await asyncio.sleep(0)  # let the sender pipeline batches
        first_id = producer._acc.identity.producer_id
        await producer.flush()
        for v, h in zip(values, handles, strict=True):
            if v is big:
                assert isinstance(h.exception(), RecordTooLargeError), h.exception()
            else:
                assert h.exception() is None, h.exception()
        assert producer._acc.identity.producer_id == first_id
        # at most one local bump per refused record (no InitProducerId, no new id)
        assert producer._acc.identity.epoch <= sum(v is big for v in values)
        assert producer._acc.used == 0
        offsets = [h.result().offset for v, h in zip(values, handles, strict=True) if v is not big]
    assert offsets == list(range(3000))
    got = consume(kafka.bootstrap_servers, topic_name, 3000)
    assert [m.value() for m in got] == [value(i) for i in range(3000)]


@pytest.mark.parametrize("fast", [True, False])
async def test_an_abortable_transaction_fails_every_call_typed_and_fast(
    kafka: Any, topic_name: str, fast: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review of issue 34 defect 3: once abortable, send() (compiled fast path or not),
    send_batch(), send_offsets_to_transaction() and commit_transaction() raise typed
    errors at once; abort, begin, and send() goes through the fast path again."""
    from aiokproto.errors import IllegalStateError
    from aiokproto.producer import producer as producer_module
    from aiokproto.structs import TopicPartition

    if not fast:
        monkeypatch.setattr(producer_module, "_send_fast", None)
    await create_topic(kafka.bootstrap_servers, topic_name, configs=LIMIT)
    async with Producer(
        bootstrap_servers=kafka.bootstrap_servers,
        transactional_id=f"abortable-calls-{uuid.uuid4().hex[:8]}",
        linger_ms=0,
        **{**FAST, "max_block_ms": 60_000},
    ) as producer:
        loop = asyncio.get_running_loop()
        await producer.begin_transaction()
        ok = await producer.send(topic_name, value(0))
        await ok
        with pytest.raises(RecordTooLargeError):
            await (await producer.send(topic_name, b"B" * 150_000))
        start = loop.time()
        for _ in range(3):
            with pytest.raises(TransactionAbortableError):
                await producer.send(topic_name, value(1))
        with pytest.raises(TransactionAbortableError):
            await producer.send_batch(topic_name, [value(2)])
        with pytest.raises(IllegalStateError) as info:
            await producer.send_offsets_to_transaction(
                {TopicPartition(topic_name, 0): 1}, f"g-{uuid.uuid4().hex[:6]}"
            )
        assert isinstance(info.value.__cause__, RecordTooLargeError)
        with pytest.raises(RecordTooLargeError):
            await producer.commit_transaction()
        assert loop.time() - start < 5
        await producer.abort_transaction()
        await producer.begin_transaction()
        assert producer._plain
        last = [await producer.send(topic_name, value(i)) for i in range(10, 20)]
        await producer.commit_transaction()
        assert [h.exception() for h in last] == [None] * 10
    got = await read(kafka, topic_name, 1, "read_committed", 10)
    assert got == [value(i) for i in range(10, 20)]


async def test_a_built_batch_whose_first_record_is_too_large_alone_fails_not_hangs(
    kafka: Any, topic_name: str
) -> None:
    """aiokafka's send_batch(create_batch(), topic, partition=): its first record too
    large for the topic, the rest fine: the batch is split, the rest is delivered and
    the call's future raises the first record's error (it never resolved before)."""
    await create_topic(kafka.bootstrap_servers, topic_name, configs=LIMIT)
    async with Producer(
        bootstrap_servers=kafka.bootstrap_servers, batch_size=1_000_000, linger_ms=5, **FAST
    ) as producer:
        built = producer.create_batch()
        assert built.append(value=b"B" * 150_000, key=None, timestamp=None) is not None
        for i in range(50):
            assert built.append(value=value(i), key=None, timestamp=None) is not None
        future = await producer.send_batch(built, topic_name, partition=0)
        with pytest.raises(RecordTooLargeError):
            await asyncio.wait_for(future, 20)
    got = consume(kafka.bootstrap_servers, topic_name, 50)
    assert [m.value() for m in got] == [value(i) for i in range(50)]
