"""Spark sink, executor side, without Spark: Arrow batches into Kafka, CPU per row.

Writes ``--rows`` values of 100 B (no key, no partition: the cluster benchmark's
write) as Arrow batches of 10,000 rows (Spark's ``maxRecordsPerBatch``) through the
sink's ``write_records`` into a new 12-partition topic of the local test broker (the
running one, else one started and stopped here). Reports this process's CPU time per
row (user + system, best of ``--runs``): the column conversion alone
(``arrow_batch``) and the whole write; ``--profile`` adds the top lines of a cProfile
of one write.

    .venv/bin/python -m benchmarks.spark_sink_bench [--rows N] [--runs N] [--batch-size B]
        [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import uuid
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]

from aiokproto.admin import Admin, NewTopic
from aiokproto.spark.options import SINK_BATCH_SIZE
from aiokproto.spark.sink import arrow_batch, write_records
from benchmarks.local_broker import local_broker
from benchmarks.spark_arrow_bench import best  # process CPU time, best of runs

BATCH_ROWS = 10_000


def arrow_batches(rows: int, value_size: int = 100) -> list[Any]:
    """``rows`` distinct values in batches of BATCH_ROWS (built once, reused)."""
    out = []
    for start in range(0, rows, BATCH_ROWS):
        n = min(BATCH_ROWS, rows - start)
        values = [b"%010d" % (start + i) + b"x" * (value_size - 10) for i in range(n)]
        out.append(pa.RecordBatch.from_arrays([pa.array(values, pa.binary())], ["value"]))
    return out


async def create_topic(bootstrap: str, topic: str) -> None:
    async with Admin(bootstrap_servers=bootstrap) as admin:
        await admin.create_topics([NewTopic(topic, 12, 1)])


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--batch-size", type=int, default=None, help="producer batch_size (default: the sink's)"
    )
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    batches = arrow_batches(args.rows)
    with local_broker() as bootstrap:
        topic = f"sink-bench-{uuid.uuid4().hex[:8]}"
        asyncio.run(create_topic(bootstrap, topic))
        # the sink's producer options: its default batch size unless told
        client = {"bootstrap_servers": bootstrap, "batch_size": args.batch_size or SINK_BATCH_SIZE}

        def convert() -> None:
            for batch in batches:
                arrow_batch(batch)

        def write() -> None:
            written = asyncio.run(
                write_records(client, topic, (arrow_batch(b) for b in batches))
            ).records
            assert written == args.rows, written

        write()  # connections, the broker's first segment
        rows = args.rows
        print(f"sink: {rows} rows of 100 B, Arrow batches of {BATCH_ROWS}, batch_size ", end="")
        print(f"{client['batch_size']} (µs/row, CPU, best of {args.runs}):")
        print(f"  arrow_batch only  {best(convert, args.runs) / rows * 1e6:7.3f}")
        print(f"  whole write       {best(write, args.runs) / rows * 1e6:7.3f}")
        if args.profile:
            prof = cProfile.Profile()
            prof.runcall(write)
            pstats.Stats(prof).sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
