"""Arrow conversion of consumed records and of sink input, without Spark or a broker."""

from __future__ import annotations

import datetime as dt
import inspect
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow", reason="the spark extra (pyarrow) is not installed")

from aiokproto.consumer.record import ConsumerRecord  # noqa: E402
from aiokproto.spark import arrow  # noqa: E402
from aiokproto.spark.sink import arrow_records  # noqa: E402

RECORDS = [
    ConsumerRecord("t", 3, 10, 1_700_000_000_123, 0, b"k", b"v", (("h", b"1"), ("n", None))),
    ConsumerRecord("t", 3, 12, 1_700_000_000_456, 1, None, None, ()),
]


def test_record_batch_schema_and_values() -> None:
    batch = arrow.to_record_batch("t", 3, RECORDS, include_headers=True)
    assert batch.schema.equals(arrow.SCHEMA_WITH_HEADERS)
    rows = batch.to_pylist()
    assert rows[0]["key"] == b"k" and rows[1]["value"] is None
    assert [r["offset"] for r in rows] == [10, 12]
    assert {r["topic"] for r in rows} == {"t"} and {r["partition"] for r in rows} == {3}
    assert rows[0]["timestamp"] == dt.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=dt.UTC)
    assert [r["timestampType"] for r in rows] == [0, 1]
    assert rows[0]["headers"] == [{"key": "h", "value": b"1"}, {"key": "n", "value": None}]
    assert rows[1]["headers"] == []
    plain = arrow.to_record_batch("t", 3, RECORDS, include_headers=False)
    assert plain.schema.equals(arrow.SCHEMA)


def test_rows_match_batches() -> None:
    rows = arrow.to_rows("t", 3, RECORDS, include_headers=True)
    batch = arrow.to_record_batch("t", 3, RECORDS, include_headers=True)
    assert [tuple(r.values()) for r in batch.to_pylist()] == [
        (*row[:-1], [{"key": k, "value": v} for k, v in row[-1]]) for row in rows
    ]


def test_schema_matches_spark(spark: object) -> None:
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import _parse_datatype_string

    # pyspark 4.0/4.1 take timestamp_utc (UTC by default), later ones a timezone
    params = inspect.signature(to_arrow_schema).parameters
    utc: dict[str, Any] = {"timezone": "UTC"} if "timezone" in params else {}
    for ddl, schema in (
        (arrow.DDL, arrow.SCHEMA),
        (arrow.DDL_WITH_HEADERS, arrow.SCHEMA_WITH_HEADERS),
    ):
        assert to_arrow_schema(_parse_datatype_string(ddl), **utc).equals(schema)


def test_sink_reads_arrow_columns() -> None:
    headers_type = pa.list_(
        pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
    )
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array(["a", None], pa.string()),
            pa.array([b"1", b"2"], pa.binary()),
            pa.array(["x", "y"], pa.string()),
            pa.array([0, None], pa.int32()),
            pa.array([[{"key": "h", "value": b"v"}], None], headers_type),
            pa.array([1, 2], pa.int64()),
        ],
        names=["Key", "value", "topic", "partition", "headers", "ignored"],
    )
    assert list(arrow_records(batch)) == [
        ("x", 0, b"a", b"1", [("h", b"v")]),
        ("y", None, None, b"2", None),
    ]
    only_value = pa.RecordBatch.from_arrays([pa.array(["é"], pa.string())], names=["value"])
    assert list(arrow_records(only_value)) == [(None, None, None, "é".encode(), None)]


def test_sink_reads_rows_for_older_spark() -> None:
    pytest.importorskip("pyspark", reason="the spark extra (pyspark) is not installed")
    from pyspark.sql import Row

    from aiokproto.spark.sink import row_records

    rows = [
        Row(
            KEY="k",
            value=bytearray(b"v"),
            topic=None,
            partition=2,
            headers=[Row(key="h", value=b"x")],
        ),
        Row(key=None, value="é", topic="t", partition=None, headers=None),
    ]
    assert list(row_records(rows)) == [
        (None, 2, b"k", b"v", [("h", b"x")]),
        ("t", None, None, "é".encode(), None),
    ]
