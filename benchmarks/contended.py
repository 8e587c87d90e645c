"""Latency under CPU contention: the latency scenarios with busy-loop processes beside them.

A service rarely has the machine to itself. This runs ``python -m benchmarks`` on the
latency scenarios (1,000 records/s, producer and consumer in one process, linger 0)
while ``--busy`` processes (2 by default: as many as a 2-core CI machine has cores)
spin on the CPU, each at the default priority, so every client and the broker compete
for the CPU with them (issue 33: aiokproto's p50 went from 0.65 to 1.5-4.7 ms there,
librdkafka's stayed near 0.6 ms). The busy processes start before the run and are
stopped after it, whatever happens; the load average is printed before and after.

    .venv/bin/python -m benchmarks.contended [--busy 2] [--runs 3]
        [--clients aiokproto,confluent-kafka,aiokafka] [--out-dir DIR] [--bootstrap-servers H:P]

The results (JSON, markdown) go to ``--out-dir`` (``benchmarks/results/contended`` by
default), apart from the uncontended run's.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

DEFAULT_CLIENTS = "aiokproto,confluent-kafka,aiokafka"
# a pure-Python spin: holds a CPU without touching memory or the disk
_SPIN = "while True:\n    pass\n"


@contextmanager
def busy_loops(count: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``count`` processes that spin on the CPU until the block ends."""
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(count):
            procs.append(subprocess.Popen([sys.executable, "-c", _SPIN]))
        yield procs
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()


def harness_args(args: argparse.Namespace) -> list[str]:
    """The ``python -m benchmarks`` command line for the contended run: the quick
    matrix's latency scenario (100 B, 1,000 records/s, 5,000 records)."""
    cmd = [sys.executable, "-m", "benchmarks", "--quick", "--only", "clients"]
    cmd += ["--scenario", "latency", "--runs", str(args.runs), "--clients", args.clients]
    cmd += ["--out-dir", str(args.out_dir)]
    if args.bootstrap_servers:
        cmd += ["--bootstrap-servers", args.bootstrap_servers]
    return cmd


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--busy", type=int, default=2, help="busy-loop processes (default 2)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--clients", default=DEFAULT_CLIENTS)
    ap.add_argument(
        "--out-dir", type=Path, default=Path(__file__).parent / "results" / "contended"
    )
    ap.add_argument("--bootstrap-servers")
    args = ap.parse_args(argv)
    if args.busy < 0 or args.runs < 1:
        ap.error("--busy must be >= 0 and --runs >= 1")
    print(f"load average before: {os.getloadavg()[0]:.1f}; {args.busy} busy-loop processes")
    with busy_loops(args.busy):
        code = subprocess.run(harness_args(args), check=False).returncode
        print(f"load average at the end (busy loops included): {os.getloadavg()[0]:.1f}")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
