"""Spark read and write throughput on a standalone cluster: aiokproto vs Spark's connector.

Starts a ``SparkStandalone`` (a master and 2 workers x 1 core, one executor each) and a
``LocalKafka`` broker (unless ``--bootstrap-servers``), fills a 12-partition topic with N
values of 100 B (aiokproto ``Producer.send_batch``), then, one run each, in this order:

* read: ``count(*)`` and ``sum(length(value))`` of the topic through ``format("aiokproto")``
  and ``format("kafka")`` (Spark's ``spark-sql-kafka-0-10``, resolved as in
  ``spark_bench``), both with the same ``minPartitions``;
* write: N rows of a 100 B binary ``value`` made by ``spark.range`` into a fresh
  12-partition topic through each sink (``kafka.linger.ms=5`` for both, other producer
  settings the clients' defaults: the aiokproto sink batches 256 KB, kafka-clients
  16 KB), then once more through Spark's connector with ``kafka.batch.size=262144``;
  every record is counted from the end offsets.

A warm-up of each read and write on a topic of 2 M rows (N if smaller) comes first
(Python workers forked, JVM classes loaded and JIT-compiled, connections made).
Measured per phase:

* rows/s: N over the wall time of the Spark action on the driver;
* executor CPU: the change in ``utime + stime`` (``/proc/<pid>/stat``) of every
  executor JVM of this application (``CoarseGrainedExecutorBackend`` with its
  ``--app-id``) and of each of its descendants (``pyspark.daemon`` and its forked
  workers; one that exits counts with its last value, sampled every 0.2 s), split into
  the JVM and its Python processes. Driver, broker, master and worker daemons are not
  included;
* machine busy: the share of all CPUs' time that was not idle during the phase
  (``/proc/stat``), whoever used it: near 100% means the phase had no CPU to spare.
  Before each phase dirty pages are flushed (``sync``) and the machine is let settle
  (under 25% busy, at most 30 s), so one phase's writeback does not slow the next;
* Python worker memory: ``/proc/<pid>/status`` ``VmRSS`` of the executors' Python
  processes sampled every 0.2 s during the phase (the largest single process and the
  largest sum per executor), and the largest ``VmHWM`` at the end of the phase.

    .venv/bin/python -m benchmarks.spark_cluster_bench [--rows N] [--min-partitions 24]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from aiokproto.spark.options import SINK_BATCH_SIZE
from benchmarks.spark_bench import (
    VALUE_SIZE,
    SparkBenchError,
    fill_topic,
    resolve_connector,
    session,
)

PARTITIONS = 12
WARM_ROWS = 2_000_000  # read and written by each source and sink before measuring
CLK_TCK = os.sysconf("SC_CLK_TCK")
FORMATS = {"aiokproto": 'format("aiokproto")', "kafka": 'format("kafka") (Spark\'s)'}
# Writes also run Spark's connector with the aiokproto sink's default batch size
# (262,144 B; kafka-clients' is 16,384), so neither side wins by its defaults alone.
BULK = "kafka-bulk"
SINKS = {**FORMATS, BULK: f'format("kafka") (Spark\'s), kafka.batch.size={SINK_BATCH_SIZE}'}
SINK_OPTIONS = {BULK: {"kafka.batch.size": str(SINK_BATCH_SIZE)}}


# -- executor processes from /proc -------------------------------------------------------


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (``[1]`` is the
    parent's pid, ``[11]`` and ``[12]`` utime and stime), None if the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def executor_trees(app_id: str) -> dict[int, list[int]]:
    """Each executor JVM of ``app_id`` -> its descendants (Python daemon and workers)."""
    stats = {pid: st for pid in _pids() if (st := _stat(pid)) is not None}
    children: dict[int, list[int]] = {}
    for pid, fields in stats.items():
        children.setdefault(int(fields[1]), []).append(pid)
    trees = {}
    for pid in stats:
        cmd = _cmdline(pid)
        if "CoarseGrainedExecutorBackend" in cmd and app_id in cmd:
            below, todo = [], list(children.get(pid, []))
            while todo:
                child = todo.pop()
                below.append(child)
                todo.extend(children.get(child, []))
            trees[pid] = below
    return trees


def _self_cpu(pid: int) -> float | None:
    """CPU seconds of the process itself (utime + stime), None if gone."""
    fields = _stat(pid)
    return None if fields is None else (int(fields[11]) + int(fields[12])) / CLK_TCK


def jvm_cpu(app_id: str) -> float:
    """CPU seconds so far of the executor JVMs themselves."""
    return sum(c for pid in executor_trees(app_id) if (c := _self_cpu(pid)) is not None)


def python_cpu(app_id: str) -> dict[int, float]:
    """CPU seconds so far of each of the executors' Python processes, by pid. Each
    process's own time, not its reaped children's: a Python daemon that exits takes
    its children's time with it (a phase once read -20 s of Python CPU that way), so
    ``MemorySampler`` keeps the last value seen of every process instead."""
    return {
        pid: c
        for below in executor_trees(app_id).values()
        for pid in below
        if (c := _self_cpu(pid)) is not None
    }


def _status_kb(pid: int, *keys: str) -> dict[str, int]:
    out = {}
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                name, _, rest = line.partition(":")
                if name in keys:
                    out[name] = int(rest.split()[0])
    except OSError:
        pass
    return out


class MemorySampler:
    """Samples the RSS of the executors' Python processes (and JVMs) in a thread."""

    def __init__(self, app_id: str, interval: float = 0.2) -> None:
        self.app_id = app_id
        self.interval = interval
        self.python_rss_kb = 0  # largest single Python process
        self.python_sum_kb = 0  # largest sum over one executor's Python processes
        self.jvm_rss_kb = 0
        self.python_cpu: dict[int, float] = {}  # last CPU seconds seen, by pid
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            for executor, below in executor_trees(self.app_id).items():
                for p in below:
                    if (cpu := _self_cpu(p)) is not None:
                        self.python_cpu[p] = cpu
                rss = [_status_kb(p, "VmRSS").get("VmRSS", 0) for p in below]
                self.python_rss_kb = max(self.python_rss_kb, *rss, 0)
                self.python_sum_kb = max(self.python_sum_kb, sum(rss))
                jvm = _status_kb(executor, "VmRSS").get("VmRSS", 0)
                self.jvm_rss_kb = max(self.jvm_rss_kb, jvm)
            self.samples += 1

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def python_hwm_kb(app_id: str) -> int:
    """The largest VmHWM of the executors' Python processes alive now."""
    return max(
        (
            _status_kb(p, "VmHWM").get("VmHWM", 0)
            for below in executor_trees(app_id).values()
            for p in below
        ),
        default=0,
    )


def machine_busy_s() -> float:
    """CPU seconds all CPUs of the machine spent busy so far (``/proc/stat``: every
    state but idle and iowait), to tell whether a phase had the machine to itself."""
    with open("/proc/stat", encoding="ascii") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def settle(quiet: float = 0.25, timeout_s: float = 30.0) -> float:
    """Flush dirty pages and wait until the machine is about idle (under ``quiet`` of
    all CPUs busy over half a second), at most ``timeout_s``; returns the seconds
    waited. A write phase leaves about 2 GB of the broker's writes to flush, which
    would otherwise go on during the next phase."""
    started = time.perf_counter()
    os.sync()
    cpus = os.cpu_count() or 1
    while time.perf_counter() - started < timeout_s:
        busy = machine_busy_s()
        time.sleep(0.5)
        if (machine_busy_s() - busy) / (0.5 * cpus) < quiet:
            break
    return time.perf_counter() - started


@contextmanager
def measured(app_id: str, out: dict[str, Any]) -> Iterator[None]:
    """Wall time, executor CPU, the machine's busy CPU and Python worker memory of the
    block, into ``out``; the machine is let settle first (``settle``)."""
    out["settle_s"] = settle()
    jvm_before, python_before = jvm_cpu(app_id), python_cpu(app_id)
    busy_before = machine_busy_s()
    with MemorySampler(app_id) as mem:
        started = time.perf_counter()
        yield
        out["seconds"] = time.perf_counter() - started
    python_last = {**mem.python_cpu, **python_cpu(app_id)}  # the exited ones too
    out["machine_busy_s"] = machine_busy_s() - busy_before
    out["cpu_jvm_s"] = jvm_cpu(app_id) - jvm_before
    out["cpu_python_s"] = sum(cpu - python_before.get(pid, 0.0) for pid, cpu in python_last.items())
    out["cpu_s"] = out["cpu_jvm_s"] + out["cpu_python_s"]
    out["python_rss_peak_mb"] = mem.python_rss_kb / 1024
    out["python_rss_sum_peak_mb"] = mem.python_sum_kb / 1024
    out["executor_jvm_rss_peak_mb"] = mem.jvm_rss_kb / 1024
    out["python_hwm_mb"] = python_hwm_kb(app_id) / 1024


# -- the phases --------------------------------------------------------------------------


def read_once(spark: Any, fmt: str, bootstrap: str, topic: str, min_partitions: int) -> Any:
    from pyspark.sql import functions as F

    df = (
        spark.read.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("minPartitions", str(min_partitions))
        .load()
    )
    return df.agg(F.count("*").alias("rows"), F.sum(F.length("value")).alias("bytes")).first()


def write_once(spark: Any, sink: str, bootstrap: str, topic: str, rows: int) -> None:
    df = spark.range(0, rows, 1, PARTITIONS).selectExpr(
        f"CAST(lpad(CAST(id AS STRING), {VALUE_SIZE}, 'x') AS BINARY) AS value"
    )
    (
        df.write.format("kafka" if sink == BULK else sink)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("kafka.linger.ms", "5")
        .options(**SINK_OPTIONS.get(sink, {}))
        .mode("append")
        .save()
    )


async def _create(bootstrap: str, topic: str) -> None:
    from aiokproto.admin import Admin, NewTopic

    async with Admin(bootstrap_servers=bootstrap) as admin:
        await admin.create_topics(
            [NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)]
        )
        async with asyncio.timeout(30):
            while topic not in await admin.list_topics():  # noqa: ASYNC110 - polling
                await asyncio.sleep(0.05)


async def _records_in(bootstrap: str, topic: str) -> int:
    from aiokproto.consumer import Consumer
    from aiokproto.structs import TopicPartition

    async with Consumer(bootstrap_servers=bootstrap) as consumer:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        return sum((await consumer.end_offsets(tps)).values())


def _wait_for_executors(spark: Any, count: int, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1 < count:
        if time.monotonic() > deadline:
            raise SparkBenchError(f"fewer than {count} executors registered")
        time.sleep(0.25)


def _uptime() -> str:
    with open("/proc/loadavg", encoding="ascii") as f:
        return " ".join(f.read().split()[:3])


def run(
    bootstrap: str,
    master_url: str,
    rows: int,
    *,
    min_partitions: int = 24,
    kafka_first: bool = False,
) -> dict[str, Any]:
    import pyspark

    jars, connector = resolve_connector(pyspark.__version__)
    result: dict[str, Any] = {
        "rows": rows,
        "value_bytes": VALUE_SIZE,
        "partitions": PARTITIONS,
        "min_partitions": min_partitions,
        "order": "Spark's connector first" if kafka_first else "aiokproto first",
        "pyspark": pyspark.__version__,
        "spark_kafka_connector": connector,
        "cpus": os.cpu_count(),
        "load_before": _uptime(),
    }
    topic = f"spark-cluster-bench-{uuid.uuid4().hex[:8]}"
    warm = f"{topic}-warmup"
    started = time.perf_counter()
    asyncio.run(fill_topic(bootstrap, topic, rows, PARTITIONS))
    result["fill_seconds"] = round(time.perf_counter() - started, 1)
    # JIT-warm: after a 12,000-row warm-up, the first full write through Spark's
    # connector was 10-15% slower than its second, whichever settings came first
    warm_rows = min(rows, WARM_ROWS)
    asyncio.run(fill_topic(bootstrap, warm, warm_rows, PARTITIONS))
    spark = session(
        jars,
        master_url,
        {
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.executor.memory": "512m",
            "spark.executor.cores": "1",
            "spark.cores.max": "2",
            "spark.pyspark.python": sys.executable,
            "spark.scheduler.minRegisteredResourcesRatio": "1.0",
            "spark.scheduler.maxRegisteredResourcesWaitingTime": "120s",
        },
    )
    phases: dict[str, dict[str, Any]] = {}
    order = list(reversed(FORMATS)) if kafka_first else list(FORMATS)
    try:
        _wait_for_executors(spark, 2)
        app_id = spark.sparkContext.applicationId
        # warm-up: workers forked, classes loaded and compiled, connections made
        for fmt in FORMATS:
            read_once(spark, fmt, bootstrap, warm, min_partitions)
        for fmt in SINKS:
            target = f"{warm}-{fmt}"
            asyncio.run(_create(bootstrap, target))
            write_once(spark, fmt, bootstrap, target, warm_rows)
        for fmt in order:
            out = phases[f"read {fmt}"] = {}
            with measured(app_id, out):
                got = read_once(spark, fmt, bootstrap, topic, min_partitions)
            if (got.rows, got.bytes) != (rows, rows * VALUE_SIZE):
                raise SparkBenchError(f"{fmt} read {got.rows} rows, {got.bytes} B; expected {rows}")
            print(f"read {fmt}: {out['seconds']:.1f} s", flush=True)
        for fmt in list(reversed(SINKS)) if kafka_first else list(SINKS):
            target = f"{topic}-{fmt}"
            asyncio.run(_create(bootstrap, target))
            out = phases[f"write {fmt}"] = {}
            with measured(app_id, out):
                write_once(spark, fmt, bootstrap, target, rows)
            written = asyncio.run(_records_in(bootstrap, target))
            if written != rows:
                raise SparkBenchError(f"{fmt} wrote {written} records, expected {rows}")
            print(f"write {fmt}: {out['seconds']:.1f} s", flush=True)
    finally:
        spark.stop()
    for out in phases.values():
        out["rows_per_s"] = rows / out["seconds"]
        out["rows_per_cpu_s"] = rows / out["cpu_s"] if out["cpu_s"] else 0.0
    result["phases"] = {
        name: {k: round(v, 2) if isinstance(v, float) else v for k, v in out.items()}
        for name, out in phases.items()
    }
    result["load_after"] = _uptime()
    return result


TARGETS = {"read": 2.0, "write": 1.5}


def _busy(out: dict[str, Any], cpus: int) -> str:
    """The share of the machine's CPU time that was busy during the phase (everything:
    executors, broker, driver), or n/a for results recorded before it was measured."""
    busy = out.get("machine_busy_s")
    if busy is None or not out["seconds"]:
        return "n/a"
    return f"{busy / (out['seconds'] * cpus):.0%}"


def render(result: dict[str, Any]) -> str:
    p = result["phases"]
    lines = [
        f"{result['rows']:,} rows x {result['value_bytes']} B, {result['partitions']} "
        f"partitions, minPartitions {result['min_partitions']}; standalone cluster, 2 workers "
        f"x 1 core, {result['cpus']} CPUs; pyspark {result['pyspark']}, connector "
        f"{result['spark_kafka_connector']}; load {result['load_before']} -> "
        f"{result['load_after']}; fill {result['fill_seconds']} s; {result['order']}",
        "",
        "| phase | source/sink | seconds | rows/s | executor CPU s (JVM + Python) "
        "| rows per CPU s | machine busy | Python RSS peak MB (one / per executor) |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, out in p.items():
        kind, fmt = name.split()
        lines.append(
            f"| {kind} | {SINKS[fmt]} | {out['seconds']:.1f} | {out['rows_per_s']:,.0f} | "
            f"{out['cpu_s']:.1f} ({out['cpu_jvm_s']:.1f} + {out['cpu_python_s']:.1f}) | "
            f"{out['rows_per_cpu_s']:,.0f} | {_busy(out, result['cpus'])} | "
            f"{out['python_rss_peak_mb']:.0f} / "
            f"{out['python_rss_sum_peak_mb']:.0f} |"
        )
    lines += ["", "| | aiokproto / Spark's, rows/s | per CPU s | target |", "|---|---:|---:|---:|"]
    for kind, target in TARGETS.items():
        ours, theirs = p[f"{kind} aiokproto"], p[f"{kind} kafka"]
        ratio = ours["rows_per_s"] / theirs["rows_per_s"]
        cpu_ratio = (
            ours["rows_per_cpu_s"] / theirs["rows_per_cpu_s"] if theirs["rows_per_cpu_s"] else 0
        )
        verdict = "met" if ratio >= target else "not met"
        lines.append(f"| {kind} | {ratio:.2f}x | {cpu_ratio:.2f}x | {target}x ({verdict}) |")
    bulk = p.get(f"write {BULK}")
    if bulk is not None:  # results recorded before the bulk phase existed have none
        ours = p["write aiokproto"]
        lines.append(
            f"| write vs Spark's at {SINK_BATCH_SIZE:,} B batches | "
            f"{ours['rows_per_s'] / bulk['rows_per_s']:.2f}x | "
            f"{ours['rows_per_cpu_s'] / bulk['rows_per_cpu_s']:.2f}x | |"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.spark_cluster_bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--rows", type=int, default=20_000_000)
    ap.add_argument("--min-partitions", type=int, default=24)
    ap.add_argument("--kafka-first", action="store_true", help="Spark's connector before aiokproto")
    ap.add_argument("--bootstrap-servers", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    ap.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "spark-cluster.json"
    )
    args = ap.parse_args(argv)
    if args.rows < 1 or args.min_partitions < 1:
        ap.error("--rows and --min-partitions must be positive")
    if shutil.which("java") is None:
        ap.error("a Spark standalone cluster needs java on PATH")
    from aiokproto.testing import PLAINTEXT_ONLY, LocalKafka
    from aiokproto.testing.spark_cluster import SparkStandalone

    def bench(bootstrap: str) -> dict[str, Any]:
        with SparkStandalone(workers=2, worker_cores=1, worker_memory="1g") as cluster:
            return run(
                bootstrap,
                cluster.master_url,
                args.rows,
                min_partitions=args.min_partitions,
                kafka_first=args.kafka_first,
            )

    if args.bootstrap_servers:
        result = bench(args.bootstrap_servers)
    else:
        with LocalKafka(security=PLAINTEXT_ONLY) as kafka:
            result = bench(kafka.bootstrap_servers)
    print(render(result))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
