"""aiokproto's Producer and Consumer (this project)."""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import Iterable
from functools import partial
from typing import Any

import aiokproto
from aiokproto.structs import TopicPartition
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
    """The version, which codec build runs and on which loop (the adapters' env picks)."""
    from aiokproto.accel import implementation

    loop = ", uvloop" if os.environ.get("BENCH_EVENT_LOOP") == "uvloop" else ""
    base = os.environ.get("BENCH_AIOKPROTO_PATH")
    where = f", from {os.path.dirname(os.path.dirname(aiokproto.__file__))}" if base else ""
    return f"{aiokproto.__version__} ({implementation()}{loop}{where})"


def _producer(job: Job) -> Any:
    from aiokproto.producer import Producer  # imported late: a missing one is a FAILED run

    s = job.scenario
    # transactions need idempotence (aiokproto refuses enable_idempotence=False with them)
    identity: dict[str, Any] = (
        {"transactional_id": transactional_id(job)} if s.txn_records
        else {"enable_idempotence": False}
    )  # fmt: skip
    return Producer(
        bootstrap_servers=job.bootstrap_servers,
        acks="all" if s.acks == "all" else 1,
        compression_type=s.compression,
        linger_ms=s.linger_ms,
        batch_size=BATCH_SIZE,
        **identity,
    )


def _consumer(job: Job) -> Any:
    from aiokproto.consumer import Consumer

    return Consumer(
        bootstrap_servers=job.bootstrap_servers,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


async def _assign(consumer: Any, job: Job) -> None:
    tps = [TopicPartition(job.topic, p) for p in range(job.scenario.partitions)]
    await _maybe_await(consumer.assign(tps))


def _fetcher(consumer: Any) -> Any:
    async def fetch() -> Iterable[bytes | None]:
        batch = await consumer.getmany(timeout_ms=500, max_records=10_000)
        return [r.value for records in batch.values() for r in records]

    return fetch


async def _warm_metadata(producer: Any, topic: str) -> None:
    """Topic metadata before the clock starts, if the producer can be asked for it."""
    partitions_for = getattr(producer, "partitions_for", None)
    if partitions_for is not None:
        await _maybe_await(partitions_for(topic))


async def _produce(job: Job, meter: MeterLike) -> dict[str, Any]:
    async with _producer(job) as p:
        await _warm_metadata(p, job.topic)

        # the loop awaits the client's own coroutine: no wrapper per record, as
        # a service writes it (and as the blocking clients' loops call produce())
        send = partial(p.send, job.topic)

        return await produce_async(job, meter, send, p.flush)


async def _produce_txn(job: Job, meter: MeterLike) -> dict[str, Any]:
    async with _producer(job) as p:  # start() gets the producer id: before the clock
        await _warm_metadata(p, job.topic)

        # the loop awaits the client's own coroutine: no wrapper per record, as
        # a service writes it (and as the blocking clients' loops call produce())
        send = partial(p.send, job.topic)

        async def begin() -> None:
            await p.begin_transaction()

        return await produce_txn_async(job, meter, send, begin, p.commit_transaction)


async def _consume(job: Job, meter: MeterLike) -> dict[str, Any]:
    async with _consumer(job) as c:
        await _assign(c, job)
        return await consume_async(job, meter, _fetcher(c))


async def _latency(job: Job, meter: MeterLike) -> dict[str, Any]:
    async with _consumer(job) as c:
        await _assign(c, job)
        async with _producer(job) as p:
            await _warm_metadata(p, job.topic)

            # the loop awaits the client's own coroutine: no wrapper per record, as
            # a service writes it (and as the blocking clients' loops call produce())
            send = partial(p.send, job.topic)

            return await latency_async(job, meter, send, p.flush, _fetcher(c))


def produce(job: Job, meter: MeterLike) -> dict[str, Any]:
    return asyncio.run(_produce(job, meter))


def produce_txn(job: Job, meter: MeterLike) -> dict[str, Any]:
    return asyncio.run(_produce_txn(job, meter))


def consume(job: Job, meter: MeterLike) -> dict[str, Any]:
    return asyncio.run(_consume(job, meter))


def latency(job: Job, meter: MeterLike) -> dict[str, Any]:
    return asyncio.run(_latency(job, meter))
