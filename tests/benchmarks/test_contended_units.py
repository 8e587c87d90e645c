"""benchmarks.contended: the harness command line and the busy loops. No broker."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from benchmarks.contended import busy_loops, harness_args, main


def test_the_contended_run_is_the_quick_latency_scenario() -> None:
    args = argparse.Namespace(
        runs=3, clients="aiokproto,confluent-kafka", out_dir=Path("/tmp/x"),
        bootstrap_servers="127.0.0.1:9092",
    )  # fmt: skip
    cmd = harness_args(args)
    assert cmd[1:] == [
        "-m", "benchmarks", "--quick", "--only", "clients", "--scenario", "latency",
        "--runs", "3", "--clients", "aiokproto,confluent-kafka", "--out-dir", "/tmp/x",
        "--bootstrap-servers", "127.0.0.1:9092",
    ]  # fmt: skip


def test_busy_loops_spin_until_the_block_ends() -> None:
    with busy_loops(2) as procs:
        assert len(procs) == 2 and all(p.poll() is None for p in procs)
    assert all(p.returncode is not None for p in procs)


def test_busy_loops_are_stopped_when_the_run_raises() -> None:
    with pytest.raises(RuntimeError), busy_loops(1) as procs:
        raise RuntimeError("the run failed")
    assert procs[0].returncode is not None


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(SystemExit):
        main(["--busy", "-1"])
