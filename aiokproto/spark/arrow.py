"""Rows of the source as Arrow record batches, typed exactly as Spark expects (and the
tuple form).

Spark checks a yielded batch's schema against the DataFrame schema converted to
Arrow (timestamps in microseconds, UTC; list items named "element"), so the schema
here is spelled out rather than inferred from the data.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Protocol

import pyarrow as pa  # type: ignore[import-untyped]

from aiokproto import accel
from aiokproto.consumer.record import ConsumerRecord


def _load_builder() -> Any:
    """The compiled ``arrow_columns`` (aiokproto/spark/_arrow.c, optional in setup.py),
    or None: not built, or pure Python chosen (``AIOKPROTO_PURE_PYTHON``, which turns
    the record codec and this builder off together)."""
    if os.environ.get(accel.ENV_VAR, "") not in ("", "0"):
        return None
    try:
        import aiokproto.spark._arrow as _arrow  # a module, not a name of the package
    except ImportError:
        return None
    return _arrow.arrow_columns


_arrow_columns: Any = _load_builder()

HEADER_TYPE = pa.list_(
    pa.field("element", pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
)

_BASE_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestampType", pa.int32()),
]
SCHEMA = pa.schema(_BASE_FIELDS)
_BINARY, _STRING, _INT32, _INT64 = pa.binary(), pa.string(), pa.int32(), pa.int64()
_TIMESTAMP = pa.timestamp("us", tz="UTC")
_HEADER_STRUCT = HEADER_TYPE.value_type
SCHEMA_WITH_HEADERS = pa.schema([*_BASE_FIELDS, pa.field("headers", HEADER_TYPE)])

# The same schema as Spark DDL, for DataSource.schema().
DDL = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
DDL_WITH_HEADERS = DDL + ", headers array<struct<key: string, value: binary>>"


class RecordLike(Protocol):
    """What the converter reads from a consumed record."""

    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> int: ...
    @property
    def timestamp_type(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def headers(self) -> Sequence[tuple[str, bytes | None]]: ...


def to_record_batch(
    topic: str, partition: int, records: Sequence[RecordLike], include_headers: bool
) -> pa.RecordBatch:
    """One partition's records as a batch (topic and partition are the same for all).

    A list of ``ConsumerRecord`` goes through the compiled builder when
    aiokproto.spark._arrow is loaded: it writes the Arrow buffers in one pass instead of
    a Python list per column. Anything else, or fields it does not take (it raises
    rather than guess), goes to ``to_record_batch_python``, so the result is always the
    reference's.
    """
    # not an empty list: the reference never looks at topic and partition then
    if _arrow_columns is not None and type(records) is list and records:
        try:
            cols = _arrow_columns(records, ConsumerRecord, include_headers)
        except (TypeError, ValueError, OverflowError):
            pass
        else:
            return _from_buffers(topic, partition, len(records), cols, include_headers)
    return to_record_batch_python(topic, partition, records, include_headers)


def _binary(type_: Any, n: int, col: tuple[bytes | None, bytes, bytes, int]) -> Any:
    validity, offsets, data, nulls = col
    bufs = [None if validity is None else pa.py_buffer(validity)]
    return pa.Array.from_buffers(
        type_, n, [*bufs, pa.py_buffer(offsets), pa.py_buffer(data)], null_count=nulls
    )


def _from_buffers(
    topic: str, partition: int, n: int, cols: tuple[Any, ...], include_headers: bool
) -> pa.RecordBatch:
    """The batch of ``_arrow.arrow_columns``' buffers (wrapped, not copied)."""
    key, value, offsets, timestamps, types = cols[:5]
    buf = pa.py_buffer
    columns: list[Any] = [
        _binary(_BINARY, n, key),
        _binary(_BINARY, n, value),
        pa.repeat(pa.scalar(topic, _STRING), n),
        pa.repeat(pa.scalar(partition, _INT32), n),
        pa.Array.from_buffers(_INT64, n, [None, buf(offsets)], null_count=0),
        pa.Array.from_buffers(_TIMESTAMP, n, [None, buf(timestamps)], null_count=0),
        pa.Array.from_buffers(_INT32, n, [None, buf(types)], null_count=0),
    ]
    if not include_headers:
        return pa.RecordBatch.from_arrays(columns, schema=SCHEMA)
    lists, hkeys, hvalues, count = cols[5]
    pairs = pa.Array.from_buffers(
        _HEADER_STRUCT,
        count,
        [None],
        null_count=0,
        children=[_binary(_STRING, count, hkeys), _binary(_BINARY, count, hvalues)],
    )
    columns.append(
        pa.Array.from_buffers(HEADER_TYPE, n, [None, buf(lists)], null_count=0, children=[pairs])
    )
    return pa.RecordBatch.from_arrays(columns, schema=SCHEMA_WITH_HEADERS)


def to_record_batch_python(
    topic: str, partition: int, records: Sequence[RecordLike], include_headers: bool
) -> pa.RecordBatch:
    """``to_record_batch`` in Python: the reference, and what runs without the compiled builder."""
    n = len(records)
    columns: list[Any] = [
        pa.array([r.key for r in records], pa.binary()),
        pa.array([r.value for r in records], pa.binary()),
        pa.array([topic] * n, pa.string()),
        pa.array([partition] * n, pa.int32()),
        pa.array([r.offset for r in records], pa.int64()),
        # Kafka timestamps are milliseconds; Spark's are microseconds.
        pa.array([r.timestamp * 1000 for r in records], pa.int64()).cast(
            pa.timestamp("us", tz="UTC")
        ),
        pa.array([r.timestamp_type for r in records], pa.int32()),
    ]
    if include_headers:
        columns.append(
            pa.array([[{"key": k, "value": v} for k, v in r.headers] for r in records], HEADER_TYPE)
        )
        return pa.RecordBatch.from_arrays(columns, schema=SCHEMA_WITH_HEADERS)
    return pa.RecordBatch.from_arrays(columns, schema=SCHEMA)


def to_rows(
    topic: str, partition: int, records: Sequence[RecordLike], include_headers: bool
) -> list[tuple[Any, ...]]:
    """The same records as tuples, for Spark versions that cannot take Arrow batches."""
    import datetime as dt

    utc = dt.UTC
    epoch = dt.datetime(1970, 1, 1, tzinfo=utc)
    out: list[tuple[Any, ...]] = []
    for r in records:
        row: tuple[Any, ...] = (
            r.key,
            r.value,
            topic,
            partition,
            r.offset,
            epoch + dt.timedelta(milliseconds=r.timestamp),
            r.timestamp_type,
        )
        if include_headers:
            row = (*row, [(k, v) for k, v in r.headers])
        out.append(row)
    return out
