"""The PySpark Python Data Source ``aiokproto``: batch and streaming, read and write
(the pyspark reader and writer classes, column checks).

Driver side: options are parsed when a reader or writer is made (bad options fail the
query before any task starts); partitions are planned from list-offsets answers.
Executor side: each input partition is one offset range of one Kafka partition, read
by ``fetch.iter_range``; each write task sends its rows through one Producer.
Everything Spark pickles (readers, writers, input partitions) holds only options and
offsets, never a connection.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
)

from aiokproto.errors import KafkaConfigError
from aiokproto.spark import arrow, compat, formats
from aiokproto.spark.fetch import drive, iter_range
from aiokproto.spark.lookup import lookup
from aiokproto.spark.offsets import PartitionOffsets, offsets_from_json, offsets_to_json
from aiokproto.spark.options import (
    FORMAT,
    SinkOptions,
    SourceOptions,
    parse_sink_options,
    parse_source_options,
)
from aiokproto.spark.planning import DataLoss, OffsetRange, clamp, resolve, split, stream_end
from aiokproto.spark.sink import (
    WriteResult,
    arrow_batch,
    row_batches,
    task_transactional_id,
    write_sync,
)


class RangePartition(InputPartition):
    """One offset range; ``value`` is the ``OffsetRange``."""

    def __init__(self, r: OffsetRange) -> None:
        super().__init__(r)
        self.range = r


def _read(options: SourceOptions, partition: InputPartition) -> Iterator[Any]:
    r = partition.range if isinstance(partition, RangePartition) else None
    if r is None:  # Spark hands an empty placeholder partition when there is no range
        return
    include = options.include_headers
    if options.formats is not None:  # keyFormat/valueFormat: decoded, typed columns
        yield from _read_decoded(options, options.formats, r)
        return
    yield from drive(
        iter_range(
            options.client,
            r,
            lambda t, p, recs: arrow.to_record_batch(t, p, recs, include),
            fail_on_data_loss=options.fail_on_data_loss,
            poll_timeout_ms=options.poll_timeout_ms,
        )
    )


def _read_decoded(options: SourceOptions, fmt: formats.Formats, r: OffsetRange) -> Iterator[Any]:
    include = options.include_headers
    key_type, value_type = formats.arrow_types(fmt)

    def read(client: Any) -> Any:
        return iter_range(
            client,
            r,
            lambda t, p, recs: formats.to_typed_batch(t, p, recs, include, key_type, value_type),
            fail_on_data_loss=options.fail_on_data_loss,
            poll_timeout_ms=options.poll_timeout_ms,
        )

    yield from drive(formats.decoded(fmt, options.client, read))


def _source_options(options: Any, schema: StructType) -> SourceOptions:
    """The parsed options, the format columns' reader schemas fetched (on the driver)
    and typed as the DataFrame's ``schema`` says."""
    parsed = parse_source_options(options)
    if parsed.formats is None:
        return parsed
    return replace(parsed, formats=formats.with_types(formats.resolve(parsed.formats), schema))


def _partitions(ranges: list[OffsetRange], options: SourceOptions) -> list[InputPartition]:
    return [RangePartition(r) for r in split(ranges, options.min_partitions)]


class KafkaBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        options.check_batch()
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        o = self.options
        bounds, (start_hits, end_hits) = lookup(
            o.client, o.subscription, o.batch_starting, o.ending
        )
        start = resolve(
            o.batch_starting, bounds, start_hits, ending=False, strategy=o.timestamp_strategy
        )
        end = resolve(o.ending, bounds, end_hits, ending=True)
        loss = DataLoss(o.fail_on_data_loss)
        ranges = clamp(start, end, bounds, loss)
        loss.settle()
        return _partitions(ranges, o)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(self.options, partition)


class _StreamReader(DataSourceStreamReader):
    """Offsets are Spark's Kafka JSON (``{"topic": {"0": 42}}``), so is the checkpoint.

    ``stream_reader`` picks the subclass for the running pyspark (``compat``).
    """

    def __init__(self, options: SourceOptions) -> None:
        options.check_streaming()
        self.options = options
        self._initial: dict[str, dict[str, int]] | None = None

    def initialOffset(self) -> dict[str, Any]:
        # Resolved once: a query's first batch must start where latestOffset began counting
        # (startingOffsets "latest" or a timestamp moves with time).
        if self._initial is None:
            o = self.options
            bounds, (hits,) = lookup(o.client, o.subscription, o.stream_starting)
            start = resolve(
                o.stream_starting, bounds, hits, ending=False, strategy=o.timestamp_strategy
            )
            self._initial = offsets_to_json(start)
        return self._initial

    def _next_end(self, start: dict[str, Any], max_rows: int | None) -> PartitionOffsets:
        o = self.options
        bounds, _ = lookup(o.client, o.subscription)
        return stream_end(offsets_from_json(start, "the start offset"), bounds, max_rows)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        o = self.options
        start_offsets = offsets_from_json(start, "the start offset")
        end_offsets = offsets_from_json(end, "the end offset")
        if start_offsets == end_offsets:
            return []
        bounds, _ = lookup(o.client, o.subscription)
        loss = DataLoss(o.fail_on_data_loss)
        ranges = clamp(start_offsets, end_offsets, bounds, loss)
        loss.settle()
        return _partitions(ranges, o)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(self.options, partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: Spark's checkpoint is the only record of progress."""


class KafkaStreamReader(_StreamReader, compat.SupportsTriggerAvailableNow):
    """pyspark 4.2+: Spark passes each batch's start and a read limit
    (``maxOffsetsPerTrigger``); Trigger.AvailableNow runs batches up to the offsets that
    were latest when the query started."""

    def __init__(self, options: SourceOptions) -> None:
        super().__init__(options)
        self._target: dict[str, dict[str, int]] | None = None

    def getDefaultReadLimit(self) -> compat.ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return compat.ReadMaxRows(self.options.max_offsets_per_trigger)
        return compat.ReadAllAvailable()

    def latestOffset(self, start: dict[str, Any], limit: compat.ReadLimit) -> dict[str, Any]:
        max_rows = limit.max_rows if isinstance(limit, compat.ReadMaxRows) else None
        end = self._next_end(start, max_rows)
        if self._target is not None:
            target = offsets_from_json(self._target, "the AvailableNow target")
            # Partitions that appeared after the query started are not part of the target.
            end = {tp: min(off, target[tp]) for tp, off in end.items() if tp in target}
        return offsets_to_json(end)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        bounds, _ = lookup(self.options.client, self.options.subscription)
        return offsets_to_json(bounds.latest)

    def prepareForTriggerAvailableNow(self) -> None:
        bounds, _ = lookup(self.options.client, self.options.subscription)
        self._target = offsets_to_json(bounds.latest)


class LegacyKafkaStreamReader(_StreamReader):
    """pyspark 4.0 and 4.1: no admission control, so ``latestOffset()`` gets neither the
    start nor a limit. The reader applies ``maxOffsetsPerTrigger`` from the end of the
    last batch Spark planned (``partitions``; on a restart Spark hands the checkpoint's
    latest offsets to ``partitions(end, end)``), or from ``initialOffset()``.

    Spark runs ``Trigger.AvailableNow`` on such a source as one batch, so with
    ``maxOffsetsPerTrigger`` a run reads at most that many records (the next run goes on
    from there); the reader cannot tell that trigger from the others.
    """

    def __init__(self, options: SourceOptions) -> None:
        super().__init__(options)
        self._planned: dict[str, Any] | None = None

    def latestOffset(self) -> dict[str, Any]:  # type: ignore[override]  # pyspark < 4.2
        start = self._planned if self._planned is not None else self.initialOffset()
        return offsets_to_json(self._next_end(start, self.options.max_offsets_per_trigger))

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        self._planned = end
        return super().partitions(start, end)


def stream_reader(options: SourceOptions) -> _StreamReader:
    """The stream reader for the running pyspark (see ``compat``)."""
    if compat.ADMISSION_CONTROL:
        return KafkaStreamReader(options)
    return LegacyKafkaStreamReader(options)


# -- sink ------------------------------------------------------------------------------


def _is(dtype: DataType, *types: type[DataType]) -> bool:
    return isinstance(dtype, types)


def check_columns(schema: StructType, options: SinkOptions) -> None:
    """The sink's column rules (Spark's Kafka sink's): fail on the driver, before writing."""
    fields = {f.name.lower(): f.dataType for f in schema.fields}
    if "value" not in fields:
        raise KafkaConfigError("the DataFrame needs a value column (string or binary)")
    fmt = options.formats
    for name in ("value", "key"):
        encoded = fmt is not None and getattr(fmt, name) is not None
        if encoded and name in fields:
            column = getattr(fmt, name)
            if _is(fields[name], BinaryType):
                raise KafkaConfigError(
                    f"{name}Format={column.format} encodes the {name} column, but it is binary "
                    f"(already encoded?): give a struct (or map) {name} column, or drop "
                    f"{name}Format"
                )
            continue
        if name in fields and not _is(fields[name], StringType, BinaryType):
            raise KafkaConfigError(
                f"column {name} must be string or binary, not {fields[name].simpleString()}"
            )
    if "topic" in fields and not _is(fields["topic"], StringType):
        raise KafkaConfigError(f"column topic must be string, not {fields['topic'].simpleString()}")
    if "topic" not in fields and options.topic is None:
        raise KafkaConfigError("give the topic option or a topic column (string)")
    if "partition" in fields and not _is(fields["partition"], IntegerType):
        raise KafkaConfigError(
            f"column partition must be int, not {fields['partition'].simpleString()}"
        )
    if "headers" in fields:
        h = fields["headers"]
        ok = (
            isinstance(h, ArrayType)
            and isinstance(h.elementType, StructType)
            and [(f.name, type(f.dataType)) for f in h.elementType.fields]
            == [("key", StringType), ("value", BinaryType)]
        )
        if not ok:
            raise KafkaConfigError(
                "column headers must be array<struct<key: string, value: binary>>, "
                f"not {h.simpleString()}"
            )


class _Written(WriterCommitMessage):
    def __init__(self, result: WriteResult) -> None:
        self.records = result.records


class KafkaBatchWriter(DataSourceArrowWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        batches = (arrow_batch(batch) for batch in iterator)
        txn_id = task_transactional_id(self.options.transactional_id_prefix)
        o = self.options
        return _Written(write_sync(o.client, o.topic, batches, txn_id, o.formats))


class KafkaStreamWriter(compat.DataSourceStreamArrowWriter):
    """Takes Arrow batches on pyspark 4.1+, ``Row`` objects on 4.0 (``compat``)."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        batches = (
            (arrow_batch(batch) for batch in iterator)
            if compat.STREAM_ARROW_WRITES
            else row_batches(iterator)
        )
        txn_id = task_transactional_id(self.options.transactional_id_prefix)
        o = self.options
        return _Written(write_sync(o.client, o.topic, batches, txn_id, o.formats))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Records were acknowledged by the tasks themselves; nothing left to do."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Records of tasks that finished cannot be taken back (at least once; with
        transactional.id.prefix a failed task's records were aborted with it)."""


class KafkaDataSource(DataSource):
    """Register with ``spark.dataSource.register(KafkaDataSource)``; format ``"aiokproto"``."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str | StructType:
        value = str(self.options.get("includeheaders", "false")).strip().lower()
        ddl = arrow.DDL_WITH_HEADERS if value == "true" else arrow.DDL
        if not any(k.lower() in ("keyformat", "valueformat") for k in self.options):
            return ddl  # (a writer's options are never parsed as a source's)
        parsed = parse_source_options(self.options)
        if parsed.formats is None:
            return ddl
        typed: StructType = formats.typed_schema(value == "true", formats.resolve(parsed.formats))
        return typed

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaBatchReader(_source_options(self.options, schema))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return stream_reader(_source_options(self.options, schema))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return KafkaBatchWriter(_sink_options(self.options, schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return KafkaStreamWriter(_sink_options(self.options, schema))


def _sink_options(options: Any, schema: StructType) -> SinkOptions:
    parsed = parse_sink_options(options)
    check_columns(schema, parsed)
    if parsed.formats is None:
        return parsed
    return replace(parsed, formats=formats.resolve_sink(parsed.formats))
