"""Which code paths the data source takes on the running pyspark, and the pyspark 4.0/4.1
stream reader's own bookkeeping (``make test-spark-matrix`` runs this on each version)."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from tests.spark.helpers import create_topic, produce

pyspark = pytest.importorskip("pyspark", reason="the spark extra (pyspark) is not installed")
pytest.importorskip("pyarrow", reason="the spark extra (pyarrow) is not installed")

from aiokproto.spark import compat  # noqa: E402
from aiokproto.spark.datasource import (  # noqa: E402
    KafkaDataSource,
    KafkaStreamReader,
    KafkaStreamWriter,
    LegacyKafkaStreamReader,
)
from aiokproto.spark.options import parse_source_options  # noqa: E402

VERSION = tuple(int(part) for part in pyspark.__version__.split(".")[:2])


def options(bootstrap: str, **kw: str) -> dict[str, str]:
    # Spark hands options over with lower-cased keys.
    return {k.lower(): v for k, v in {"kafka.bootstrap.servers": bootstrap, **kw}.items()}


def total(offsets: dict[str, dict[str, int]]) -> int:
    return sum(o for per_topic in offsets.values() for o in per_topic.values())


def test_features_follow_the_pyspark_version() -> None:
    assert VERSION >= (4, 0), "the data source supports pyspark 4.0 and later"
    assert compat.features() == {
        "pyspark": pyspark.__version__,
        "admission_control": VERSION >= (4, 2),
        "stream_arrow_writes": VERSION >= (4, 1),
    }


def test_the_chosen_classes() -> None:
    from pyspark.sql.datasource import DataSourceStreamWriter

    source = KafkaDataSource(options("127.0.0.1:9092", subscribe="t"))
    reader = source.streamReader(_schema())
    expected = KafkaStreamReader if VERSION >= (4, 2) else LegacyKafkaStreamReader
    assert type(reader) is expected
    # 4.2+ give latestOffset (start, limit) when its signature takes them; 4.0/4.1 never do
    assert bool(inspect.signature(reader.latestOffset).parameters) == (VERSION >= (4, 2))
    sink = KafkaDataSource(options("127.0.0.1:9092", topic="t"))
    writer = sink.streamWriter(_schema(), overwrite=False)
    assert isinstance(writer, KafkaStreamWriter)
    arrow_base = KafkaStreamWriter.__mro__[1]
    if VERSION >= (4, 1):
        from pyspark.sql.datasource import DataSourceStreamArrowWriter

        assert arrow_base is DataSourceStreamArrowWriter
    else:
        assert arrow_base is DataSourceStreamWriter


def test_legacy_stream_reader_tracks_batches_and_restarts(bootstrap: str, topic_name: str) -> None:
    """The calls Spark 4.0/4.1 make (run on every version: the class is plain Python)."""
    create_topic(bootstrap, topic_name, partitions=2)
    produce(bootstrap, topic_name, [(None, b"%d" % i, i % 2) for i in range(100)])
    opts = options(
        bootstrap, subscribe=topic_name, startingOffsets="earliest", maxOffsetsPerTrigger="30"
    )

    reader = LegacyKafkaStreamReader(parse_source_options(opts))
    first = reader.latestOffset()  # a fresh query: Spark asks before initialOffset()
    start = reader.initialOffset()
    assert total(start) == 0 and total(first) == 30
    assert reader.latestOffset() == first  # nothing planned yet: the same answer
    assert sum(p.range.size for p in reader.partitions(start, first)) == 30
    second = reader.latestOffset()
    assert total(second) == 60
    reader.partitions(first, second)

    # A restart: a new reader; Spark hands it the checkpoint's offsets as partitions(e, e).
    restarted = LegacyKafkaStreamReader(parse_source_options(opts))
    assert restarted.partitions(second, second) == []
    third = restarted.latestOffset()
    assert total(third) == 90
    restarted.partitions(second, third)
    assert total(restarted.latestOffset()) == 100
    restarted.partitions(third, restarted.latestOffset())
    assert total(restarted.latestOffset()) == 100  # caught up


def test_initial_offset_is_resolved_once(bootstrap: str, topic_name: str) -> None:
    """startingOffsets=latest: the first batch starts where latestOffset began counting."""
    create_topic(bootstrap, topic_name)
    produce(bootstrap, topic_name, [(None, b"old", None)] * 5)
    reader = LegacyKafkaStreamReader(
        parse_source_options(options(bootstrap, subscribe=topic_name, startingOffsets="latest"))
    )
    end = reader.latestOffset()
    produce(bootstrap, topic_name, [(None, b"new", None)] * 3)
    assert reader.initialOffset() == end == {topic_name: {"0": 5}}


def _schema() -> Any:
    from pyspark.sql.types import BinaryType, StringType, StructField, StructType

    return StructType(
        [
            StructField("key", BinaryType()),
            StructField("value", BinaryType()),
            StructField("topic", StringType()),
        ]
    )
