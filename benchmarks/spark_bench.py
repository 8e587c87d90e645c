"""Spark read throughput: the aiokproto data source against Spark's own Kafka connector.

Writes N records of 100 B into a fresh topic, then counts them through a DataFrame
with ``format("aiokproto")`` and with ``format("kafka")`` (Spark's
``spark-sql-kafka-0-10_2.13``, resolved from Maven Central with Maven into
``<cache dir>/spark-kafka-<version>/`` and passed with ``spark.jars``), in one
SparkSession, interleaved, after a warm-up read of each. Every count is checked.
Reports rows/s (best of ``--runs``). Also measures, without Spark's JVM, the Python
cost our reader saves by yielding Arrow batches instead of tuples.

    .venv/bin/python -m benchmarks.spark_bench [--records N] [--partitions P] [--runs R]

``run(bootstrap, records)`` is the entry point for ``python -m benchmarks``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from aiokproto.admin import Admin, NewTopic
from aiokproto.testing.errors import KafkaHarnessError
from aiokproto.testing.jars import resolve_pom

POM = Path(__file__).parent / "poms" / "spark" / "pom.xml"
CENTRAL = "https://repo.maven.apache.org/maven2"
CONNECTOR = "spark-sql-kafka-0-10_2.13"
TOKEN_PROVIDER = "spark-token-provider-kafka-0-10_2.13"
# Spark's parent POM names a Google mirror of Central as a repository; where that host
# is unreachable Maven gives up, so point it back at Central.
SETTINGS = f"""<settings><mirrors><mirror>
  <id>central-for-spark-gcs</id><mirrorOf>gcs-maven-central-mirror</mirrorOf>
  <url>{CENTRAL}</url>
</mirror></mirrors></settings>
"""
VALUE_SIZE = 100


class SparkBenchError(Exception):
    """The benchmark could not run (connector not resolvable, wrong counts...)."""


# -- Spark's connector from Maven Central ------------------------------------------------


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v))


def _released(artifact: str) -> list[str]:
    url = f"{CENTRAL}/org/apache/spark/{artifact}/maven-metadata.xml"
    with urllib.request.urlopen(url, timeout=30) as resp:
        text = resp.read().decode()
    return re.findall(r"<version>([^<]+)</version>", text)


def _newest_not_above(versions: list[str], ceiling: str) -> str | None:
    fitting = [v for v in versions if _version_key(v) <= _version_key(ceiling)]
    final = [v for v in fitting if "preview" not in v]
    pool = final or fitting
    return max(pool, key=_version_key) if pool else None


def _resolve(connector: str, token: str, cache_dir: Path | None) -> Path:
    return resolve_pom(
        f"spark-kafka-{connector}",
        POM.read_text(encoding="utf-8"),
        cache_dir,
        expect=CONNECTOR,
        what=f"{CONNECTOR} {connector}",
        maven_args=(
            "-DincludeScope=runtime",
            f"-Dspark.version={connector}",
            f"-Dtoken.provider.version={token}",
        ),
        settings=SETTINGS,
    )


def resolve_connector(spark_version: str, cache_dir: Path | None = None) -> tuple[list[Path], str]:
    """Jars of Spark's Kafka connector for ``spark_version`` (those pyspark lacks).

    Uses the connector of exactly that version when Maven Central has it; otherwise
    the newest release not above it (and says so in the returned version text).
    """
    try:
        libs = _resolve(spark_version, spark_version, cache_dir)
        used = spark_version
    except KafkaHarnessError as exact_failed:
        connector = _newest_not_above(_released(CONNECTOR), spark_version)
        token = _newest_not_above(_released(TOKEN_PROVIDER), connector or spark_version)
        if connector is None or token is None:
            raise SparkBenchError(
                f"no {CONNECTOR} at or below {spark_version} on Central"
            ) from exact_failed
        try:
            libs = _resolve(connector, token, cache_dir)
        except KafkaHarnessError as exc:
            raise SparkBenchError(f"Spark's Kafka connector: {exc}") from exc
        used = f"{connector} (token provider {token}; {spark_version} is not on Central)"
    import pyspark

    shipped = {_artifact(p.name) for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    return sorted(p for p in libs.glob("*.jar") if _artifact(p.name) not in shipped), used


def _artifact(jar_name: str) -> str:
    """``kafka-clients-3.9.2.jar`` -> ``kafka-clients``."""
    return re.sub(r"-\d[\w.\-]*\.jar$", "", jar_name)


# -- input -------------------------------------------------------------------------------


async def fill_topic(bootstrap: str, topic: str, records: int, partitions: int) -> None:
    """Create ``topic`` and fill it with ``records`` values of ``VALUE_SIZE`` bytes,
    10,000 a ``send_batch`` call, round-robin over the partitions."""
    from aiokproto.producer import Producer

    async with Admin(bootstrap_servers=bootstrap) as admin:
        await admin.create_topics(
            [NewTopic(topic, num_partitions=partitions, replication_factor=1)]
        )
        async with asyncio.timeout(30):
            while topic not in await admin.list_topics():  # noqa: ASYNC110 - polling
                await asyncio.sleep(0.05)
    chunk = 10_000
    value = (b"0123456789" * (VALUE_SIZE // 10 + 1))[:VALUE_SIZE]
    async with Producer(bootstrap_servers=bootstrap, linger_ms=20, batch_size=512 * 1024) as p:
        deliveries = []
        for start in range(0, records, chunk):
            n = min(chunk, records - start)
            deliveries.append(
                await p.send_batch(topic, [value] * n, partition=(start // chunk) % partitions)
            )
        await p.flush()
        for d in deliveries:
            await d


# -- Spark -------------------------------------------------------------------------------


def session(jars: list[Path], master: str = "local[2]", conf: dict[str, str] | None = None) -> Any:
    """A SparkSession with Spark's Kafka connector (``jars``) and aiokproto registered."""
    from pyspark.sql import SparkSession

    from aiokproto.spark import register

    os.environ["PYSPARK_PYTHON"] = sys.executable
    builder = (
        SparkSession.builder.master(master)
        .appName("aiokproto-spark-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.jars", ",".join(str(j) for j in jars))
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def _count(spark: Any, fmt: str, bootstrap: str, topic: str) -> tuple[int, float]:
    df = (
        spark.read.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
    )
    started = time.perf_counter()
    n = df.count()
    return n, time.perf_counter() - started


def conversion_rates(n: int = 200_000) -> dict[str, float]:
    """Records/s of turning consumed records into what Spark receives, in Python.

    ``arrow``: our ``to_record_batch``; ``tuples``: tuples converted by pyspark's own
    ``records_to_arrow_batches`` (what happens when ``read`` yields tuples).
    """
    from pyspark.sql.types import (
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )
    from pyspark.sql.worker.plan_data_source_read import records_to_arrow_batches

    from aiokproto.consumer.record import ConsumerRecord
    from aiokproto.spark import arrow
    from aiokproto.spark.datasource import KafkaDataSource

    value = b"x" * VALUE_SIZE
    recs = [ConsumerRecord("t", 0, i, 1_700_000_000_000, 0, None, value, ()) for i in range(n)]
    schema = StructType(
        [
            StructField("key", BinaryType()),
            StructField("value", BinaryType()),
            StructField("topic", StringType()),
            StructField("partition", IntegerType()),
            StructField("offset", LongType()),
            StructField("timestamp", TimestampType()),
            StructField("timestampType", IntegerType()),
        ]
    )
    step = 10_000
    started = time.process_time()
    for i in range(0, n, step):
        arrow.to_record_batch("t", 0, recs[i : i + step], False)
    arrow_s = time.process_time() - started
    source = KafkaDataSource({})
    started = time.process_time()
    rows = (
        row for i in range(0, n, step) for row in arrow.to_rows("t", 0, recs[i : i + step], False)
    )
    for _ in records_to_arrow_batches(rows, step, schema, source):
        pass
    tuples_s = time.process_time() - started
    return {"arrow_records_per_s": n / arrow_s, "tuples_records_per_s": n / tuples_s}


def run(bootstrap: str, records: int, *, partitions: int = 4, runs: int = 2) -> dict[str, Any]:
    """Produce ``records`` records, count them through both sources; rows/s of each."""
    import pyspark

    jars, connector = resolve_connector(pyspark.__version__)
    topic = f"spark-bench-{uuid.uuid4().hex[:8]}"
    warmup = f"{topic}-warmup"
    started = time.perf_counter()
    asyncio.run(fill_topic(bootstrap, topic, records, partitions))
    asyncio.run(fill_topic(bootstrap, warmup, 1_000, partitions))
    produce_s = time.perf_counter() - started
    spark = session(jars)
    timings: dict[str, list[float]] = {"aiokproto": [], "kafka": []}
    try:
        for fmt in timings:  # JVM classes, Python workers and connections warmed up
            _count(spark, fmt, bootstrap, warmup)
        for _ in range(runs):
            for fmt, seconds in timings.items():
                n, took = _count(spark, fmt, bootstrap, topic)
                if n != records:
                    raise SparkBenchError(f"format {fmt} counted {n} rows, expected {records}")
                seconds.append(took)
    finally:
        spark.stop()
    best = {fmt: min(s) for fmt, s in timings.items()}
    return {
        "records": records,
        "value_bytes": VALUE_SIZE,
        "partitions": partitions,
        "runs": runs,
        "pyspark": pyspark.__version__,
        "spark_kafka_connector": connector,
        "produce_seconds": round(produce_s, 2),
        "seconds": {fmt: [round(x, 3) for x in s] for fmt, s in timings.items()},
        "aiokproto_rows_per_s": round(records / best["aiokproto"]),
        "spark_kafka_rows_per_s": round(records / best["kafka"]),
        "python_conversion": {k: round(v) for k, v in conversion_rates().items()},
    }


def render(result: dict[str, Any]) -> str:
    conv = result["python_conversion"]
    return "\n".join(
        [
            f"Spark read of {result['records']:,} records x {result['value_bytes']} B, "
            f"{result['partitions']} partitions, local[2], best of {result['runs']} "
            f"(pyspark {result['pyspark']}, connector {result['spark_kafka_connector']})",
            "",
            "| source | rows/s | seconds per run |",
            "|---|---:|---|",
            f'| format("aiokproto") | {result["aiokproto_rows_per_s"]:,} | '
            f"{result['seconds']['aiokproto']} |",
            f'| format("kafka") (Spark\'s connector) | {result["spark_kafka_rows_per_s"]:,} | '
            f"{result['seconds']['kafka']} |",
            "",
            f"Python conversion per worker (CPU): Arrow batches {conv['arrow_records_per_s']:,} "
            f"records/s, tuples {conv['tuples_records_per_s']:,} records/s.",
        ]
    )


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.spark_bench", description=__doc__)
    ap.add_argument("--records", type=int, default=1_000_000, help="records to read")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--bootstrap-servers", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "spark.json")
    args = ap.parse_args(argv)
    if args.records < 1 or args.partitions < 1 or args.runs < 1:
        ap.error("--records, --partitions and --runs must be positive")
    if args.bootstrap_servers:
        result = run(
            args.bootstrap_servers, args.records, partitions=args.partitions, runs=args.runs
        )
    else:
        from aiokproto.testing import PLAINTEXT_ONLY, LocalKafka

        with LocalKafka(security=PLAINTEXT_ONLY) as kafka:
            result = run(
                kafka.bootstrap_servers, args.records, partitions=args.partitions, runs=args.runs
            )
    print(render(result))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
