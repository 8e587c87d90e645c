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
