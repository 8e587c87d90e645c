"""Rows of the source as Arrow record batches, typed exactly as Spark expects.

Spark checks a yielded batch's schema against the DataFrame schema converted to
Arrow (timestamps in microseconds, UTC; list items named "element"), so the schema
here is spelled out rather than inferred from the data.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import pyarrow as pa  # type: ignore[import-untyped]

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
    """One partition's records as a batch (topic and partition are the same for all)."""
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
