"""Each client's own defaults: one partition, 100 B / 1 KB / 100 KB values, side by side.

What a user gets without tuning (issue 33: with their own defaults aiokproto sent 1 KB
values at 0.15x confluent-kafka's rate). aiokproto, confluent-kafka (librdkafka) and
aiokafka each run in a fresh process with nothing set but the bootstrap address (acks,
batch size, linger, in-flight: every client's default), send ``--records`` records of
one value size to a fresh one-partition topic from a loop that awaits each ``send``
(``produce`` for librdkafka, which polls only when its queue is full), and flush.

Reported per value size (median of ``--runs`` runs, clients interleaved and rotated):
records/s and MB/s from the first send until every record is acknowledged, CPU of the
process (all threads, librdkafka's too) per record and per MB, and the rate and CPU per
MB as ratios to confluent-kafka's. The load average is printed with the table.

    .venv/bin/python -m benchmarks.defaults [--sizes 100,1000,100000] [--mb MB]
        [--runs 3] [--clients aiokproto,confluent-kafka,aiokafka] [--bootstrap-servers H:P]

``--mb`` is the MB of values per run for every size (records = mb * 1e6 / size, at
least 200); by default 50 MB of 100 B values, 100 MB of 1 KB, 300 MB of 100 KB.
``--clients`` may name ``aiokproto-base`` too: aiokproto from ``$BENCH_AIOKPROTO_BASE``
(a revision extracted and built by ``python -m benchmarks.build_base REV DIR``).
Without ``--bootstrap-servers`` a single-node Kafka is started (``LocalKafka``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from typing import Any

CLIENTS = ("aiokproto", "confluent-kafka", "aiokafka")
#: another checkout's aiokproto ($BENCH_AIOKPROTO_BASE: make bench-base's build_base)
BASE_CLIENT = "aiokproto-base"
REFERENCE = "confluent-kafka"
SIZES = (100, 1_000, 100_000)
MIN_RECORDS = 200


def default_mb(size: int) -> float:
    """MB of values per run when ``--mb`` is not given: more for bigger values, which
    go faster in MB/s, so a run lasts long enough (about a second for the fastest
    client) that its first batches' start-up does not decide it: 300 MB of 100 KB
    values was 1.12x confluent-kafka's rate where 50 MB read 0.63x."""
    return 50.0 if size < 1_000 else 100.0 if size < 100_000 else 300.0


def records_for(size: int, mb: float) -> int:
    """Records of ``size`` bytes that make ``mb`` MB of values (at least MIN_RECORDS,
    so the largest values still make more than a batch or two)."""
    if size < 1 or mb <= 0:
        raise ValueError(f"value size and MB must be positive, not {size} and {mb}")
    return max(MIN_RECORDS, round(mb * 1e6 / size))


def rotated(clients: Sequence[str], run: int) -> list[str]:
    """The clients in run ``run``'s order: each run starts one further along, so the
    machine's drift hits every client alike."""
    k = run % len(clients) if clients else 0
    return [*clients[k:], *clients[:k]]


def check_last(offset: int | None, n: int) -> None:
    """The last record's offset: ``n`` on a fresh topic (the warm-up record is 0)."""
    if offset != n:
        raise RuntimeError(f"the last of {n} records is at offset {offset}, not {n}")


async def _timed_sends(p: Any, topic: str, value: bytes, n: int) -> tuple[float, float]:
    """Wall and CPU seconds of ``n`` awaited sends and the flush, after one warm-up send
    (connected, leader known, producer id assigned); aiokproto and aiokafka alike."""
    await (await p.send(topic, b"warm"))
    wall, cpu = time.perf_counter(), time.process_time()
    send = p.send
    last = None
    for _ in range(n):
        last = await send(topic, value)
    await p.flush()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    check_last(None if last is None else (await last).offset, n)
    return wall, cpu


async def _aiokproto(bootstrap: str, topic: str, value: bytes, n: int) -> tuple[float, float]:
    from aiokproto import Producer

    async with Producer(bootstrap_servers=bootstrap) as p:
        return await _timed_sends(p, topic, value, n)


async def _aiokafka(bootstrap: str, topic: str, value: bytes, n: int) -> tuple[float, float]:
    from aiokafka import AIOKafkaProducer  # type: ignore[import-untyped]

    p = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await p.start()
    try:
        return await _timed_sends(p, topic, value, n)
    finally:
        await p.stop()


def _confluent(bootstrap: str, topic: str, value: bytes, n: int) -> tuple[float, float]:
    import confluent_kafka  # type: ignore[import-untyped]

    errors: list[Any] = []
    offsets: list[int] = [-1]

    def report(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        elif msg.offset() > offsets[0]:
            offsets[0] = msg.offset()

    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    p.produce(topic, b"warm", on_delivery=report)
    if p.flush(60) or errors:
        raise RuntimeError(f"librdkafka's warm-up did not deliver: {errors[:3]}")
    wall, cpu = time.perf_counter(), time.process_time()
    produce, poll = p.produce, p.poll
    for _ in range(n):
        while True:
            try:
                produce(topic, value, on_delivery=report)
                break
            except BufferError:  # its queue is full: serve callbacks, as a service does
                poll(0.01)
    if p.flush(300) or errors:
        raise RuntimeError(f"librdkafka did not deliver everything: {errors[:3]}")
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    check_last(offsets[0], n)
    return wall, cpu


def child(client: str, bootstrap: str, topic: str, size: int, n: int) -> dict[str, Any]:
    """One run in this (fresh) process."""
    if client == BASE_CLIENT:
        base = os.environ.get("BENCH_AIOKPROTO_BASE", "")
        if not os.path.isdir(os.path.join(base, "aiokproto")) or "aiokproto" in sys.modules:
            raise RuntimeError(f"BENCH_AIOKPROTO_BASE={base!r} is not a checkout of aiokproto")
        sys.path.insert(0, base)
    value = b"x" * size
    if client == "confluent-kafka":
        wall, cpu = _confluent(bootstrap, topic, value, n)
    elif client == "aiokafka":
        wall, cpu = asyncio.run(_aiokafka(bootstrap, topic, value, n))
    else:
        wall, cpu = asyncio.run(_aiokproto(bootstrap, topic, value, n))
    return {"wall_s": wall, "cpu_s": cpu, "records": n, "size": size}


def _run_child(client: str, bootstrap: str, topic: str, size: int, n: int) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.defaults", "--child", client,
         "--bootstrap-servers", bootstrap, "--topic", topic, "--sizes", str(size),
         "--records", str(n)],
        capture_output=True, text=True, check=False, timeout=900,
    )  # fmt: skip
    if out.returncode:
        raise RuntimeError(f"{client} run failed:\n{out.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def figures(runs: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Medians over the runs: records/s, MB/s (values, 1e6 bytes), CPU µs per record
    and CPU ms per MB."""
    if not runs:
        raise ValueError("no runs")
    return {
        "records_s": statistics.median(r["records"] / r["wall_s"] for r in runs),
        "mb_s": statistics.median(r["records"] * r["size"] / 1e6 / r["wall_s"] for r in runs),
        "cpu_us_record": statistics.median(r["cpu_s"] / r["records"] * 1e6 for r in runs),
        "cpu_ms_mb": statistics.median(
            r["cpu_s"] / (r["records"] * r["size"] / 1e6) * 1e3 for r in runs
        ),
    }


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 else math.nan


def summary(
    results: dict[int, dict[str, list[dict[str, Any]]]], load: float
) -> list[str]:
    """The table's lines: per value size and client, the medians and, beside them, the
    rate and CPU per MB as ratios to confluent-kafka's (nan without its runs)."""
    lines = [
        f"each client's defaults, 1 partition, load average {load:.1f}",
        f"  {'size':>7s} {'client':16s} {'records/s':>11s} {'MB/s':>8s} "
        f"{'CPU µs/rec':>10s} {'CPU ms/MB':>9s} {'x rate':>7s} {'x CPU/MB':>8s}",
    ]
    for size, by_client in results.items():
        ref_runs = by_client.get(REFERENCE) or []
        ref = figures(ref_runs) if ref_runs else None
        for client, runs in by_client.items():
            if not runs:
                continue
            f = figures(runs)
            rate = _ratio(f["records_s"], ref["records_s"]) if ref else math.nan
            cpu = _ratio(f["cpu_ms_mb"], ref["cpu_ms_mb"]) if ref else math.nan
            lines.append(
                f"  {size:>7,d} {client:16s} {f['records_s']:>11,.0f} {f['mb_s']:>8.1f} "
                f"{f['cpu_us_record']:>10.1f} {f['cpu_ms_mb']:>9.1f} {rate:>6.2f}x {cpu:>7.2f}x"
            )
    return lines


async def _create_topics(bootstrap: str, names: Sequence[str]) -> None:
    from aiokproto import Admin, NewTopic

    async with Admin(bootstrap_servers=bootstrap) as admin:
        await admin.create_topics(
            [NewTopic(name, num_partitions=1, replication_factor=1) for name in names]
        )


async def _delete_topics(bootstrap: str, names: list[str]) -> None:
    from aiokproto import Admin

    async with Admin(bootstrap_servers=bootstrap) as admin:
        await admin.delete_topics(names)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)),
                    help="comma-separated value sizes in bytes")
    ap.add_argument("--mb", type=float, default=None,
                    help="MB of values per run (default: 50, 100 from 1 KB, 300 from 100 KB)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--clients", default=",".join(CLIENTS))
    ap.add_argument("--bootstrap-servers")
    ap.add_argument("--child", choices=(*CLIENTS, BASE_CLIENT), help=argparse.SUPPRESS)
    ap.add_argument("--topic", help=argparse.SUPPRESS)
    ap.add_argument("--records", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        result = child(args.child, args.bootstrap_servers, args.topic, int(args.sizes),
                       args.records)
        print(json.dumps(result))
        return 0
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s]
    except ValueError:
        ap.error(f"--sizes takes comma-separated byte counts, not {args.sizes!r}")
    if not sizes or min(sizes) < 1 or (args.mb is not None and args.mb <= 0) or args.runs < 1:
        ap.error("value sizes, --mb and --runs must be positive")
    clients = [c for c in args.clients.split(",") if c]
    unknown = set(clients) - {*CLIENTS, BASE_CLIENT}
    if unknown or not clients:
        ap.error(f"unknown clients {sorted(unknown)}; choose from {CLIENTS}")

    def session(bootstrap: str) -> None:
        results: dict[int, dict[str, list[dict[str, Any]]]] = {
            s: {c: [] for c in clients} for s in sizes
        }
        tag = uuid.uuid4().hex[:6]
        for i in range(args.runs):
            # a fresh topic per run: no client appends to a log another has grown
            names = {(s, c): f"defaults-{tag}-{i}-{s}-{c}" for s in sizes for c in clients}
            asyncio.run(_create_topics(bootstrap, list(names.values())))
            try:
                for s in sizes:
                    for c in rotated(clients, i):
                        n = records_for(s, args.mb or default_mb(s))
                        results[s][c].append(_run_child(c, bootstrap, names[s, c], s, n))
            finally:  # the broker's disk holds a run's values, not every run's
                asyncio.run(_delete_topics(bootstrap, list(names.values())))
        mb = ", ".join(f"{args.mb or default_mb(s):g}" for s in sizes)
        print(f"{mb} MB of values per run (by size), median of {args.runs} runs")
        for line in summary(results, os.getloadavg()[0]):
            print(line)

    if args.bootstrap_servers:
        session(args.bootstrap_servers)
        return 0
    from aiokproto.testing import PLAINTEXT_ONLY, LocalKafka

    with LocalKafka(security=PLAINTEXT_ONLY) as kafka:
        session(kafka.bootstrap_servers)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
