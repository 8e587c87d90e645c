"""aiokafka (asyncio, pure Python with C record codecs)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from functools import partial
from typing import Any

import aiokafka  # type: ignore[import-untyped]
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from benchmarks.clients.common import (
    MeterLike,
    consume_async,
    latency_async,
    produce_async,
    produce_txn_async,
    transactional_id,
)
from benchmarks.scenarios import BATCH_SIZE, Job


def version() -> str:
    return str(aiokafka.__version__)


def _producer(job: Job) -> AIOKafkaProducer:
    s = job.scenario
    return AIOKafkaProducer(
        bootstrap_servers=job.bootstrap_servers,
        acks="all" if s.acks == "all" else 1,
        compression_type=None if s.compression == "none" else s.compression,
        linger_ms=s.linger_ms,
        max_batch_size=BATCH_SIZE,
        # transactions need idempotence
        enable_idempotence=bool(s.txn_records),
        transactional_id=transactional_id(job) if s.txn_records else None,
    )


def _consumer(job: Job) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        bootstrap_servers=job.bootstrap_servers,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )


async def _assign(consumer: AIOKafkaConsumer, job: Job) -> None:
    consumer.assign([TopicPartition(job.topic, p) for p in range(job.scenario.partitions)])
    await consumer.seek_to_beginning()


def _fetcher(consumer: AIOKafkaConsumer) -> Any:
    async def fetch() -> Iterable[bytes | None]:
        batch = await consumer.getmany(timeout_ms=500, max_records=10_000)
        return [r.value for records in batch.values() for r in records]

    return fetch


async def _produce(job: Job, meter: MeterLike) -> dict[str, Any]:
    async with _producer(job) as p:
        await p.partitions_for(job.topic)  # metadata before the clock starts

        # the loop awaits the client's own coroutine: no wrapper per record, as
        # a service writes it (and as the blocking clients' loops call produce())
        send = partial(p.send, job.topic)

        return await produce_async(job, meter, send, p.flush)


async def _produce_txn(job: Job, meter: MeterLike) -> dict[str, Any]:
    async with _producer(job) as p:  # start() gets the producer id: before the clock
        await p.partitions_for(job.topic)

        # the loop awaits the client's own coroutine: no wrapper per record, as
        # a service writes it (and as the blocking clients' loops call produce())
        send = partial(p.send, job.topic)

        return await produce_txn_async(job, meter, send, p.begin_transaction,
                                       p.commit_transaction)


async def _consume(job: Job, meter: MeterLike) -> dict[str, Any]:
    c = _consumer(job)
    await c.start()
    try:
        await _assign(c, job)
        return await consume_async(job, meter, _fetcher(c))
    finally:
        await c.stop()


async def _latency(job: Job, meter: MeterLike) -> dict[str, Any]:
    c = _consumer(job)
    await c.start()
    try:
        await _assign(c, job)
        async with _producer(job) as p:
            await p.partitions_for(job.topic)

            # the loop awaits the client's own coroutine: no wrapper per record, as
            # a service writes it (and as the blocking clients' loops call produce())
            send = partial(p.send, job.topic)

            return await latency_async(job, meter, send, p.flush, _fetcher(c))
    finally:
        await c.stop()


def produce(job: Job, meter: MeterLike) -> dict[str, Any]:
    return asyncio.run(_produce(job, meter))


def produce_txn(job: Job, meter: MeterLike) -> dict[str, Any]:
    return asyncio.run(_produce_txn(job, meter))


def consume(job: Job, meter: MeterLike) -> dict[str, Any]:
    return asyncio.run(_consume(job, meter))


def latency(job: Job, meter: MeterLike) -> dict[str, Any]:
    return asyncio.run(_latency(job, meter))
