"""Share-group consume throughput: aiokproto's ShareConsumer beside Kafka's own Java share
consumer (``ShareConsumerPerformance`` from the broker's jars), same broker, same topic.

A topic of N records of 100 B over ``--partitions`` partitions is written once; every run
of every client reads all of it as the only member of a fresh share group that starts
at the earliest offset, in implicit acknowledgement mode (each client's default: a
record is accepted by the next poll). Runs alternate between the clients.

Two rates per run, both to the N-th record handed to the application:

* **whole**: from the start of the consumer (join included; a member gets its
  assignment at its next heartbeat, 5 s by Kafka's default, in both clients);
* **steady**: from the first record. Java's figure comes from its per-second report
  (``--show-detailed-stats``): records after the first report that had any, over the
  time from that report's end to the last record.

CPU per million records: this process for aiokproto (``process_time``), the whole JVM
for Java (its start-up and JIT included), so only the former is a per-record cost.

    .venv/bin/python -m benchmarks.share_bench [-n 300000] [--partitions 2] [--runs 3]
        [--bootstrap-servers HOST:PORT]

A single-node Kafka 4.3.1 is started unless ``--bootstrap-servers`` names a broker; the
table goes to stdout and ``benchmarks/results/share-<UTC time>.json`` gets every run.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import resource
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from benchmarks.local_broker import on_broker

KAFKA_VERSION = "4.3.1"
VALUE = b"v" * 100
RESULTS_DIR = Path(__file__).parent / "results"
JAVA_TOOL = "org.apache.kafka.tools.ShareConsumerPerformance"


@dataclass
class Run:
    client: str
    run: int
    whole_per_s: float
    steady_per_s: float
    cpu_s_per_million: float
    first_record_s: float


async def fill(bootstrap: str, n: int, partitions: int) -> str:
    from aiokproto.admin import Admin, NewTopic
    from aiokproto.producer import Producer

    topic = f"bench-share-{uuid.uuid4().hex[:10]}"
    async with Admin(bootstrap_servers=bootstrap) as admin:
        await admin.create_topics([NewTopic(topic, partitions, 1)])
    async with Producer(bootstrap_servers=bootstrap, linger_ms=5, batch_size=65536) as p:
        per = n // partitions
        for part in range(partitions):
            count = per + (1 if part < n % partitions else 0)
            for start in range(0, count, 10_000):
                await p.send_batch(topic, [VALUE] * min(10_000, count - start), partition=part)
        await p.flush()
    return topic


async def new_group(bootstrap: str, topic: str, client: str, run: int) -> str:
    from aiokproto.admin import Admin, AlterConfigOp, ConfigResource, ConfigResourceType

    group = f"{topic}-{client}-{run}"
    async with Admin(bootstrap_servers=bootstrap) as admin:
        await admin.incremental_alter_configs(
            {
                ConfigResource(ConfigResourceType.GROUP, group): [
                    AlterConfigOp("share.auto.offset.reset", "earliest")
                ]
            }
        )
    return group


async def run_aiokproto(bootstrap: str, topic: str, group: str, n: int, run: int) -> Run:
    from aiokproto.share import ShareConsumer

    cpu = time.process_time()
    began = time.perf_counter()
    first = 0.0
    count = 0
    async with ShareConsumer(topic, bootstrap_servers=bootstrap, group_id=group) as consumer:
        async for _record in consumer:
            if count == 0:
                first = time.perf_counter()
            count += 1
            if count >= n:
                break
        ended = time.perf_counter()
        cpu = time.process_time() - cpu
    return Run("aiokproto", run, n / (ended - began), n / (ended - first),
               cpu / n * 1e6, first - began)  # fmt: skip


def _ms(stamp: str) -> float:
    """Java's default date format, yyyy-MM-dd HH:mm:ss:SSS, as epoch milliseconds."""
    day, clock = stamp.strip().split(" ")
    hms, millis = clock.rsplit(":", 1)
    parsed = datetime.datetime.fromisoformat(f"{day} {hms}")
    return parsed.timestamp() * 1000 + int(millis)


def parse_java(out: str, n: int) -> tuple[float, float, float]:
    """(whole, steady rate, seconds to the first record) from the tool's output: the
    per-second lines end in ``for share consumer 1``, the summary line does not."""
    rows = [
        [f.strip() for f in line.split(",")]
        for line in out.splitlines()
        if line[:1].isdigit() and line.count(",") >= 6
    ]
    detail = [r for r in rows if r[-1].endswith("for share consumer 1")]
    summary = [r for r in rows if not r[-1].endswith("for share consumer 1")]
    if not summary or int(summary[-1][5]) < n:
        raise RuntimeError(f"{JAVA_TOOL} did not report {n} records:\n{out[-2000:]}")
    start, end = _ms(summary[-1][0]), _ms(summary[-1][1])
    first = next(r for r in detail if int(r[5]) > 0)
    first_end = _ms(first[1])
    steady = (n - int(first[5])) / ((end - first_end) / 1000)
    return n / ((end - start) / 1000), steady, (first_end - start) / 1000


def run_java(bootstrap: str, topic: str, group: str, n: int, run: int) -> Run:
    from aiokproto.testing.jars import classpath

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(
        ["java", "-cp", classpath(KAFKA_VERSION), JAVA_TOOL, "--bootstrap-server", bootstrap,
         "--topic", topic, "--group", group, "--num-records", str(n),
         "--show-detailed-stats", "--reporting-interval", "1000"],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"{JAVA_TOOL} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    whole, steady, first = parse_java(proc.stdout, n)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Run("java", run, whole, steady, cpu / n * 1e6, first)


def table(runs: Sequence[Run], n: int, partitions: int) -> str:
    lines = [
        f"{n:,} records x 100 B, {partitions} partitions, implicit acknowledgement, "
        f"one member per fresh share group; median of {len(runs) // 2} runs per client",
        "",
        "| client | whole (join included) rec/s | steady rec/s | s to first record | CPU s / M |",
        "|---|---:|---:|---:|---:|",
    ]
    for client in ("aiokproto", "java"):
        mine = [r for r in runs if r.client == client]
        if not mine:
            continue

        def med(field: str, runs: list[Run] = mine) -> float:
            return statistics.median(getattr(r, field) for r in runs)

        lines.append(
            f"| {client} | {med('whole_per_s'):,.0f} | {med('steady_per_s'):,.0f} | "
            f"{med('first_record_s'):.2f} | {med('cpu_s_per_million'):.2f} |"
        )
    return "\n".join(lines)


def session(bootstrap: str, n: int, partitions: int, runs: int) -> list[Run]:
    topic = asyncio.run(fill(bootstrap, n, partitions))
    out: list[Run] = []
    for run in range(runs):
        order = ("aiokproto", "java") if run % 2 == 0 else ("java", "aiokproto")
        for client in order:
            group = asyncio.run(new_group(bootstrap, topic, client, run))
            if client == "java":
                result = run_java(bootstrap, topic, group, n, run)
            else:
                result = asyncio.run(run_aiokproto(bootstrap, topic, group, n, run))
            print(f"run {run + 1} {client}: whole {result.whole_per_s:,.0f}/s, steady "
                  f"{result.steady_per_s:,.0f}/s", file=sys.stderr)  # fmt: skip
            out.append(result)
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=300_000, help="records in the topic")
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3, help="runs per client")
    ap.add_argument("--bootstrap-servers", default=None)
    ap.add_argument("--out-dir", type=Path, default=RESULTS_DIR)
    args = ap.parse_args(argv)

    import aiokproto.share  # noqa: F401  (imported outside the timed part)

    results = on_broker(
        args.bootstrap_servers,
        lambda bootstrap: session(bootstrap, args.n, args.partitions, args.runs),
        version=KAFKA_VERSION,
    )
    print(table(results, args.n, args.partitions))
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    path = args.out_dir / f"share-{stamp}.json"
    doc = {"records": args.n, "partitions": args.partitions, "kafka": KAFKA_VERSION,
           "runs": [asdict(r) for r in results]}  # fmt: skip
    path.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
