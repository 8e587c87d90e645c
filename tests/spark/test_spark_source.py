"""The source on a local[2] SparkSession against the real broker: batch and streaming."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from aiokproto.admin import Admin
from aiokproto.spark import compat
from aiokproto.structs import TopicPartition
from tests.spark.helpers import create_topic, produce, read, read_stream

N = 3000


def test_batch_read_equals_what_was_produced(spark: Any, bootstrap: str, topic_name: str) -> None:
    create_topic(bootstrap, topic_name, partitions=3)
    sent = [(f"k{i}".encode(), f"value-{i}".encode() * 3, i % 3) for i in range(N)]
    produce(bootstrap, topic_name, sent, headers=[("source", b"test"), ("n", b"1")])

    df = read(spark, bootstrap, subscribe=topic_name, includeHeaders="true", minPartitions="7")
    assert df.columns == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
        "headers",
    ]
    assert df.rdd.getNumPartitions() >= 7  # big partitions split into offset ranges
    rows = df.collect()
    assert len(rows) == N
    assert sorted((r.key, r.value, r.partition) for r in rows) == sorted(
        (k, v, p) for k, v, p in sent
    )
    per_partition: dict[int, list[int]] = {}
    for r in rows:
        per_partition.setdefault(r.partition, []).append(r.offset)
        assert r.topic == topic_name and r.timestampType == 0
        assert [(h.key, bytes(h.value)) for h in r.headers] == [("source", b"test"), ("n", b"1")]
    assert {p: sorted(o) for p, o in per_partition.items()} == {
        p: list(range(N // 3)) for p in range(3)
    }
    # aggregation through Spark works on the DataFrame like on Spark's own source
    counts = dict(df.groupBy("partition").count().collect())
    assert counts == {0: N // 3, 1: N // 3, 2: N // 3}


def test_batch_offsets_json_pattern_and_assign(spark: Any, bootstrap: str, topic_name: str) -> None:
    create_topic(bootstrap, topic_name, partitions=2)
    produce(bootstrap, topic_name, [(None, b"%d" % i, i % 2) for i in range(40)])

    ranged = read(
        spark,
        bootstrap,
        subscribePattern=f"{topic_name}.*",
        startingOffsets=json.dumps({topic_name: {"0": 5, "1": -2}}),
        endingOffsets=json.dumps({topic_name: {"0": 15, "1": -1}}),
    )
    got = sorted((r.partition, r.offset) for r in ranged.select("partition", "offset").collect())
    assert got == [(0, o) for o in range(5, 15)] + [(1, o) for o in range(20)]

    assigned = read(spark, bootstrap, assign=json.dumps({topic_name: [1]}))
    assert assigned.count() == 20
    assert {r.partition for r in assigned.select("partition").collect()} == {1}


def test_batch_starting_timestamp(spark: Any, bootstrap: str, topic_name: str) -> None:
    create_topic(bootstrap, topic_name)
    produce(bootstrap, topic_name, [(None, b"old", None)] * 5, timestamp_ms=1_600_000_000_000)
    produce(bootstrap, topic_name, [(None, b"new", None)] * 3, timestamp_ms=1_700_000_000_000)
    df = read(spark, bootstrap, subscribe=topic_name, startingTimestamp="1650000000000")
    assert [bytes(r.value) for r in df.select("value").collect()] == [b"new"] * 3
    with pytest.raises(Exception, match="startingOffsetsByTimestampStrategy"):
        read(spark, bootstrap, subscribe=topic_name, startingTimestamp="1800000000000").count()


def test_batch_fail_on_data_loss(spark: Any, bootstrap: str, topic_name: str) -> None:
    create_topic(bootstrap, topic_name)
    produce(bootstrap, topic_name, [(None, b"%d" % i, None) for i in range(10)])

    async def delete() -> None:
        async with Admin(bootstrap_servers=bootstrap) as admin:
            await admin.delete_records({TopicPartition(topic_name, 0): 6})

    asyncio.run(delete())
    start = json.dumps({topic_name: {"0": 0}})
    with pytest.raises(Exception, match="failOnDataLoss=false"):
        read(spark, bootstrap, subscribe=topic_name, startingOffsets=start).count()
    lenient = read(
        spark, bootstrap, subscribe=topic_name, startingOffsets=start, failOnDataLoss="false"
    )
    assert sorted(r.offset for r in lenient.select("offset").collect()) == [6, 7, 8, 9]


def test_bad_options_fail_before_reading(spark: Any, bootstrap: str) -> None:
    with pytest.raises(Exception, match="exactly one of the options subscribe"):
        read(spark, bootstrap).count()
    with pytest.raises(Exception, match=r"kafka\.fetch\.max\.bytez"):
        read(spark, bootstrap, subscribe="t", **{"kafka.fetch.max.bytez": "1"}).count()


def _stream_run(
    spark: Any, bootstrap: str, topic: str, checkpoint: str, available_now: bool
) -> list[list[tuple[int, int]]]:
    """One run of a query with maxOffsetsPerTrigger=30: the (partition, offset) of each
    non-empty micro-batch. ``available_now``: Trigger.AvailableNow, else the default
    trigger until all available data is processed."""
    batches: list[list[tuple[int, int]]] = []

    def each(batch_df: Any, _batch_id: int) -> None:
        rows = batch_df.select("partition", "offset").collect()
        batches.append(sorted((r.partition, r.offset) for r in rows))

    writer = (
        read_stream(
            spark, bootstrap, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="30"
        )
        .writeStream.foreachBatch(each)
        .option("checkpointLocation", checkpoint)
    )
    if available_now:
        query = writer.trigger(availableNow=True).start()
        assert query.awaitTermination(180), "the AvailableNow query did not finish"
    else:
        query = writer.start()
        try:
            query.processAllAvailable()
        finally:
            query.stop()
    assert query.exception() is None
    return [b for b in batches if b]


def test_stream_read_in_batches_and_restart(
    spark: Any, bootstrap: str, topic_name: str, tmp_path: Path
) -> None:
    create_topic(bootstrap, topic_name, partitions=2)
    produce(bootstrap, topic_name, [(None, b"%d" % i, i % 2) for i in range(100)])
    checkpoint = str(tmp_path / "checkpoint")

    first = _stream_run(spark, bootstrap, topic_name, checkpoint, available_now=False)
    assert [len(b) for b in first] == [30, 30, 30, 10]
    seen = [x for b in first for x in b]
    assert sorted(seen) == sorted((i % 2, i // 2) for i in range(100))

    # a restart resumes from the checkpoint: only the new records
    produce(bootstrap, topic_name, [(None, b"more", i % 2) for i in range(10)])
    second = _stream_run(spark, bootstrap, topic_name, checkpoint, available_now=False)
    assert sorted(x for b in second for x in b) == sorted(
        (p, o) for p in (0, 1) for o in (50, 51, 52, 53, 54)
    )


def test_stream_available_now(spark: Any, bootstrap: str, topic_name: str, tmp_path: Path) -> None:
    """pyspark 4.2+: every record there when the query started, 30 per batch. Before
    4.2 Spark runs a Python source's AvailableNow as one batch, which the reader caps at
    maxOffsetsPerTrigger (compat); each run goes on where the previous one stopped."""
    create_topic(bootstrap, topic_name, partitions=2)
    produce(bootstrap, topic_name, [(None, b"%d" % i, i % 2) for i in range(100)])
    checkpoint = str(tmp_path / "checkpoint")

    runs = [_stream_run(spark, bootstrap, topic_name, checkpoint, available_now=True)]
    if compat.ADMISSION_CONTROL:
        assert [len(b) for b in runs[0]] == [30, 30, 30, 10]
    else:
        while len(runs) < 4:
            runs.append(_stream_run(spark, bootstrap, topic_name, checkpoint, available_now=True))
        assert [[len(b) for b in run] for run in runs] == [[30], [30], [30], [10]]
    seen = [x for run in runs for b in run for x in b]
    assert sorted(seen) == sorted((i % 2, i // 2) for i in range(100))

    # a restart resumes from the checkpoint: only the new records
    produce(bootstrap, topic_name, [(None, b"more", i % 2) for i in range(10)])
    again = _stream_run(spark, bootstrap, topic_name, checkpoint, available_now=True)
    assert sorted(x for b in again for x in b) == sorted(
        (p, o) for p in (0, 1) for o in (50, 51, 52, 53, 54)
    )
