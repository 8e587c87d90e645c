"""Spark source, executor side, without Spark: records into Arrow batches, per row.

Encodes 10,000-record batches (100 B values; keys absent or 16 B; headers absent or
two per record) with RecordBatchBuilder, decodes them with the consumer's decoder into
the ``ConsumerRecord`` lists ``getmany`` hands ``iter_range``, and times per row (process
CPU time, best of ``--runs``) the decoding, ``aiokproto.spark.arrow.to_record_batch``
(compiled when aiokproto.spark._arrow is loaded) and its Python reference. Every compiled
batch is first checked equal to the reference's.

    .venv/bin/python -m benchmarks.spark_arrow_bench [--runs N] [--rows N]
        [--read RECORDS] [--profile]

``--read`` also reads RECORDS records of 100 B through ``iter_range`` from the local
test broker (the running one, else one started and stopped here): CPU per row with
and without the Arrow conversion, and the part spent in the cyclic garbage collector;
``--profile`` adds the top lines of a cProfile of that read.
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable
from typing import Any

from aiokproto import accel
from aiokproto.consumer.decode import decode_v2
from aiokproto.consumer.record import ConsumerRecord
from aiokproto.records.batch_v2 import RecordBatch, RecordBatchBuilder
from aiokproto.spark import arrow

BASE_TS = 1_700_000_000_000
TOPIC = "bench-topic"
clock = time.process_time


def encode(rows: int, *, keyed: bool, headers: bool, value_size: int = 100) -> memoryview:
    """One uncompressed v2 batch of ``rows`` records."""
    filler = b" lorem ipsum dolor sit amet, consectetur adipiscing elit" * (value_size // 40 + 2)
    hdrs = [("trace-id", b"0123456789abcdef"), ("source", b"bench")] if headers else None
    b = RecordBatchBuilder(batch_size=1 << 30)
    for i in range(rows):
        key = b"key-%012d" % i if keyed else None
        value = (b"%010d" % (i * 7919) + filler)[:value_size]
        assert b.append(BASE_TS + (i >> 4), key, value, hdrs) is not None
    b.set_base_offset(1_000_000)
    return memoryview(bytes(b.build()))


def best(fn: Callable[[], Any], runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = clock()
        fn()
        times.append(clock() - t0)
    return min(times)


def case(raw: memoryview, headers: bool, runs: int) -> tuple[float, float, float]:
    """Seconds (best) to decode, to convert, to convert in Python."""
    batch = RecordBatch(raw)
    recs: list[ConsumerRecord] = decode_v2(batch, raw, TOPIC, 7)
    built = arrow.to_record_batch(TOPIC, 7, recs, headers)
    assert built.equals(arrow.to_record_batch_python(TOPIC, 7, recs, headers))
    return (
        best(lambda: decode_v2(batch, raw, TOPIC, 7), runs),
        best(lambda: arrow.to_record_batch(TOPIC, 7, recs, headers), runs),
        best(lambda: arrow.to_record_batch_python(TOPIC, 7, recs, headers), runs),
    )


def bench(rows: int, runs: int) -> None:
    print(f"codec: {accel.implementation()}; {rows} rows per batch, best of {runs}")
    print(f"{'case':<26}{'decode':>9}{'arrow':>9}{'arrow py':>10}   µs/row, CPU")
    for keyed in (False, True):
        for headers in (False, True):
            raw = encode(rows, keyed=keyed, headers=headers)
            t_dec, t_arrow, t_py = case(raw, headers, runs)
            name = f"keys {'16 B' if keyed else 'None'}, headers {'2' if headers else 'off'}"
            us = [t / rows * 1e6 for t in (t_dec, t_arrow)]
            print(f"{name:<26}{us[0]:>9.3f}{us[1]:>9.3f}{t_py / rows * 1e6:>10.3f}")


def read(total: int, profile: bool) -> None:
    """iter_range over ``total`` records in one partition of the local broker."""
    import asyncio
    import cProfile
    import pstats
    import uuid

    from aiokproto.spark.fetch import drive, iter_range
    from aiokproto.spark.planning import OffsetRange
    from benchmarks.local_broker import local_broker
    from benchmarks.spark_bench import fill_topic

    gc_seconds = 0.0
    gc_start = 0.0

    def on_gc(phase: str, info: dict[str, int]) -> None:
        nonlocal gc_seconds, gc_start
        if phase == "start":
            gc_start = time.perf_counter()
        else:
            gc_seconds += time.perf_counter() - gc_start

    with local_broker() as bootstrap:
        topic = f"arrow-bench-{uuid.uuid4().hex[:8]}"
        asyncio.run(fill_topic(bootstrap, topic, total, 1))
        r = OffsetRange(topic, 0, 0, total)

        def count(t: str, p: int, recs: list[ConsumerRecord]) -> int:
            return len(recs)

        def to_arrow(t: str, p: int, recs: list[ConsumerRecord]) -> int:
            return int(arrow.to_record_batch(t, p, recs, False).num_rows)

        def run(convert: Callable[[str, int, list[ConsumerRecord]], int]) -> None:
            n = sum(drive(iter_range({"bootstrap_servers": bootstrap}, r, convert)))
            assert n == total, n

        run(count)  # the broker's page cache, the connections' first costs
        gc.callbacks.append(on_gc)
        print(f"iter_range over {total} records of 100 B (µs/row, CPU, best of 3):")
        for name, convert in (("fetch only", count), ("fetch + Arrow", to_arrow)):
            times = []
            for _ in range(3):
                gc_seconds = 0.0
                t0 = clock()
                run(convert)
                times.append((clock() - t0, gc_seconds))
            cpu, in_gc = min(times)
            print(f"  {name:<14}{cpu / total * 1e6:7.3f}  (in the GC {in_gc / total * 1e6:.3f})")
        gc.callbacks.remove(on_gc)
        if profile:
            prof = cProfile.Profile()
            prof.runcall(run, to_arrow)
            pstats.Stats(prof).sort_stats("tottime").print_stats(12)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--read", type=int, default=0, metavar="RECORDS")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    bench(args.rows, args.runs)
    if args.read:
        read(args.read, args.profile)


if __name__ == "__main__":
    main()
