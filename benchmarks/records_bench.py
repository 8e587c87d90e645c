"""Record codec throughput: aiokproto vs aiokafka (C extension and pure Python).

Measures building (producer side: append records into size-bounded batches, build
each) and parsing (consumer side: split a fetch buffer into batches, iterate every
record and touch its value) for 100 B and 1 KB values, uncompressed and with every
codec. Implementations are interleaved within each run; each number is the median of
``--runs`` runs of process CPU time, and every run is validated (record count and
values) so a broken codec cannot post a fast number.

    .venv/bin/python -m benchmarks.records_bench [--quick] [--runs N]

Prints a Markdown table and writes ``benchmarks/results/records.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiokafka.record import default_records as ak  # type: ignore[import-untyped]

from aiokproto.records import RecordBatchBuilder, read_batches

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
BATCH_SIZE = 256 * 1024
BASE_TS = 1_700_000_000_000
# CPU time of this process: the numbers stay comparable on a shared, busy machine
# (wall-clock would charge us for other processes' time slices).
clock = time.process_time


def make_values(n: int, size: int) -> list[bytes]:
    filler = b" lorem ipsum dolor sit amet, consectetur adipiscing elit" * (size // 40 + 2)
    return [(b"%010d" % (i * 7919) + filler)[:size] for i in range(n)]


# -- build ------------------------------------------------------------------------------


def build_ours(values: list[bytes], codec: int) -> list[bytes | bytearray]:
    out = []
    b = RecordBatchBuilder(batch_size=BATCH_SIZE, compression=codec)
    append = b.append
    for i, v in enumerate(values):
        if append(BASE_TS + (i >> 6), None, v) is None:
            out.append(b.build())
            b = RecordBatchBuilder(batch_size=BATCH_SIZE, compression=codec)
            append = b.append
            append(BASE_TS + (i >> 6), None, v)
    out.append(b.build())
    return out


def _build_aiokafka(cls: Any) -> Callable[[list[bytes], int], list[bytes]]:
    def build(values: list[bytes], codec: int) -> list[bytes]:
        out = []
        b = cls(2, codec, 0, -1, -1, -1, BATCH_SIZE)
        append = b.append
        offset = 0
        for i, v in enumerate(values):
            if append(offset, BASE_TS + (i >> 6), None, v, []) is None:
                out.append(bytes(b.build()))
                b = cls(2, codec, 0, -1, -1, -1, BATCH_SIZE)
                append = b.append
                offset = 0
                append(offset, BASE_TS + (i >> 6), None, v, [])
            offset += 1
        out.append(bytes(b.build()))
        return out

    return build


# -- parse ------------------------------------------------------------------------------


def parse_ours(buffer: bytes, batches: list[bytes]) -> tuple[int, int]:
    n = total = 0
    for batch in read_batches(memoryview(buffer)):
        for r in batch:
            total += len(r.value)  # type: ignore[arg-type]
            n += 1
    return n, total


def _parse_aiokafka(cls: Any) -> Callable[[bytes, list[bytes]], tuple[int, int]]:
    # their reader takes one batch at a time; splitting is done outside the timing
    def parse(buffer: bytes, batches: list[bytes]) -> tuple[int, int]:
        n = total = 0
        for raw in batches:
            batch = cls(raw)
            for r in batch:
                total += len(r.value)
                n += 1
        return n, total

    return parse


IMPLS: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
    "aiokproto": (build_ours, parse_ours),
    "aiokafka-c": (_build_aiokafka(ak.DefaultRecordBatchBuilder),
                   _parse_aiokafka(ak.DefaultRecordBatch)),
    "aiokafka-py": (_build_aiokafka(ak._DefaultRecordBatchBuilderPy),
                    _parse_aiokafka(ak._DefaultRecordBatchPy)),
}


def validate_built(batches: list[bytes], values: list[bytes]) -> None:
    got = [r.value for raw in batches for batch in read_batches(raw) for r in batch]
    if got != values:
        raise AssertionError("built batches do not round-trip")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small CI-sized run")
    ap.add_argument("--runs", type=int, default=None)
    ap.add_argument("--codecs", default=",".join(CODECS))
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "records.json"))
    args = ap.parse_args(argv)
    runs = args.runs or (3 if args.quick else 5)
    sizes = {100: 20_000 if args.quick else 200_000, 1000: 5_000 if args.quick else 50_000}
    codecs = [c for c in args.codecs.split(",") if c]

    results: list[dict[str, Any]] = []
    for size, n in sizes.items():
        values = make_values(n, size)
        for cname in codecs:
            codec = CODECS[cname]
            fetch_batches = build_ours(values, codec)
            fetch_buffer = b"".join(fetch_batches)
            times: dict[tuple[str, str], list[float]] = {}
            for _ in range(runs):
                for impl, (build, parse) in IMPLS.items():  # interleaved per run
                    t0 = clock()
                    built = build(values, codec)
                    t1 = clock()
                    validate_built(built, values)
                    times.setdefault((impl, "build"), []).append(t1 - t0)
                    t0 = clock()
                    count, total = parse(fetch_buffer, fetch_batches)
                    t1 = clock()
                    if count != n or total != n * size:
                        raise AssertionError(f"{impl} parsed {count} records, {total} bytes")
                    times.setdefault((impl, "parse"), []).append(t1 - t0)
            for (impl, op), ts in times.items():
                med = statistics.median(ts)
                results.append({
                    "impl": impl, "op": op, "value_size": size, "codec": cname,
                    "records": n, "runs": len(ts), "median_s": med,
                    "records_per_s": n / med, "mb_per_s": n * size / med / 1e6,
                    "all_s": ts,
                })
            print(f"  done {size} B {cname}", file=sys.stderr)

    print(render(results))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"python": sys.version, "machine": platform.machine(),
            "batch_size": BATCH_SIZE, "quick": args.quick, "runs": runs,
            "clock": "time.process_time (CPU seconds of this process)",
            "records": "no key, no headers, value of value_size bytes"}
    out.write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    print(f"\nwrote {out}", file=sys.stderr)


def render(results: list[dict[str, Any]]) -> str:
    index = {(r["impl"], r["op"], r["value_size"], r["codec"]): r for r in results}
    lines = [
        "| op | value | codec | aiokproto rec/s | MB/s | aiokafka C rec/s | ours/C "
        "| aiokafka py rec/s | ours/py |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    keys = sorted({(r["op"], r["value_size"], r["codec"]) for r in results},
                  key=lambda k: (k[0], k[1], list(CODECS).index(k[2])))
    for op, size, codec in keys:
        ours = index[("aiokproto", op, size, codec)]
        c = index[("aiokafka-c", op, size, codec)]
        py = index[("aiokafka-py", op, size, codec)]
        lines.append(
            f"| {op} | {size} B | {codec} | {ours['records_per_s']:,.0f} "
            f"| {ours['mb_per_s']:,.1f} | {c['records_per_s']:,.0f} "
            f"| {ours['records_per_s'] / c['records_per_s']:.2f} "
            f"| {py['records_per_s']:,.0f} "
            f"| {ours['records_per_s'] / py['records_per_s']:.2f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
