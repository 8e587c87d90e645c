"""Executor side of the sink: write DataFrame rows with the aiokproto Producer. Arrow or
Row input grouped into ``send_batch`` calls per run of (topic, partition, headers), a
bounded window of pending deliveries.

Delivery is at least once: a Spark task succeeds only after every record it sent was
acknowledged; the first delivery error fails the task (Spark retries it, which may
write some records twice). Column checks happen on the driver (``check_columns``).

Rows are written column-wise: each Arrow batch (or chunk of ``Row`` objects) becomes
one ``OutBatch``, whose rows ``topic_rows``/``topic_calls`` group into
``Producer.send_batch`` calls, one per (topic, partition, headers) run; rows whose
headers change from row to row (runs shorter than ``MIN_RUN``) go one ``send()``
each, as before. The grouping never reorders two records that may land in the same
Kafka partition, so every partition receives its records in row order, as with one
``send()`` per row; rows with no partition get the partition ``send()`` would choose
(the producer's default partitioner: murmur2 of the key, computed here to group
keyed rows; sticky without a key).

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
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import compress, pairwise
from operator import itemgetter, ne, or_
from typing import Any, NamedTuple

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]

from aiokproto.errors import KafkaConfigError
from aiokproto.producer.delivery import BatchDelivery, DeliveryFuture
from aiokproto.producer.partitioner import partition_for_key
from aiokproto.records.record import Header
from aiokproto.spark.formats import Encoder, SinkFormats, column_values

# Records awaiting acknowledgement before the oldest send is waited for: bounds memory
# while keeping batches flowing (the producer's own buffer_memory bounds bytes).
WINDOW = 20_000

# One send_batch call takes at most this many records / about this many value bytes
# (a call is all or nothing, so its bytes are held at once; smaller calls also give
# the sender turns in between).
CHUNK_ROWS = 10_000
CHUNK_BYTES = 1 << 20

# Runs of rows for one send_batch call shorter than this on average are sent one
# send() per row instead (a call costs about as much as a few send()s).
MIN_RUN = 3

# Rows of ``pyspark.sql.Row`` input gathered into one OutBatch.
ROW_CHUNK = 1_000

OutRecord = tuple[
    str | None,  # topic (None: the topic option)
    int | None,  # partition (None: the partitioner decides)
    bytes | None,  # key
    bytes | None,  # value
    list[Header] | None,  # headers
]

Rows = range | list[int]  # row numbers of an OutBatch, in row order

NO_TOPIC = "a row has no topic: give the topic option or a non-null topic column"


@dataclass(frozen=True, slots=True)
class WriteResult:
    records: int


@dataclass(frozen=True, slots=True)
class OutBatch:
    """The sink's columns of some rows, column-wise; a missing column is None (all
    rows null). Headers are None or a non-empty list per row."""

    values: Sequence[bytes | None]
    keys: Sequence[bytes | None] | None = None
    topics: Sequence[str | None] | None = None
    partitions: Sequence[int | None] | None = None
    headers: Sequence[list[Header] | None] | None = None
    value_bytes: int | None = None  # total value size, if known (sizes send_batch calls)

    def __len__(self) -> int:
        return len(self.values)

    def records(self) -> Iterator[OutRecord]:
        """Row by row."""
        n = len(self.values)
        topics = self.topics or [None] * n
        partitions = self.partitions or [None] * n
        keys = self.keys or [None] * n
        headers = self.headers or [None] * n
        return zip(topics, partitions, keys, self.values, headers, strict=True)


class Call(NamedTuple):
    """Rows for one ``send_batch`` (one ``send`` when alone): one topic, one partition
    (None: the partitioner's choice per record) and the same headers. With ``each``
    the rows go one ``send()`` each, in order, with their own partition (None: the
    partitioner's choice) and headers; ``partition`` and ``headers`` are unused."""

    topic: str
    partition: int | None
    rows: Rows
    headers: list[Header] | None
    each: bool = False


def _binary(column: Any) -> list[bytes | None]:
    # utf8 -> binary is a zero-copy cast in Arrow; then one to_pylist per column.
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.binary())
    return list(column.to_pylist())


def _arrow_headers(column: Any) -> list[list[Header] | None] | None:
    """list<struct<key, value>> as a (key, value) list per row (None: null or empty)."""
    n = len(column)
    if column.null_count == n:
        return None
    offsets = column.offsets.to_pylist()
    base = offsets[0]
    # the entries this (maybe sliced) column spans, in the child of the whole array
    entries = column.values.slice(base, offsets[-1] - base)
    if entries.null_count:
        raise KafkaConfigError("a headers entry is null (give a key and a value)")
    pairs: list[Header] = list(
        zip(entries.field("key").to_pylist(), entries.field("value").to_pylist(), strict=True)
    )
    if base:
        offsets = [o - base for o in offsets]
    width = offsets[1]
    if not column.null_count and len(pairs) == width * n and pairs == pairs[:width] * n:
        # every row has the same headers (a constant column, say): one shared list
        return None if not width else [pairs[:width]] * n
    # an empty list is None too (no headers), as is a null one
    out: list[list[Header] | None] = [
        pairs[start:stop] or None for start, stop in pairwise(offsets)
    ]
    if column.null_count:  # a null list may still span entries
        for i, null in enumerate(column.is_null().to_pylist()):
            if null:
                out[i] = None
    if out.count(None) == n:
        return None
    return out


def arrow_batch(batch: Any) -> OutBatch:
    """The sink's columns of one Arrow batch (others are ignored)."""
    n = batch.num_rows
    # Spark resolves column names case-insensitively; so does the sink.
    index = {name.lower(): i for i, name in enumerate(batch.schema.names)}

    def col(name: str) -> Any:
        """The column, None if missing or all null."""
        i = index.get(name)
        if i is None:
            return None
        column = batch.column(i)
        return None if column.null_count == n else column

    value = batch.column(index["value"])
    key, topic, partition, headers = col("key"), col("topic"), col("partition"), col("headers")
    # a struct (or other typed) column, for valueFormat/keyFormat: dicts, encoded later
    typed = not _is_bytes(value.type)
    return OutBatch(
        values=column_values(value) if typed else _binary(value),
        keys=None if key is None else (_binary(key) if _is_bytes(key.type) else column_values(key)),
        topics=[None] * n if topic is None else topic.to_pylist(),
        partitions=None if partition is None else partition.to_pylist(),
        headers=None if headers is None else _arrow_headers(headers),
        value_bytes=None if typed else int(pc.sum(pc.binary_length(value)).as_py() or 0),
    )


def _is_bytes(dtype: Any) -> bool:
    t = pa.types
    return bool(
        t.is_binary(dtype)
        or t.is_large_binary(dtype)
        or t.is_string(dtype)
        or t.is_large_string(dtype)
    )


def arrow_records(batch: Any) -> Iterator[OutRecord]:
    """The records of one Arrow batch with the sink's columns, row by row."""
    return arrow_batch(batch).records()


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
            _row_bytes(key),
            _row_bytes(value),
            [(e["key"], None if e["value"] is None else bytes(e["value"])) for e in h]
            if h
            else None,
        )


def _row_bytes(value: Any) -> Any:
    """A Row's key or value as bytes; a dict (a struct or map for keyFormat/valueFormat)
    or other typed value as it is, for the serializers."""
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    return value


def record_batches(records: Iterable[OutRecord], size: int = ROW_CHUNK) -> Iterator[OutBatch]:
    """Row-wise records gathered into OutBatches of ``size`` rows."""
    chunk: list[OutRecord] = []
    for record in records:
        chunk.append(record)
        if len(chunk) >= size:
            yield _columns(chunk)
            chunk = []
    if chunk:
        yield _columns(chunk)


def row_batches(rows: Iterable[Any], size: int = ROW_CHUNK) -> Iterator[OutBatch]:
    """OutBatches of ``pyspark.sql.Row`` objects."""
    return record_batches(row_records(rows), size)


def _columns(records: list[OutRecord]) -> OutBatch:
    topics, partitions, keys, values, headers = (list(c) for c in zip(*records, strict=True))
    n = len(records)
    return OutBatch(
        values=values,
        keys=None if keys.count(None) == n else keys,
        topics=topics,
        partitions=None if partitions.count(None) == n else partitions,
        headers=None if headers.count(None) == n else headers,
    )


# -- grouping ----------------------------------------------------------------------------


def topic_rows(batch: OutBatch, topic_option: str | None) -> dict[str, Rows]:
    """The batch's row numbers per target topic, in row order. Raises
    ``KafkaConfigError`` (before anything is sent) if a row has no topic."""
    n = len(batch.values)
    if not n:
        return {}
    topics = batch.topics
    first = None if topics is None else topics[0]
    if topic_option:  # the option wins over the column, as in Spark's Kafka sink
        return {topic_option: range(n)}
    if topics is None or not first:
        raise KafkaConfigError(NO_TOPIC)
    if topics.count(first) == n:
        return {first: range(n)}
    if not all(topics):
        raise KafkaConfigError(NO_TOPIC)
    return dict(_group(topics, range(n)))


def _group(by: Iterable[Any], rows: Iterable[int]) -> dict[Any, list[int]]:
    """``rows`` grouped by the value beside each in ``by``, in row order within each
    group and in order of first appearance across them."""
    grouped: dict[Any, list[int]] = {}
    for i, value in zip(rows, by, strict=True):
        same = grouped.get(value)
        if same is None:
            grouped[value] = [i]
        else:
            same.append(i)
    return grouped


def topic_calls(
    batch: OutBatch, topic: str, rows: Rows, partition_count: int | None = None
) -> Iterator[Call]:
    """Send calls for ``rows`` of ``topic``. Records that may go to the same Kafka
    partition stay in row order: rows are grouped by partition, unless some rows have
    none (the partitioner could pick any partition), then they keep their order and
    are cut where partition or headers change. Where that leaves runs shorter than
    ``MIN_RUN`` rows on average (headers that change from row to row, say), the rows
    go one ``send()`` each, in row order.

    With ``partition_count`` (the topic's, as the producer knows it, and the
    producer's default partitioner) keyed rows without a partition get their key's
    partition here, the one ``send()`` would choose, so they can be grouped too."""
    n = len(rows)
    keys = batch.keys
    headers = None if batch.headers is None else _take(batch.headers, rows)
    if (
        headers is not None
        and batch.partitions is None
        and len(_starts(None, headers)) * MIN_RUN >= n
    ):
        # headers that change from row to row (a trace id, say) and no partitions to
        # group rows by (keys rarely follow the headers): no run would be long enough
        yield Call(topic, None, rows, None, each=True)
        return
    parts: Sequence[int | None] | None = None  # per row of ``rows`` (None: all None)
    if batch.partitions is not None:
        parts = _take(batch.partitions, rows)
    if partition_count is not None and keys is not None:
        for_key = partition_for_key
        picked = _take(keys, rows)
        if parts is None:
            parts = [None if k is None else for_key(k, partition_count) for k in picked]
        else:
            parts = [
                p if p is not None or k is None else for_key(k, partition_count)
                for p, k in zip(parts, picked, strict=True)
            ]
    nulls = n if parts is None else parts.count(None)
    if parts is not None and nulls and nulls < n:
        # some rows with a partition, some without: keep their order
        yield from _runs(topic, rows, parts, headers)
        return
    # each partition's rows on their own (all of them when no row has one)
    domains: dict[int | None, Rows]
    if parts is None or nulls or parts.count(parts[0]) == n:
        domains = {None if parts is None or nulls else parts[0]: rows}
    else:
        domains = dict(_group(parts, rows))
    for partition, domain in domains.items():
        if batch.headers is None:
            yield Call(topic, partition, domain, None)
            continue
        picked_headers = _take(batch.headers, domain)
        first = picked_headers[0]
        if picked_headers.count(first) == len(picked_headers):  # same lists: fast
            yield Call(topic, partition, domain, first)
        else:
            yield from _runs(topic, domain, [partition] * len(domain), picked_headers)


def _starts(parts: Sequence[Any] | None, headers: Sequence[Any] | None) -> list[int]:
    """Positions (> 0) where the partition or the headers differ from the row before."""
    changed: Iterable[Any]
    if parts is None:
        assert headers is not None
        n = len(headers)
        changed = map(ne, headers, headers[1:])
    elif headers is None:
        n = len(parts)
        changed = map(ne, parts, parts[1:])
    else:
        n = len(parts)
        changed = map(or_, map(ne, parts, parts[1:]), map(ne, headers, headers[1:]))
    return list(compress(range(1, n), changed))


def _runs(
    topic: str,
    rows: Rows,
    parts: Sequence[int | None],
    headers: Sequence[list[Header] | None] | None,
) -> Iterator[Call]:
    """``rows`` cut into consecutive runs of the same partition and headers (both one
    per row of ``rows``), or all of them row by row if runs would be short."""
    starts = _starts(parts, headers)
    n = len(rows)
    if len(starts) * MIN_RUN >= n:
        yield Call(topic, None, rows, None, each=True)
        return
    numbers = list(rows)
    for start, stop in pairwise([0, *starts, n]):
        yield Call(
            topic,
            parts[start],
            numbers[start:stop],
            None if headers is None else headers[start],
        )


def plan(
    batch: OutBatch, topic_option: str | None, partition_counts: Mapping[str, int] | None = None
) -> list[Call]:
    """All send calls for the batch (``topic_rows`` then ``topic_calls``)."""
    counts = partition_counts or {}
    return [
        call
        for topic, rows in topic_rows(batch, topic_option).items()
        for call in topic_calls(batch, topic, rows, counts.get(topic))
    ]


def _take(column: Sequence[Any], rows: Rows) -> Sequence[Any]:
    if isinstance(rows, range):
        return column[rows.start : rows.stop]
    if len(rows) == 1:
        return [column[rows[0]]]
    return itemgetter(*rows)(column)  # type: ignore[no-any-return]


def _chunk_rows(batch: OutBatch, limit: int = CHUNK_BYTES) -> int:
    """Rows per send_batch call for this batch: CHUNK_ROWS, fewer for large values
    (about ``limit`` value bytes)."""
    n = len(batch.values)
    size = batch.value_bytes
    if size is None:
        sample = batch.values[:64]
        size = sum(len(v) for v in sample if v is not None) * n // max(1, len(sample))
    per_row = size // n + 1 if n else 1
    return max(1, min(CHUNK_ROWS, limit // per_row))


# -- sending -----------------------------------------------------------------------------


async def write_records(
    client: Mapping[str, Any],
    topic_option: str | None,
    batches: Iterable[OutBatch],
    transactional_id: str | None = None,
    formats: SinkFormats | None = None,
) -> WriteResult:
    """Send every record and wait for all acknowledgements; raise the first failure.
    With a ``transactional_id``, all of it is one transaction, committed at the end
    and aborted if anything fails. With ``formats`` (resolved) the key and value
    columns are encoded by the registry's serializers first."""
    if formats is None:
        return await _write(client, topic_option, batches, transactional_id, None)
    from aiokproto.schema_registry import SchemaRegistryClient

    async with SchemaRegistryClient(dict(formats.registry)) as sr:
        encoder = Encoder(formats, sr)
        return await _write(client, topic_option, batches, transactional_id, encoder)


async def _write(
    client: Mapping[str, Any],
    topic_option: str | None,
    batches: Iterable[OutBatch],
    transactional_id: str | None,
    encoder: Encoder | None,
) -> WriteResult:
    from aiokproto.producer import Producer

    options = dict(client)
    if transactional_id is not None:
        options["transactional_id"] = transactional_id
    async with Producer(**options) as producer:
        if transactional_id is None:
            return await _send_all(producer, topic_option, batches, encoder)
        async with producer.transaction():
            return await _send_all(producer, topic_option, batches, encoder)


async def encode_batch(batch: OutBatch, topic_option: str | None, encoder: Encoder) -> OutBatch:
    """``batch`` with its key and value columns encoded (each row for its topic)."""
    n = len(batch.values)
    topics: Sequence[str | None] = (
        [topic_option] * n if topic_option else (batch.topics or [None] * n)
    )
    values: Sequence[bytes | None] = batch.values
    keys = batch.keys
    if encoder.value is not None:
        values = await encoder.encode(batch.values, topics, "value")
    if encoder.key is not None and keys is not None:
        keys = await encoder.encode(keys, topics, "key")
    return replace(batch, values=values, keys=keys, value_bytes=None)


async def _send_all(
    producer: Any,
    topic_option: str | None,
    batches: Iterable[OutBatch],
    encoder: Encoder | None = None,
) -> WriteResult:
    # Keyed rows are grouped by their key's partition only with the default
    # partitioner (a custom one is left to choose per record inside send_batch).
    default_partitioner = producer.options.partitioner is None
    # a call's bytes are held at once: a small part of the producer's buffer at most
    call_bytes = min(CHUNK_BYTES, producer.options.buffer_memory // 4)
    count = 0
    pending = _Pending()
    for batch in batches:
        by_topic = topic_rows(batch, topic_option)
        if not by_topic:
            continue
        if encoder is not None:
            batch = await encode_batch(batch, topic_option, encoder)
        step = _chunk_rows(batch, call_bytes)
        values, keys = batch.values, batch.keys
        for topic, rows_of_topic in by_topic.items():
            partition_count = None
            if keys is not None and default_partitioner:
                # the count the producer's partitioner uses, from the same metadata
                partition_count = len(await producer.partitions_for(topic))
            for call in topic_calls(batch, topic, rows_of_topic, partition_count):
                rows = call.rows
                if call.each:  # row by row, as one send() per row always did
                    parts, headers = batch.partitions, batch.headers
                    for i in rows:
                        pending.add_record(
                            await producer.send(
                                topic,
                                values[i],
                                key=None if keys is None else keys[i],
                                partition=None if parts is None else parts[i],
                                headers=None if headers is None else headers[i],
                            )
                        )
                        if pending.records > WINDOW:
                            await pending.wait(WINDOW)
                elif len(rows) == 1:  # a row alone (its own headers, say): send() it
                    i = rows[0]
                    pending.add_record(
                        await producer.send(
                            topic,
                            values[i],
                            key=None if keys is None else keys[i],
                            partition=call.partition,
                            headers=call.headers,
                        )
                    )
                else:
                    for start in range(0, len(rows), step):
                        chunk = rows[start : start + step]
                        delivery = await producer.send_batch(
                            topic,
                            _take(values, chunk),
                            keys=None if keys is None else _take(keys, chunk),
                            partition=call.partition,
                            headers=call.headers,
                        )
                        pending.add_batch(delivery, len(chunk))
                if pending.records > WINDOW:
                    await pending.wait(WINDOW)
        count += len(batch)
    await producer.flush()
    await pending.wait(0)
    return WriteResult(count)


class _Pending:
    """What sent records wait on, oldest first: one entry per ``send_batch`` call
    (``BatchDelivery.wait()``: no per-record metadata is built) or per batch future of
    the records sent one by one (consecutive records of one batch share an entry)."""

    __slots__ = ("_entries", "records")

    def __init__(self) -> None:
        self._entries: deque[list[Any]] = deque()  # [future or BatchDelivery, records]
        self.records = 0

    def add_record(self, handle: DeliveryFuture) -> None:
        batch = handle.batch
        if batch is None:  # refused before buffering (too large): fail now
            error = handle.exception()
            assert error is not None
            raise error
        self._add(batch.future, 1)

    def add_batch(self, delivery: BatchDelivery, records: int) -> None:
        self._add(delivery, records)

    def _add(self, waitable: Any, records: int) -> None:
        entries = self._entries
        if entries and entries[-1][0] is waitable:
            entries[-1][1] += records
        else:
            entries.append([waitable, records])
        self.records += records

    async def wait(self, limit: int) -> None:
        """Wait for the oldest entries until at most ``limit`` records are pending;
        raises the first delivery error."""
        entries = self._entries
        while self.records > limit:
            waitable, records = entries[0]
            if isinstance(waitable, asyncio.Future):
                if not waitable.done():
                    await asyncio.wait((waitable,))  # never cancels the producer's future
                waitable.result()  # raises the batch's delivery error
            else:
                await waitable.wait()
            entries.popleft()
            self.records -= records


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
    batches: Iterable[OutBatch],
    transactional_id: str | None = None,
    formats: SinkFormats | None = None,
) -> WriteResult:
    return asyncio.run(write_records(client, topic_option, batches, transactional_id, formats))
