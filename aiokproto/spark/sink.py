"""Executor side of the sink: write DataFrame rows with the aiokproto Producer.

Delivery is at least once: a Spark task succeeds only after every record it sent was
acknowledged; the first delivery error fails the task (Spark retries it, which may
write some records twice). Column checks happen on the driver (``check_columns``).

With ``transactional.id.prefix`` each task writes all its records in one transaction
under ``<prefix>-<partition id>`` and commits it when the last one is acknowledged: a
failed task attempt leaves nothing visible to read_committed readers, and a retried
(or speculative) attempt fences the earlier one, aborting its open transaction. What
this does not give: a task that committed stays committed even if the job fails
later (another task, the driver), so re-running the job writes its records again.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]

from aiokproto.errors import KafkaConfigError

# Sends awaiting acknowledgement before the oldest is waited for: bounds memory while
# keeping batches flowing (the producer's own buffer_memory bounds bytes).
WINDOW = 20_000

OutRecord = tuple[
    str | None,  # topic (None: the topic option)
    int | None,  # partition (None: the partitioner decides)
    bytes | None,  # key
    bytes | None,  # value
    list[tuple[str, bytes | None]] | None,  # headers
]


@dataclass(frozen=True, slots=True)
class WriteResult:
    records: int


def _text_or_bytes(values: list[Any]) -> list[bytes | None]:
    return [v.encode() if isinstance(v, str) else v for v in values]


def _binary(column: Any) -> list[bytes | None]:
    # utf8 -> binary is a zero-copy cast in Arrow; then one to_pylist per column.
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.binary())
    return list(column.to_pylist())


def arrow_records(batch: Any) -> Iterator[OutRecord]:
    """The records of one Arrow batch with the sink's columns (others are ignored)."""
    n = batch.num_rows
    # Spark resolves column names case-insensitively; so does the sink.
    index = {name.lower(): i for i, name in enumerate(batch.schema.names)}
    names = set(index)

    def col(name: str) -> Any:
        return batch.column(index[name])

    values = _binary(col("value"))
    keys: Sequence[bytes | None] = _binary(col("key")) if "key" in names else [None] * n
    topics: Sequence[str | None] = col("topic").to_pylist() if "topic" in names else [None] * n
    partitions: Sequence[int | None] = (
        col("partition").to_pylist() if "partition" in names else [None] * n
    )
    headers: Sequence[Any] = col("headers").to_pylist() if "headers" in names else [None] * n
    for i in range(n):
        h = headers[i]
        yield (
            topics[i],
            partitions[i],
            keys[i],
            values[i],
            [(e["key"], e["value"]) for e in h] if h else None,
        )


def row_records(rows: Iterable[Any]) -> Iterator[OutRecord]:
    """The same from ``pyspark.sql.Row`` objects (Spark versions without Arrow writers)."""
    for row in rows:
        fields = {k.lower(): v for k, v in row.asDict(recursive=True).items()}
        value = fields["value"]
        key = fields.get("key")
        h = fields.get("headers")
        yield (
            fields.get("topic"),
            fields.get("partition"),
            key.encode() if isinstance(key, str) else (bytes(key) if key is not None else None),
            value.encode()
            if isinstance(value, str)
            else (bytes(value) if value is not None else None),
            [(e["key"], None if e["value"] is None else bytes(e["value"])) for e in h]
            if h
            else None,
        )


async def write_records(
    client: Mapping[str, Any],
    topic_option: str | None,
    records: Iterable[OutRecord],
    transactional_id: str | None = None,
) -> WriteResult:
    """Send every record and wait for all acknowledgements; raise the first failure.
    With a ``transactional_id``, all of it is one transaction, committed at the end
    and aborted if anything fails."""
    from aiokproto.producer import Producer

    options = dict(client)
    if transactional_id is not None:
        options["transactional_id"] = transactional_id
    async with Producer(**options) as producer:
        if transactional_id is None:
            return await _send_all(producer, topic_option, records)
        async with producer.transaction():
            return await _send_all(producer, topic_option, records)


async def _send_all(
    producer: Any, topic_option: str | None, records: Iterable[OutRecord]
) -> WriteResult:
    count = 0
    pending: deque[Awaitable[Any]] = deque()
    for topic, partition, key, value, headers in records:
        target = topic_option or topic
        if not target:
            raise KafkaConfigError(
                "a row has no topic: give the topic option or a non-null topic column"
            )
        pending.append(
            await producer.send(target, value, key=key, partition=partition, headers=headers)
        )
        count += 1
        while len(pending) > WINDOW:
            await pending.popleft()
    await producer.flush()
    while pending:
        await pending.popleft()
    return WriteResult(count)


def task_transactional_id(prefix: str | None) -> str | None:
    """``<prefix>-<partition id>`` for the running Spark task (None without a prefix)."""
    if prefix is None:
        return None
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        raise KafkaConfigError("transactional.id.prefix: no Spark task is running here")
    return f"{prefix}-{context.partitionId()}"


def write_sync(
    client: Mapping[str, Any],
    topic_option: str | None,
    records: Iterable[OutRecord],
    transactional_id: str | None = None,
) -> WriteResult:
    return asyncio.run(write_records(client, topic_option, records, transactional_id))
