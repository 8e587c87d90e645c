"""The data source on a real Spark standalone cluster: a master and two workers started
from the installed pyspark, the job submitted with ``--master spark://...``.

Executors are separate JVMs whose Python workers run in the executors' own work dirs,
with the workers' environment (not the driver's): only what Spark ships (options,
offsets, pickled readers/writers) and the installed package reach them. Functions sent
to executors are defined inside the tests, so cloudpickle ships them by value (the
``tests`` package is not importable there, as on a real cluster).

Opt in: ``make test-spark-cluster`` (``pytest -m spark_cluster``) or
``AIOKPROTO_SPARK_CLUSTER=1``; ``make test`` skips these.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.spark.helpers import consume_all, create_topic, produce

pytestmark = pytest.mark.spark_cluster


def _opted_in(config: pytest.Config) -> bool:
    markexpr = str(getattr(config.option, "markexpr", "") or "")
    return "spark_cluster" in markexpr or os.environ.get("AIOKPROTO_SPARK_CLUSTER") == "1"


@pytest.fixture(scope="session")
def spark_cluster(
    pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    """A standalone master and two workers (1 core, 1g each) on 127.0.0.1."""
    if not _opted_in(pytestconfig):
        pytest.skip("the Spark cluster tests run with -m spark_cluster (make test-spark-cluster)")
    pytest.importorskip("pyspark", reason="the spark extra (pyspark) is not installed")
    if shutil.which("java") is None:
        pytest.skip("a Spark standalone cluster needs java on PATH")
    from aiokproto.testing.spark_cluster import SparkStandalone

    cluster = SparkStandalone(
        workers=2,
        worker_cores=1,
        worker_memory="1g",
        base_dir=tmp_path_factory.mktemp("spark-cluster"),
        python=sys.executable,
    )
    with cluster:
        yield cluster


@pytest.fixture(scope="session")
def spark_on_cluster(spark_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A SparkSession whose executors are the cluster's (one per worker)."""
    pytest.importorskip("pyarrow", reason="the spark extra (pyarrow) is not installed")
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from aiokproto.spark import register

    active = SparkContext._active_spark_context
    if active is not None and active.master != spark_cluster.master_url:
        pytest.skip(
            f"a {active.master} SparkContext is already running in this process; "
            "run the cluster tests on their own (make test-spark-cluster)"
        )
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master(spark_cluster.master_url)
        .appName("aiokproto-cluster-tests")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "768m")
        .config("spark.executor.memory", "512m")
        .config("spark.executor.cores", "1")
        .config("spark.cores.max", "2")
        .config("spark.executor.extraJavaOptions", "-XX:TieredStopAtLevel=1")
        # the installed package on every node; nothing else from the driver's setup
        .config("spark.pyspark.python", sys.executable)
        .config("spark.scheduler.minRegisteredResourcesRatio", "1.0")
        .config("spark.scheduler.maxRegisteredResourcesWaitingTime", "90s")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("warehouse")))
        .config("spark.sql.streaming.stopTimeout", "30s")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    try:
        _wait_for_executors(session, 2, timeout_s=120)
        yield session
    finally:
        session.stop()


def _wait_for_executors(session: Any, count: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        # the block managers known to the driver: the driver's own plus one per executor
        n = session.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
        if n >= count:
            return
        assert time.monotonic() < deadline, f"only {n} of {count} executors registered"
        time.sleep(0.25)


@pytest.fixture
def bootstrap(kafka: Any) -> str:
    return str(kafka.bootstrap_servers)


def _executor_udf() -> Any:
    """A UDF naming the executor that runs it: executors run in ``<work>/<app>/<id>``."""
    from pyspark.sql.functions import udf

    def executor_id() -> str:
        import os

        return os.path.basename(os.getcwd())

    return udf(executor_id, "string").asNondeterministic()


def test_cluster_batch_read_on_two_executors(
    spark_on_cluster: Any, bootstrap: str, topic_name: str
) -> None:
    spark = spark_on_cluster
    create_topic(bootstrap, topic_name, partitions=4)
    n = 4000
    sent = [(f"k{i}".encode(), f"value-{i}".encode(), i % 4) for i in range(n)]
    produce(bootstrap, topic_name, sent, headers=[("h", b"1")])

    df = (
        spark.read.format("aiokproto")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic_name)
        .option("includeHeaders", "true")
        .option("minPartitions", "8")
        .load()
        .withColumn("executor", _executor_udf()())
    )
    rows = df.collect()
    assert len(rows) == n
    assert sorted((r.key, r.value, r.partition) for r in rows) == sorted(sent)
    assert sorted((r.partition, r.offset) for r in rows) == sorted(
        (p, o) for p in range(4) for o in range(n // 4)
    )
    assert all([(h.key, bytes(h.value)) for h in r.headers] == [("h", b"1")] for r in rows)
    executors = {r.executor for r in rows}
    assert len(executors) == 2, f"tasks ran on executors {executors}"
    assert executors.isdisjoint({"driver", os.path.basename(os.getcwd())})


def test_cluster_stream_read_restarts_from_checkpoint(
    spark_on_cluster: Any, bootstrap: str, topic_name: str, tmp_path: Path
) -> None:
    spark = spark_on_cluster
    create_topic(bootstrap, topic_name, partitions=3)
    produce(bootstrap, topic_name, [(None, b"a%d" % i, i % 3) for i in range(300)])
    checkpoint = str(tmp_path / "checkpoint")
    output = tmp_path / "out"

    def run(batch_df: Any, batch_id: int) -> None:
        batch_df.selectExpr("partition", "offset", "CAST(value AS STRING) AS value").withColumn(
            "executor", _executor_udf()()
        ).write.mode("append").parquet(str(output / f"batch={batch_id}"))

    def start() -> None:
        query = (
            spark.readStream.format("aiokproto")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic_name)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "120")
            .load()
            .writeStream.foreachBatch(run)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(180), "the AvailableNow query did not finish"
        assert query.exception() is None

    start()
    first = spark.read.parquet(str(output)).collect()
    assert sorted((r.partition, r.offset) for r in first) == sorted(
        (p, o) for p in range(3) for o in range(100)
    )
    assert len({r.batch for r in first}) == 3  # 120 + 120 + 60

    # restart from the checkpoint: only what came after, nothing lost, nothing twice
    produce(bootstrap, topic_name, [(None, b"b%d" % i, i % 3) for i in range(90)])
    start()
    everything = spark.read.parquet(str(output)).collect()
    keys = [(r.partition, r.offset) for r in everything]
    assert len(keys) == len(set(keys)) == 390
    assert set(keys) == {(p, o) for p in range(3) for o in range(130)}
    later = sorted(r.value for r in everything if r.batch not in {b.batch for b in first})
    assert later == sorted(f"b{i}" for i in range(90))
    assert not {r.executor for r in everything} & {"driver"}


def test_cluster_batch_write(spark_on_cluster: Any, bootstrap: str, topic_name: str) -> None:
    spark = spark_on_cluster
    create_topic(bootstrap, topic_name, partitions=3)
    rows = [(f"k{i}", f"v{i}", i % 3, [("n", str(i).encode())]) for i in range(1000)]
    df = spark.createDataFrame(
        rows,
        "key string, value string, partition int, headers array<struct<key:string,value:binary>>",
    ).repartition(4)
    (
        df.write.format("aiokproto")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic_name)
        .option("kafka.linger.ms", "5")
        .option("kafka.acks", "all")
        .mode("append")
        .save()
    )
    got = consume_all(bootstrap, topic_name, len(rows))
    assert len(got) == len(rows)
    assert sorted((r.key, r.value, r.partition, r.headers) for r in got) == sorted(
        (k.encode(), v.encode(), p, (("n", h[0][1]),)) for k, v, p, h in rows
    )


def test_cluster_stream_write(
    spark_on_cluster: Any, bootstrap: str, topic_name: str, tmp_path: Path
) -> None:
    spark = spark_on_cluster
    source, target = f"{topic_name}-in", f"{topic_name}-out"
    create_topic(bootstrap, source, partitions=2)
    create_topic(bootstrap, target, partitions=2)
    produce(bootstrap, source, [(b"k%d" % i, b"event-%d" % i, i % 2) for i in range(400)])
    query = (
        spark.readStream.format("aiokproto")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "150")
        .load()
        .selectExpr("key", "upper(CAST(value AS STRING)) AS value", "partition")
        .writeStream.format("aiokproto")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", target)
        .option("transactional.id.prefix", f"{target}-tx")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180), "the AvailableNow query did not finish"
    assert query.exception() is None
    got = consume_all(bootstrap, target, 400, isolation_level="read_committed")
    assert sorted((r.key, r.value, r.partition) for r in got) == sorted(
        (b"k%d" % i, b"EVENT-%d" % i, i % 2) for i in range(400)
    )


def test_cluster_sasl_ssl_options_travel(
    spark_on_cluster: Any, kafka_secure: Any, topic_name: str
) -> None:
    """TLS and SASL settings reach the executors as options (PEM path, JAAS config):
    each executor builds its own SSL context and SCRAM login from them."""
    spark = spark_on_cluster
    plain = kafka_secure.bootstrap_servers
    create_topic(plain, topic_name, partitions=2)
    produce(plain, topic_name, [(None, b"s%d" % i, i % 2) for i in range(200)])
    user = kafka_secure.users[0]
    mechanism = next(m for m in kafka_secure.sasl_mechanisms if m.startswith("SCRAM"))
    secure = {
        "kafka.bootstrap.servers": kafka_secure.bootstrap("SASL_SSL"),
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": mechanism,
        "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
        f'required username="{user.username}" password="{user.password}";',
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": str(kafka_secure.ca_file),
    }
    df = spark.read.format("aiokproto").options(**secure).option("subscribe", topic_name).load()
    rows = df.withColumn("executor", _executor_udf()()).collect()
    assert sorted(bytes(r.value) for r in rows) == sorted(b"s%d" % i for i in range(200))

    target = f"{topic_name}-copy"
    create_topic(plain, target, partitions=2)
    df.select("key", "value").repartition(2).write.format("aiokproto").options(**secure).option(
        "topic", target
    ).mode("append").save()
    got = consume_all(plain, target, 200)
    assert sorted(r.value for r in got) == sorted(b"s%d" % i for i in range(200))


def test_cluster_executor_lost_mid_job_exactly_once_read_committed(
    spark_cluster: Any, spark_on_cluster: Any, bootstrap: str, topic_name: str
) -> None:
    """An executor JVM dies (SIGKILL) while its task reads and writes: Spark reruns the
    task elsewhere; the re-read range is the same, and the transactional write of the
    lost attempt is fenced and aborted, so read_committed sees every record once."""
    spark = spark_on_cluster
    source, target = f"{topic_name}-in", f"{topic_name}-out"
    create_topic(bootstrap, source, partitions=2)
    create_topic(bootstrap, target, partitions=2)
    produce(bootstrap, source, [(None, b"x%d" % i, i % 2) for i in range(600)])

    def kill_own_executor(value: bytes) -> bytes:
        # In the first attempt of the first task, after some rows went out: SIGKILL the
        # executor JVM (the Python worker's grandparent: executor -> daemon -> worker).
        import os
        import signal

        from pyspark import TaskContext

        tc = TaskContext.get()
        if (
            tc is not None
            and tc.partitionId() == 0
            and tc.attemptNumber() == 0
            and value == b"x100"
        ):
            with open(f"/proc/{os.getppid()}/stat") as f:
                grandparent = int(f.read().rsplit(")", 1)[1].split()[1])
            os.kill(grandparent, signal.SIGKILL)
        return value

    from pyspark.sql.functions import udf

    killer = udf(kill_own_executor, "binary").asNondeterministic()
    (
        spark.read.format("aiokproto")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .load()
        .select(killer("value").alias("value"), "partition")
        .write.format("aiokproto")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", target)
        .option("kafka.linger.ms", "0")
        .option("transactional.id.prefix", f"{target}-tx")
        .mode("append")
        .save()
    )
    got = consume_all(bootstrap, target, 600, isolation_level="read_committed")
    assert sorted(r.value for r in got) == sorted(b"x%d" % i for i in range(600))
    # an executor really died: its worker started a replacement (work/<app>/<new id>)
    executor_dirs = list(spark_cluster.base_dir.glob("worker-*/work/app-*/*"))
    assert len(executor_dirs) >= 3, executor_dirs
    # the worker starts a replacement executor; later jobs get two again
    _wait_for_executors(spark, 2, timeout_s=120)


# -- faults and odd logs: broker restart, compaction, transactions, deleted records ------

Row3 = tuple[int, int, bytes]  # (partition, offset, value)


def _rows(df: Any) -> list[Row3]:
    return [(r.partition, r.offset, bytes(r.value)) for r in df.collect()]


class _Batches:
    """A foreachBatch sink that keeps each micro-batch's rows on the driver (foreachBatch
    runs there), by batch id: a re-run batch replaces its rows instead of adding them."""

    def __init__(self) -> None:
        self.by_id: dict[int, list[Row3]] = {}

    def __call__(self, batch_df: Any, batch_id: int) -> None:
        self.by_id[batch_id] = _rows(batch_df.select("partition", "offset", "value"))

    @property
    def rows(self) -> list[Row3]:
        # a snapshot: the query's thread may add a batch meanwhile
        return [row for rows in list(self.by_id.values()) for row in rows]


def _start_stream(
    spark: Any,
    bootstrap: str,
    topic: str,
    sink: _Batches,
    checkpoint: Path,
    *,
    available_now: bool = True,
    **options: str,
) -> Any:
    reader = (
        spark.readStream.format("aiokproto")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    writer = (
        reader.load().writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint))
    )
    if available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime="500 milliseconds")
    return writer.start()


def _finish(query: Any, timeout_s: float = 120) -> None:
    """Wait for an AvailableNow query; raises what the query failed with, if anything."""
    if not query.awaitTermination(timeout_s):
        query.stop()
        pytest.fail(f"the AvailableNow query did not finish within {timeout_s} s")
    assert query.exception() is None


def _log(bootstrap: str, topic: str, isolation_level: str = "read_uncommitted") -> list[Row3]:
    """Every record of ``topic`` as an independent consumer reads it, up to the end offsets
    (the last stable offsets under read_committed) when called."""

    async def go() -> list[Row3]:
        from aiokproto.consumer import Consumer
        from aiokproto.structs import TopicPartition

        out: list[Row3] = []
        async with Consumer(
            bootstrap_servers=bootstrap,
            group_id=None,
            auto_offset_reset="earliest",
            isolation_level=isolation_level,
        ) as consumer:
            await consumer.topics()
            parts = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
            consumer.assign(parts)
            ends = await consumer.end_offsets(parts)
            async with asyncio.timeout(60):
                for tp in parts:
                    while await consumer.position(tp) < ends[tp]:
                        got = await consumer.getmany(tp, timeout_ms=500)
                        out.extend(
                            (r.partition, r.offset, r.value)
                            for r in got.get(tp, [])
                            if r.offset < ends[tp]
                        )
        return out

    return asyncio.run(go())


def _assert_exact(got: list[Row3], want: list[Row3]) -> None:
    """The same rows, each once: no record missing, none twice, none extra."""
    assert len(got) == len(set(got)), "duplicate rows"
    missing, extra = set(want) - set(got), set(got) - set(want)
    assert not missing and not extra, f"missing {sorted(missing)[:10]}, extra {sorted(extra)[:10]}"
    assert len(got) == len(want)


@pytest.fixture
def own_kafka(kafka_version: str) -> Iterator[Any]:
    """A single-node broker of this test only (PLAINTEXT), which the test may restart."""
    from aiokproto.testing import LocalKafka
    from aiokproto.testing.broker_config import PLAINTEXT_ONLY
    from aiokproto.testing.discovery import local_jars_possible

    if not local_jars_possible(kafka_version):
        pytest.skip("a broker of the test's own needs Java 17+ and the Kafka jars")
    broker = LocalKafka(version=kafka_version, security=PLAINTEXT_ONLY).start()
    try:
        yield broker
    finally:
        broker.stop()


def _wait_for(check: Any, timeout_s: float, what: str, query: Any = None) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if query is not None and query.exception() is not None:
            raise AssertionError(f"the query failed while waiting for {what}") from (
                query.exception()
            )
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.2)


def test_cluster_stream_survives_broker_restarts(
    spark_on_cluster: Any, own_kafka: Any, topic_name: str, tmp_path: Path
) -> None:
    """The only broker stops (controlled shutdown) and starts again on the same ports and
    data, twice, while a streaming query runs and a producer keeps writing: once when the
    query has caught up (the next trigger's planning finds no broker) and once while
    executors read a batch. The query neither fails nor skips or repeats a record."""
    import threading

    from confluent_kafka import Producer as RdProducer

    spark = spark_on_cluster
    bootstrap = own_kafka.bootstrap_servers
    create_topic(bootstrap, topic_name, partitions=3)
    half = 3000
    n = 2 * half
    errors: list[Any] = []

    def feed(first: int, last: int) -> None:
        # idempotent: the retries across an outage leave no duplicates in the log
        producer = RdProducer(
            {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
        )

        def delivered(err: Any, _msg: Any) -> None:
            if err is not None:
                errors.append(err)

        for i in range(first, last):
            while True:
                try:
                    producer.produce(
                        topic_name, value=b"r%d" % i, partition=i % 3, on_delivery=delivered
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
            if i % 100 == 99:
                producer.poll(0)
                time.sleep(0.05)  # a steady stream, about 2,000 records/s
        deadline = time.monotonic() + 120
        while producer.flush(1) and time.monotonic() < deadline:
            pass
        if len(producer):
            errors.append(f"{len(producer)} records undelivered after 120 s")

    def outage() -> None:
        own_kafka.stop_node(1)
        time.sleep(3)  # the outage itself: triggers and fetches find no broker
        own_kafka.restart_node(1, timeout=90)

    sink = _Batches()
    query = _start_stream(
        spark,
        bootstrap,
        topic_name,
        sink,
        tmp_path / "checkpoint",
        available_now=False,
        maxOffsetsPerTrigger="700",
    )
    feeders: list[threading.Thread] = []
    try:
        feeders.append(threading.Thread(target=feed, args=(0, half), daemon=True))
        feeders[-1].start()
        _wait_for(lambda: len(sink.rows) >= half, 120, f"the first {half} rows", query)
        # caught up: the query polls for new offsets while the broker is gone, and the
        # producer writes the second half from before the outage until after it
        feeders.append(threading.Thread(target=feed, args=(half, n), daemon=True))
        feeders[-1].start()
        outage()
        _wait_for(lambda: len(sink.rows) >= half + 700, 120, "rows after the restart", query)
        mid_read = len(sink.rows)
        outage()  # now while batches of the backlog are being read
        for feeder in feeders:
            feeder.join(150)
            assert not feeder.is_alive(), "the producer did not finish"
        assert not errors, errors[:5]
        _wait_for(lambda: len(sink.rows) >= n, 120, f"all {n} rows", query)
        assert query.isActive and query.exception() is None
    finally:
        query.stop()
    assert mid_read < n, "the query had read everything before the second outage"
    want = _log(bootstrap, topic_name)
    assert sorted(v for _, _, v in want) == sorted(b"r%d" % i for i in range(n))
    _assert_exact(sink.rows, want)


def _create_topic_with(
    bootstrap: str, topic: str, partitions: int, configs: dict[str, str]
) -> None:
    async def go() -> None:
        from aiokproto.admin import Admin, NewTopic

        async with Admin(bootstrap_servers=bootstrap) as admin:
            await admin.create_topics(
                [NewTopic(topic, partitions, replication_factor=1, topic_configs=configs)]
            )
            async with asyncio.timeout(15):
                while topic not in await admin.list_topics():  # noqa: ASYNC110 - polling
                    await asyncio.sleep(0.05)

    asyncio.run(go())


def test_cluster_reads_compacted_topic_with_gaps(
    spark_on_cluster: Any, bootstrap: str, topic_name: str, tmp_path: Path
) -> None:
    """After the log cleaner removed overwritten records, the offsets have gaps: a batch
    read (ranges split inside them) and a stream of small triggers (ends falling in
    them) return exactly the surviving records."""
    spark = spark_on_cluster
    keys, rounds = 20, 15
    _create_topic_with(
        bootstrap,
        topic_name,
        2,
        {
            "cleanup.policy": "compact",
            "segment.ms": "100",  # a segment per round: only closed segments are cleaned
            "min.cleanable.dirty.ratio": "0.01",
            "min.compaction.lag.ms": "0",
        },
    )
    for r in range(rounds):
        produce(
            bootstrap, topic_name, [(b"k%d" % k, b"v%d-%d" % (k, r), k % 2) for k in range(keys)]
        )
        time.sleep(0.15)  # older than segment.ms: the next record rolls a new segment
    # one more record per partition closes the last segment of overwrites
    produce(bootstrap, topic_name, [(b"end", b"end", 0), (b"end", b"end", 1)])
    total = keys * rounds + 2

    def compacted() -> list[Row3] | None:
        log = _log(bootstrap, topic_name)
        # done when each key is left once: nothing more for the cleaner to remove
        return log if len(log) == keys + 2 else None

    deadline = time.monotonic() + 90
    while not (found := compacted()):
        assert time.monotonic() < deadline, "the log cleaner did not compact within 90 s"
        time.sleep(0.5)
    survivors = found
    assert sorted(v for _, _, v in survivors) == sorted(
        [b"v%d-%d" % (k, rounds - 1) for k in range(keys)] + [b"end", b"end"]
    )
    # gaps: the offsets run on to where they were (the end records are the last)
    assert {o for p, o, v in survivors if v == b"end"} == {total // 2 - 1}

    batch = (
        spark.read.format("aiokproto")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic_name)
        .option("minPartitions", "9")
        .load()
    )
    _assert_exact(_rows(batch), survivors)

    sink = _Batches()
    limit = 40
    query = _start_stream(
        spark, bootstrap, topic_name, sink, tmp_path / "checkpoint", maxOffsetsPerTrigger=str(limit)
    )
    _finish(query)
    _assert_exact(sink.rows, survivors)
    ends = [
        (int(p), o)
        for progress in query.recentProgress
        for p, o in json.loads(progress.sources[0].endOffset)[topic_name].items()
    ]
    kept = {(p, o) for p, o, _ in survivors}
    assert len(sink.by_id) >= total // limit
    # some trigger ended inside a gap: its last offset was compacted away
    assert any((p, o - 1) not in kept for p, o in ends if o < total // 2)


def test_cluster_read_committed_skips_aborted_transactions(
    spark_on_cluster: Any, bootstrap: str, topic_name: str, tmp_path: Path
) -> None:
    """Committed and aborted transactions interleaved over 3 partitions, the last one
    aborted: read_committed returns exactly the committed records (batch, and a stream of
    small triggers), read_uncommitted every data record; transaction markers are never
    rows, and ranges split across aborted records and markers end where they should."""
    spark = spark_on_cluster
    create_topic(bootstrap, topic_name, partitions=3)
    outcomes = ["commit", "abort", "commit", "abort", "abort", "commit", "commit", "abort"]

    async def write() -> dict[str, list[Row3]]:
        from aiokproto import Producer

        written: dict[str, list[Row3]] = {"commit": [], "abort": []}
        async with Producer(
            bootstrap_servers=bootstrap, transactional_id=f"{topic_name}-txn", linger_ms=5
        ) as producer:
            for t, outcome in enumerate(outcomes):
                await producer.begin_transaction()
                futures = [
                    await producer.send(topic_name, b"t%d-%02d" % (t, i), partition=i % 3)
                    for i in range(30 + 7 * t)
                ]
                await producer.flush()  # in the log either way, aborted or not
                for f in futures:
                    md = await f
                    written[outcome].append((md.partition, md.offset, b""))
                if outcome == "commit":
                    await producer.commit_transaction()
                else:
                    await producer.abort_transaction()
        return written

    written = asyncio.run(write())
    log = {(p, o): v for p, o, v in _log(bootstrap, topic_name)}
    committed = [(p, o, log[p, o]) for p, o, _ in written["commit"]]
    aborted = [(p, o, log[p, o]) for p, o, _ in written["abort"]]
    assert all(v.startswith(b"t") for _, _, v in committed + aborted)

    def read(isolation: str) -> list[Row3]:
        df = (
            spark.read.format("aiokproto")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic_name)
            .option("kafka.isolation.level", isolation)
            .option("minPartitions", "12")
            .load()
        )
        return _rows(df)

    _assert_exact(read("read_committed"), committed)
    _assert_exact(read("read_uncommitted"), committed + aborted)
    # a stream of small triggers: many start and end inside aborted runs or at markers
    sink = _Batches()
    query = _start_stream(
        spark,
        bootstrap,
        topic_name,
        sink,
        tmp_path / "checkpoint",
        maxOffsetsPerTrigger="100",
        **{"kafka.isolation.level": "read_committed"},
    )
    _finish(query)
    _assert_exact(sink.rows, committed)
    assert len(sink.by_id) >= 5
    # an independent reader agrees (and the markers took offsets: there are gaps)
    _assert_exact(_log(bootstrap, topic_name, "read_committed"), committed)
    assert max(o for _, o, _ in committed + aborted) >= len(committed + aborted) // 3


def test_cluster_stream_records_deleted_past_checkpoint(
    spark_on_cluster: Any, bootstrap: str, topic_name: str, tmp_path: Path
) -> None:
    """A streaming query read offsets 0..99 of each partition; then records up to 150
    are deleted (past its checkpoint). With failOnDataLoss=true the next run fails naming
    failOnDataLoss; with false, from that checkpoint or a copy of the one before the
    failure, it reads exactly what is left, each record once."""
    spark = spark_on_cluster
    create_topic(bootstrap, topic_name, partitions=2)
    produce(bootstrap, topic_name, [(None, b"a%d" % i, i % 2) for i in range(200)])
    checkpoint = tmp_path / "checkpoint"
    first = _Batches()
    _finish(
        _start_stream(spark, bootstrap, topic_name, first, checkpoint, maxOffsetsPerTrigger="60")
    )
    _assert_exact(first.rows, _log(bootstrap, topic_name))
    assert len(first.rows) == 200

    produce(bootstrap, topic_name, [(None, b"b%d" % i, i % 2) for i in range(200)])
    before_delete = _log(bootstrap, topic_name)
    pristine = tmp_path / "checkpoint-copy"
    shutil.copytree(checkpoint, pristine)

    async def delete() -> None:
        from aiokproto.admin import Admin
        from aiokproto.structs import TopicPartition

        async with Admin(bootstrap_servers=bootstrap) as admin:
            await admin.delete_records({TopicPartition(topic_name, p): 150 for p in (0, 1)})

    asyncio.run(delete())
    left = [row for row in before_delete if row[1] >= 150]
    assert len(left) == 100

    strict = _Batches()
    query = _start_stream(
        spark, bootstrap, topic_name, strict, checkpoint, maxOffsetsPerTrigger="60"
    )
    with pytest.raises(Exception, match="failOnDataLoss=false"):
        _finish(query)
    assert strict.rows == []

    for where in (checkpoint, pristine):
        lenient = _Batches()
        _finish(
            _start_stream(
                spark,
                bootstrap,
                topic_name,
                lenient,
                where,
                maxOffsetsPerTrigger="60",
                failOnDataLoss="false",
            )
        )
        _assert_exact(lenient.rows, left)


# -- big input (opt in: make test-spark-big) ----------------------------------------------

BIG_ROWS_ENV = "AIOKPROTO_SPARK_BIG_ROWS"


@pytest.fixture(scope="session")
def big_rows() -> int:
    # a session fixture listed first: the skip comes before the cluster or a broker starts
    if not os.environ.get(BIG_ROWS_ENV):
        pytest.skip(f"the big-input test runs with {BIG_ROWS_ENV}=N (make test-spark-big)")
    return int(os.environ[BIG_ROWS_ENV])


def test_cluster_big_input_stream_in_bounded_triggers(
    big_rows: int, spark_on_cluster: Any, own_kafka: Any, topic_name: str, tmp_path: Path
) -> None:
    """N records of 100 B over 12 partitions read by a stream of maxOffsetsPerTrigger
    micro-batches: each batch at most the limit, every offset read exactly once, and
    the executors' Python workers stay under a memory bound however big N is.

    Opt in with ``make test-spark-big`` (``AIOKPROTO_SPARK_BIG_ROWS=N``, 20,000,000 there;
    ``AIOKPROTO_SPARK_BIG_LIMIT`` the trigger limit, ``AIOKPROTO_SPARK_BIG_RSS_MB`` the
    bound on one Python worker's peak RSS)."""
    from pyspark.sql import functions as F

    from benchmarks.spark_bench import VALUE_SIZE, fill_topic
    from benchmarks.spark_cluster_bench import MemorySampler

    spark = spark_on_cluster
    n = big_rows
    # an empty value (make passes every knob) means the default
    limit = int(os.environ.get("AIOKPROTO_SPARK_BIG_LIMIT") or max(1000, n // 10))
    rss_bound_mb = float(os.environ.get("AIOKPROTO_SPARK_BIG_RSS_MB") or 300)
    partitions = 12
    bootstrap = own_kafka.bootstrap_servers
    began = time.monotonic()
    asyncio.run(fill_topic(bootstrap, topic_name, n, partitions))
    filled_s = time.monotonic() - began

    # per micro-batch and partition: rows, distinct offsets, first and last offset, bytes
    per_batch: dict[int, list[tuple[int, int, int, int, int, int]]] = {}

    def count(batch_df: Any, batch_id: int) -> None:
        stats = (
            batch_df.groupBy("partition")
            .agg(
                F.count("*").alias("rows"),
                F.count_distinct("offset").alias("distinct"),
                F.min("offset").alias("first"),
                F.max("offset").alias("last"),
                F.sum(F.length("value")).alias("bytes"),
            )
            .collect()
        )
        per_batch[batch_id] = [
            (s.partition, s.rows, s.distinct, s.first, s.last, s.bytes) for s in stats
        ]

    query = (
        spark.readStream.format("aiokproto")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic_name)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(limit))
        .load()
        .writeStream.foreachBatch(count)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
    )
    began = time.monotonic()
    with MemorySampler(spark.sparkContext.applicationId) as memory:
        _finish(query.start(), timeout_s=max(300.0, n / 20_000))
    read_s = time.monotonic() - began

    batch_rows = [sum(s[1] for s in stats) for _, stats in sorted(per_batch.items())]
    peak_mb = memory.python_rss_kb / 1024
    print(
        f"\n{n:,} records: filled in {filled_s:.1f} s, read in {read_s:.1f} s "
        f"({n / read_s:,.0f} rows/s) in {len(batch_rows)} micro-batches of <= {limit:,}; "
        f"Python worker RSS peak {peak_mb:.0f} MB (per executor "
        f"{memory.python_sum_kb / 1024:.0f} MB), {memory.samples} samples"
    )
    assert sum(batch_rows) == n
    assert max(batch_rows) <= limit
    assert len(batch_rows) >= -(-n // limit)
    # within each batch each partition's offsets are one run read once; the runs of the
    # batches tile the partition from 0 to its end
    runs: dict[int, list[tuple[int, int]]] = {}
    for stats in per_batch.values():
        for partition, rows, distinct, first, last, size in stats:
            assert rows == distinct == last - first + 1, (partition, rows, distinct, first, last)
            assert size == rows * VALUE_SIZE
            runs.setdefault(partition, []).append((first, last))
    assert sorted(runs) == list(range(partitions))
    for partition, spans in runs.items():
        spans.sort()
        assert spans[0][0] == 0, partition
        assert all(a[1] + 1 == b[0] for a, b in itertools.pairwise(spans)), spans
    assert memory.samples > 0
    assert peak_mb < rss_bound_mb, f"a Python worker peaked at {peak_mb:.0f} MB"
