"""aiokproto's bulk path: ``Producer.send_batch`` with chunks of records (produce only)."""

from __future__ import annotations

import asyncio
from typing import Any

from benchmarks.clients.aiokproto_client import _producer, _warm_metadata, version
from benchmarks.clients.common import Delivery, MeterLike, values_for
from benchmarks.payloads import POOL_SIZE
from benchmarks.scenarios import Job

__all__ = ["CHUNK", "produce", "version"]

CHUNK = 1000  # records per send_batch call


async def _produce(job: Job, meter: MeterLike) -> dict[str, Any]:
    pool = values_for(job)
    n = job.scenario.records
    # the chunks are prepared before the clock starts: a caller of a bulk API has its
    # records in hand already
    chunks = [
        [pool[i % POOL_SIZE] for i in range(start, min(start + CHUNK, n))]
        for start in range(0, n, CHUNK)
    ]
    delivery = Delivery()
    async with _producer(job) as p:
        await _warm_metadata(p, job.topic)
        meter.start()
        handles = [await p.send_batch(job.topic, chunk) for chunk in chunks]
        await p.flush()
        for handle, chunk in zip(handles, chunks, strict=True):
            try:
                # all of the call delivered, or its first error: what a bulk writer
                # needs (awaiting the handle would also make a RecordMetadata per record)
                await handle.wait()
            except Exception as exc:
                delivery.error(exc, count=len(chunk))
                continue
            delivery.acked += len(chunk)
        meter.stop()
    return delivery.fields()


def produce(job: Job, meter: MeterLike) -> dict[str, Any]:
    return asyncio.run(_produce(job, meter))
