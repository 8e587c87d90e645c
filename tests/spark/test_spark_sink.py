"""The sink on a local[2] SparkSession: batch and streaming writes, read back by the Consumer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.spark.helpers import consume_all, create_topic, produce, write


def test_batch_write_read_back(spark: Any, bootstrap: str, topic_name: str) -> None:
    create_topic(bootstrap, topic_name, partitions=3)
    rows = [(f"k{i}", f"v{i}", i % 3, [("n", str(i).encode())]) for i in range(500)]
    df = spark.createDataFrame(
        rows,
        "key string, value string, partition int, headers array<struct<key:string,value:binary>>",
    ).repartition(2)
    write(df, bootstrap, topic=topic_name, **{"kafka.linger.ms": "10"})
    got = consume_all(bootstrap, topic_name, len(rows))
    assert len(got) == len(rows)
    assert sorted((r.key, r.value, r.partition, r.headers) for r in got) == sorted(
        (k.encode(), v.encode(), p, (("n", h[0][1]),)) for k, v, p, h in rows
    )


def test_batch_write_topic_column_binary_values(
    spark: Any, bootstrap: str, topic_name: str
) -> None:
    create_topic(bootstrap, topic_name)
    df = spark.createDataFrame(
        [(topic_name, bytearray(b"\x00\xff"), None), (topic_name, bytearray(b"x"), "key")],
        "topic string, value binary, key string",
    )
    write(df, bootstrap)
    got = consume_all(bootstrap, topic_name, 2)
    assert sorted((r.key or b"", r.value) for r in got) == [(b"", b"\x00\xff"), (b"key", b"x")]


def test_sink_errors_fail_the_write(spark: Any, bootstrap: str, topic_name: str) -> None:
    create_topic(bootstrap, topic_name)
    no_value = spark.createDataFrame([("k",)], "key string")
    with pytest.raises(Exception, match="needs a value column"):
        write(no_value, bootstrap, topic=topic_name)
    no_topic = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(Exception, match="topic option or a topic column"):
        write(no_topic, bootstrap)
    # a delivery error is not swallowed: the Spark task (and so the job) fails
    too_big = spark.createDataFrame([("x" * 5000,)], "value string")
    with pytest.raises(Exception, match="RecordTooLarge"):
        write(too_big, bootstrap, topic=topic_name, **{"kafka.max.request.size": "1000"})


def test_transactional_writes_commit_per_task_and_a_failed_task_shows_nothing(
    spark: Any, bootstrap: str, topic_name: str
) -> None:
    create_topic(bootstrap, topic_name, partitions=3)
    rows = [(f"v{i}", i % 3) for i in range(300)]
    df = spark.createDataFrame(rows, "value string, partition int").repartition(3)
    write(df, bootstrap, topic=topic_name, **{"transactional.id.prefix": f"{topic_name}-tx"})
    got = consume_all(bootstrap, topic_name, 300, isolation_level="read_committed")
    assert sorted(r.value for r in got) == sorted(v.encode() for v, _ in rows)
    # one task: 200 good rows, then one without a topic: the task (and job) fails, and
    # its transaction is aborted, so read_committed readers see none of the 200
    failing = [(topic_name, f"bad-{i}") for i in range(200)] + [(None, "no topic")]
    bad = spark.createDataFrame(failing, "topic string, value string").coalesce(1)
    with pytest.raises(Exception, match="has no topic"):
        write(
            bad,
            bootstrap,
            **{"kafka.linger.ms": "0", "transactional.id.prefix": f"{topic_name}-bad"},
        )
    again = consume_all(bootstrap, topic_name, 300, isolation_level="read_committed")
    assert not [r for r in again if r.value.startswith(b"bad-")]
    assert len(again) == 300


def test_transactional_id_must_be_a_prefix(spark: Any, bootstrap: str, topic_name: str) -> None:
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(Exception, match=r"transactional\.id\.prefix"):
        write(df, bootstrap, topic=topic_name, **{"kafka.transactional.id": "one-for-all"})


def test_stream_write_read_back(
    spark: Any, bootstrap: str, topic_name: str, tmp_path: Path
) -> None:
    source, target = f"{topic_name}-in", f"{topic_name}-out"
    create_topic(bootstrap, source, partitions=2)
    create_topic(bootstrap, target, partitions=2)
    produce(bootstrap, source, [(b"k%d" % i, b"event-%d" % i, i % 2) for i in range(200)])
    query = (
        spark.readStream.format("aiokproto")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "80")
        .load()
        .selectExpr("key", "upper(CAST(value AS STRING)) AS value")
        .writeStream.format("aiokproto")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", target)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:  # the default trigger: before pyspark 4.2, AvailableNow is one capped batch
        query.processAllAvailable()
    finally:
        query.stop()
    assert query.exception() is None
    got = consume_all(bootstrap, target, 200)
    assert sorted((r.key, r.value) for r in got) == sorted(
        (b"k%d" % i, b"EVENT-%d" % i) for i in range(200)
    )
