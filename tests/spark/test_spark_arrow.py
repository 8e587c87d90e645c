"""Arrow conversion of consumed records and of sink input, without Spark or a broker."""

from __future__ import annotations

import datetime as dt
import gc
import importlib
import inspect
from typing import Any, NamedTuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow", reason="the spark extra (pyarrow) is not installed")

from aiokproto import accel  # noqa: E402
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


# -- the compiled builder (aiokproto.spark._arrow.arrow_columns) against the Python one --

# the module arrow.py loaded its builder from (None: not built, or pure Python chosen)
native: Any = None if arrow._arrow_columns is None else importlib.import_module(
    "aiokproto.spark._arrow"
)
needs_native = pytest.mark.skipif(
    arrow._arrow_columns is None, reason="aiokproto.spark._arrow is not built"
)


def test_the_builder_is_compiled_with_the_codec_and_outside_it() -> None:
    # the spark extra's C, not the core codec's: _accel has no Arrow code, and a
    # compiled build has both (a build that lost _arrow.c would silently run Python)
    if accel.native is None:
        assert native is None
        return
    assert not hasattr(accel.native, "arrow_columns")
    assert native is not None and native.arrow_columns is arrow._arrow_columns
_I64 = 2**63

blobs = st.one_of(
    st.none(), st.just(b""), st.binary(max_size=40), st.binary(min_size=3000, max_size=5000)
)
header_lists = st.lists(
    st.tuples(st.text(max_size=6), st.one_of(st.none(), st.binary(max_size=12))), max_size=3
).map(tuple)
consumer_records = st.builds(
    ConsumerRecord,
    topic=st.just("t"),
    partition=st.just(3),
    offset=st.integers(0, _I64 - 1),
    # every timestamp whose microseconds fit int64, the edges often
    timestamp=st.one_of(
        st.integers(-1, 2**42),
        st.integers(-(_I64 // 1000), (_I64 - 1) // 1000),
        st.sampled_from([-(_I64 // 1000), (_I64 - 1) // 1000]),
    ),
    timestamp_type=st.sampled_from([-1, 0, 1]),
    key=blobs,
    value=blobs,
    headers=header_lists,
)


def _compiled(recs: list[Any], include_headers: bool) -> Any:
    """The compiled build, not through to_record_batch (which would fall back)."""
    cols = native.arrow_columns(recs, ConsumerRecord, include_headers)
    return arrow._from_buffers("t", 3, len(recs), cols, include_headers)


def _outcome(build: Any, recs: Any, include_headers: bool) -> Any:
    try:
        return build("t", 3, recs, include_headers)
    except Exception as exc:  # the type is what is compared
        return type(exc)


@needs_native
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recs=st.lists(consumer_records, max_size=40), include_headers=st.booleans())
def test_compiled_batches_equal_the_python_ones(recs: list[Any], include_headers: bool) -> None:
    want = arrow.to_record_batch_python("t", 3, recs, include_headers)
    got = _compiled(recs, include_headers)
    got.validate(full=True)
    assert got.schema.equals(want.schema)
    assert got.equals(want)
    assert arrow.to_record_batch("t", 3, recs, include_headers).equals(want)


@needs_native
@pytest.mark.parametrize("include_headers", [False, True])
@pytest.mark.parametrize("n", [0, 1])
def test_no_record_and_one_record(n: int, include_headers: bool) -> None:
    recs = RECORDS[:n]
    got = _compiled(recs, include_headers)
    got.validate(full=True)
    assert got.num_rows == n
    assert got.equals(arrow.to_record_batch_python("t", 3, recs, include_headers))


def test_consumer_record_fields_are_where_the_compiled_builder_reads_them() -> None:
    # spark/_arrow.c's F_OFFSET .. F_HEADERS
    assert ConsumerRecord._fields[2:8] == (
        "offset",
        "timestamp",
        "timestamp_type",
        "key",
        "value",
        "headers",
    )


def _rec(**fields: Any) -> ConsumerRecord:
    return RECORDS[0]._replace(**fields)


class _OwnMul(int):
    def __mul__(self, other: object) -> int:
        return 7


class _OwnIter(tuple):  # type: ignore[type-arg]
    def __iter__(self) -> Any:
        return iter((("other", b"2"),) if len(self) != 2 else ("other", b"2"))


# Each is refused by the compiled builder (TypeError), the header ones only when headers
# are asked for; to_record_batch then gives what the Python builder gives, a batch or
# the same error.
_R = RECORDS[0]
REFUSED = [
    pytest.param([_R, 5], False, id="not a tuple"),
    pytest.param([(*_R,)], False, id="a plain tuple"),
    pytest.param([tuple.__new__(ConsumerRecord, _R[:5])], False, id="short record"),
    pytest.param([_R._replace(key=7)], False, id="int key"),
    pytest.param([_R._replace(value="text")], False, id="str value"),
    pytest.param([_R._replace(value=bytearray(b"v"))], False, id="bytearray value"),
    pytest.param([_R._replace(offset="10")], False, id="str offset"),
    pytest.param([_R._replace(offset=None)], False, id="None offset"),
    pytest.param([_R._replace(timestamp=None)], False, id="None timestamp"),
    pytest.param([_R._replace(timestamp=1.5)], False, id="float timestamp"),
    pytest.param([_R._replace(timestamp_type=True)], False, id="bool type"),
    pytest.param([_R._replace(headers=[("h", b"1")])], True, id="headers list"),
    pytest.param([_R._replace(headers=(("h",),))], True, id="header not a pair"),
    pytest.param([_R._replace(headers=((None, b"1"),))], True, id="header key None"),
    pytest.param([_R._replace(headers=(("h", 1),))], True, id="header value int"),
    pytest.param([_R._replace(headers=(("\ud800", b"1"),))], True, id="header key surrogate"),
    # subclasses the reference would ask for their own answers (review: the compiled
    # batch held timestamp * 1000 and the tuples' items instead)
    pytest.param([_R._replace(timestamp=_OwnMul(5))], False, id="int subclass timestamp"),
    pytest.param([_R._replace(offset=_OwnMul(5))], False, id="int subclass offset"),
    pytest.param([_R._replace(headers=_OwnIter((("h", b"1"),)))], True, id="headers subclass"),
    pytest.param([_R._replace(headers=(_OwnIter(("h", b"1")),))], True, id="header subclass"),
]


@needs_native
@pytest.mark.parametrize("recs, only_headers", REFUSED)
def test_bad_records_are_refused_and_the_python_builder_decides(
    recs: list[Any], only_headers: bool
) -> None:
    for include_headers in (False, True):
        if include_headers or not only_headers:
            with pytest.raises((TypeError, UnicodeEncodeError)):  # the latter: surrogate
                native.arrow_columns(recs, ConsumerRecord, include_headers)
        got = _outcome(arrow.to_record_batch, recs, include_headers)
        want = _outcome(arrow.to_record_batch_python, recs, include_headers)
        assert got == want if isinstance(want, type) else got.equals(want)


@needs_native
@pytest.mark.parametrize("topic, partition", [("t", 2**40), ("\ud800", 3), (5, 3)])
def test_no_record_gives_the_python_outcome_whatever_topic_and_partition(
    topic: Any, partition: Any
) -> None:
    """The reference builds no topic or partition value for no record (review: the
    compiled path's pa.scalar raised for these)."""
    for include_headers in (False, True):
        want = arrow.to_record_batch_python(topic, partition, [], include_headers)
        assert arrow.to_record_batch(topic, partition, [], include_headers).equals(want)


@pytest.mark.parametrize(
    "recs",
    [
        pytest.param([RECORDS[0]._replace(key=7)], id="int key"),
        pytest.param([RECORDS[0]._replace(timestamp=None)], id="None timestamp"),
        pytest.param([RECORDS[0]._replace(headers=(("h", 1),))], id="header value int"),
    ],
)
def test_bad_field_types_raise_type_error_in_either_build(recs: list[Any]) -> None:
    with pytest.raises(TypeError):
        arrow.to_record_batch("t", 3, recs, include_headers=True)
    with pytest.raises(TypeError):
        arrow.to_record_batch_python("t", 3, recs, include_headers=True)


@needs_native
@pytest.mark.parametrize(
    "field, value",
    [
        ("timestamp", _I64 // 1000 + 1),  # microseconds beyond int64
        ("timestamp", -(_I64 // 1000) - 1),
        ("timestamp", _I64),  # not even milliseconds fit
        ("offset", _I64),
        ("timestamp_type", 2**31),
    ],
)
def test_numbers_out_of_range_fail_in_both(field: str, value: int) -> None:
    recs = [_rec(**{field: value})]
    with pytest.raises(OverflowError):
        native.arrow_columns(recs, ConsumerRecord, False)
    want = _outcome(arrow.to_record_batch_python, recs, False)
    assert isinstance(want, type) and issubclass(want, Exception)
    assert _outcome(arrow.to_record_batch, recs, False) is want


@needs_native
def test_a_column_over_2_gib_is_refused_before_copying() -> None:
    """Binary offsets are int32; the sizes are summed before any data buffer exists."""
    big = b"x" * (64 << 20)
    recs = [_rec(value=big)] * 32  # 2 GiB of values
    with pytest.raises(OverflowError, match="2 GiB"):
        native.arrow_columns(recs, ConsumerRecord, False)


@needs_native
def test_other_record_classes_go_to_the_python_builder() -> None:
    class Other(NamedTuple):  # the RecordLike attributes, in another order
        key: bytes | None
        value: bytes | None
        offset: int
        timestamp: int
        timestamp_type: int
        headers: tuple[tuple[str, bytes | None], ...]
        topic: str = "t"
        partition: int = 3

    recs = [
        Other(r.key, r.value, r.offset, r.timestamp, r.timestamp_type, r.headers) for r in RECORDS
    ]
    with pytest.raises(TypeError):
        native.arrow_columns(recs, ConsumerRecord, True)
    want = arrow.to_record_batch_python("t", 3, RECORDS, True)
    assert arrow.to_record_batch("t", 3, recs, True).equals(want)
    # a tuple of ConsumerRecord, not a list: the Python builder too, the same batch
    assert arrow.to_record_batch("t", 3, tuple(RECORDS), True).equals(want)


@needs_native
@pytest.mark.parametrize(
    "args",
    [
        ((), ConsumerRecord),  # too few
        (iter(RECORDS), ConsumerRecord, False),  # not a list
        (RECORDS, dict, False),  # not a tuple class
        (RECORDS, ConsumerRecord(*RECORDS[0]), False),  # not a class
    ],
)
def test_arrow_columns_checks_its_arguments(args: tuple[Any, ...]) -> None:
    with pytest.raises(TypeError):
        native.arrow_columns(*args)


@needs_native
def test_buffers_outlive_the_records() -> None:
    recs = [_rec(key=b"k%d" % i, value=bytes(range(i % 256)) * 3, offset=i) for i in range(500)]
    batch = _compiled(recs, True)
    want = arrow.to_record_batch_python("t", 3, recs, True)
    del recs
    gc.collect()
    assert batch.equals(want)
    assert batch.column("value")[499].as_py() == bytes(range(499 % 256)) * 3
