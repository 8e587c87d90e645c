"""``python -m benchmarks``: aiokproto against its peers on one local broker.

``make bench`` runs ``--quick`` (a few minutes on a 2-core box), ``make bench-full``
everything. Two parts:

* the record codec against aiokafka's (``benchmarks.records_bench``, no broker), and
* the clients: aiokproto, confluent-kafka (sync and ``confluent_kafka.aio``), aiokafka,
  kafka-python and Kafka's Java perf tools, each run in its own process, interleaved,
  repeated, validated (``benchmarks.runner``).

Results go to ``benchmarks/results/``: ``clients-<UTC time>.json``, ``latest.json``,
``latest.md``, ``latest-readme.md`` (a snippet for README) and ``latest-*.png``.
A broker is started unless ``--bootstrap-servers`` or ``$KAFKA_BOOTSTRAP_SERVERS`` is set.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from benchmarks.clients import ADAPTERS
from benchmarks.scenarios import Scenario, full_matrix, quick_matrix


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the few-minute subset (make bench)")
    ap.add_argument("--runs", type=int, default=3,
                    help="runs per scenario and client (3; fewer only to try things out)")
    # aiokproto-base only when there is another checkout to run (make bench-base)
    default_clients = [c for c in ADAPTERS
                       if c != "aiokproto-base" or os.environ.get("BENCH_AIOKPROTO_BASE")]
    ap.add_argument("--clients", default=",".join(default_clients),
                    help=f"comma-separated subset of: {', '.join(ADAPTERS)}")
    ap.add_argument("--scenario", action="append", default=[],
                    help="only scenarios whose id contains this text (repeatable)")
    ap.add_argument("--only", choices=("all", "clients", "records"), default="all")
    ap.add_argument("--bootstrap-servers", default=None,
                    help="use this Kafka instead of starting one")
    ap.add_argument("--out-dir", type=Path, default=Path(__file__).parent / "results")
    ap.add_argument("--list", action="store_true", help="print the scenarios and exit")
    args = ap.parse_args(argv)
    unknown = [c for c in args.clients.split(",") if c and c not in ADAPTERS]
    if unknown:
        ap.error(f"unknown clients {unknown}; known: {', '.join(ADAPTERS)}")
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    return args


def select_scenarios(quick: bool, filters: list[str]) -> list[Scenario]:
    matrix = quick_matrix() if quick else full_matrix()
    if not filters:
        return matrix
    return [s for s in matrix if any(f in s.id for f in filters)]


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    scenarios = select_scenarios(args.quick, args.scenario)
    if args.list:
        for s in scenarios:
            print(f"{s.id}  ({s.records} records)")
        return 0
    began = time.monotonic()
    extra = ""
    if args.only in ("all", "records"):
        from benchmarks import records_bench

        out = args.out_dir / "records.json"
        records_bench.main([*(["--quick"] if args.quick else []), "--out", str(out)])
        data = json.loads(out.read_text(encoding="utf-8"))
        extra = ("\n## Record codec (no broker)\n\nRecords/s of building and parsing "
                 "RecordBatch v2, median CPU time of "
                 f"{data['meta']['runs']} runs (`benchmarks/records_bench.py`).\n\n"
                 + records_bench.render(data["results"]) + "\n")
    if args.only in ("all", "clients"):
        from benchmarks import report, runner

        clients = [c for c in args.clients.split(",") if c]
        opts = runner.RunOptions(scenarios=scenarios, clients=clients, runs=args.runs,
                                 bootstrap_servers=args.bootstrap_servers, quick=args.quick)
        doc = runner.run_session(opts)
        paths = report.write_outputs(doc, args.out_dir, extra)
        print(paths["markdown"].read_text(encoding="utf-8"))
        for name, path in paths.items():
            print(f"wrote {name}: {path}", file=sys.stderr)
    print(f"benchmarks took {time.monotonic() - began:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
