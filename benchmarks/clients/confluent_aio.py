"""confluent-kafka's asyncio API (``confluent_kafka.aio``: AIOProducer, AIOConsumer),
librdkafka calls run in a thread pool."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from functools import partial
from typing import Any

from confluent_kafka.aio import AIOConsumer, AIOProducer

from benchmarks.clients import confluent_sync
from benchmarks.clients.common import (
    MeterLike,
    consume_async,
    latency_async,
    produce_async,
    produce_txn_async,
)
from benchmarks.scenarios import Job


def version() -> str:
    return confluent_sync.version()


async def _produce(job: Job, meter: MeterLike) -> dict[str, Any]:
    # defaults: records are buffered in Python and handed to librdkafka 1000 at a time
    async with AIOProducer(confluent_sync.producer_config(job)) as p:
        await p.list_topics(job.topic, timeout=30)

        # the loop awaits the client's own coroutine: no wrapper per record, as
        # a service writes it (and as the blocking clients' loops call produce())
        send = partial(p.produce, job.topic)

        return await produce_async(job, meter, send, p.flush)


async def _produce_txn(job: Job, meter: MeterLike) -> dict[str, Any]:
    async with AIOProducer(confluent_sync.txn_producer_config(job)) as p:
        await p.init_transactions(30)  # the producer id, before the clock starts
        await p.list_topics(job.topic, timeout=30)

        # the loop awaits the client's own coroutine: no wrapper per record, as
        # a service writes it (and as the blocking clients' loops call produce())
        send = partial(p.produce, job.topic)

        # both flush the records buffered in Python first
        return await produce_txn_async(job, meter, send, p.begin_transaction,
                                       p.commit_transaction)


async def _consume(job: Job, meter: MeterLike) -> dict[str, Any]:
    errors: list[str] = []
    async with AIOConsumer(confluent_sync.consumer_config(job)) as c:
        await c.assign(confluent_sync.assignment(job))
        remaining = confluent_sync.Remaining(job.scenario.records)

        async def fetch() -> Iterable[bytes | None]:
            if errors:
                raise RuntimeError(errors[0])
            msgs = await c.consume(num_messages=remaining.ask(), timeout=0.5)
            remaining.took(len(msgs))
            return confluent_sync.values_of(msgs, errors)

        return await consume_async(job, meter, fetch)


async def _latency(job: Job, meter: MeterLike) -> dict[str, Any]:
    errors: list[str] = []
    async with AIOConsumer(confluent_sync.consumer_config(job)) as c:
        await c.assign(confluent_sync.assignment(job))

        async def fetch() -> Iterable[bytes | None]:
            # poll(), not consume(): consume() waits for a full batch or its timeout
            m = await c.poll(0.1)
            return confluent_sync.values_of([m], errors) if m is not None else ()

        # batch_size=1: the default buffers up to 1000 records or 1 s in Python, which
        # a latency-sensitive user would not keep
        async with AIOProducer(confluent_sync.producer_config(job), batch_size=1) as p:
            await p.list_topics(job.topic, timeout=30)

            # the loop awaits the client's own coroutine: no wrapper per record, as
            # a service writes it (and as the blocking clients' loops call produce())
            send = partial(p.produce, job.topic)

            out = await latency_async(job, meter, send, p.flush, fetch)
    return {**out, "consume_error": errors[0] if errors else None}


def produce(job: Job, meter: MeterLike) -> dict[str, Any]:
    return asyncio.run(_produce(job, meter))


def produce_txn(job: Job, meter: MeterLike) -> dict[str, Any]:
    return asyncio.run(_produce_txn(job, meter))


def consume(job: Job, meter: MeterLike) -> dict[str, Any]:
    return asyncio.run(_consume(job, meter))


def latency(job: Job, meter: MeterLike) -> dict[str, Any]:
    return asyncio.run(_latency(job, meter))
