"""Executor side of the source: read one offset range with the aiokproto Consumer on a
private event loop.

Spark calls ``read()`` synchronously in a Python worker; ``read_range`` runs the async
reader on an event loop of its own, stepping it once per yielded batch, and closes
the consumer when Spark stops iterating (early ``LIMIT``, task kill) or the range ends.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any, TypeVar

from aiokproto.consumer import Consumer
from aiokproto.consumer.errors import OffsetOutOfRangeConsumerError
from aiokproto.errors import KafkaTimeoutError
from aiokproto.spark.errors import DataLossError
from aiokproto.spark.planning import OffsetRange
from aiokproto.structs import TopicPartition

T = TypeVar("T")
R = TypeVar("R")

# Records per getmany call, i.e. per Arrow batch handed to Spark.
MAX_RECORDS = 10_000


async def iter_range(
    client: Mapping[str, Any],
    r: OffsetRange,
    convert: Callable[[str, int, list[Any]], R],
    *,
    fail_on_data_loss: bool = True,
    poll_timeout_ms: int = 120_000,
    max_records: int = MAX_RECORDS,
) -> AsyncIterator[R]:
    """Yield ``convert(topic, partition, records)`` for the records of ``r``, in order.

    Offsets missing inside the range are fine (compaction, transaction markers,
    aborted records under read_committed): the range ends when the consumer's position
    reaches ``r.end``. Records deleted since planning are data loss. If no progress is
    made for ``poll_timeout_ms`` the read fails rather than hang.
    """
    tp = TopicPartition(r.topic, r.partition)
    options = dict(client)
    options.update(group_id=None, enable_auto_commit=False, auto_offset_reset="none")
    async with Consumer(**options) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, r.start)
        position = r.start
        last_progress = time.monotonic()
        while position < r.end:
            try:
                got = await consumer.getmany(tp, timeout_ms=1_000, max_records=max_records)
            except OffsetOutOfRangeConsumerError as exc:
                if fail_on_data_loss:
                    raise DataLossError(
                        f"offsets from {position} of {r.topic}-{r.partition} were deleted "
                        f"before they were read ({exc}); set failOnDataLoss=false to skip them"
                    ) from exc
                earliest = (await consumer.beginning_offsets([tp]))[tp]
                if earliest <= position:
                    raise
                # Deleted under us: skip to what is left, as failOnDataLoss=false asks.
                position = min(earliest, r.end)
                consumer.seek(tp, position)
                continue
            records = got.get(tp, [])
            if records:
                if records[-1].offset >= r.end:
                    records = [rec for rec in records if rec.offset < r.end]
                if records:
                    yield convert(r.topic, r.partition, records)
            new_position = await consumer.position(tp)
            if new_position > position:
                position = new_position
                last_progress = time.monotonic()
            elif (time.monotonic() - last_progress) * 1000 > poll_timeout_ms:
                raise KafkaTimeoutError(
                    f"no records from {r.topic}-{r.partition} at offset {position} for "
                    f"{poll_timeout_ms} ms although the range ends at {r.end}; raise "
                    "kafkaConsumer.pollTimeoutMs if the cluster is just slow"
                )


def drive(agen: AsyncIterator[T]) -> Iterator[T]:
    """Iterate an async iterator from synchronous code on a private event loop."""
    loop = asyncio.new_event_loop()
    try:
        while True:
            try:
                item = loop.run_until_complete(anext(agen))
            except StopAsyncIteration:
                return
            yield item
    finally:
        aclose = getattr(agen, "aclose", None)
        if aclose is not None:
            loop.run_until_complete(aclose())
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
