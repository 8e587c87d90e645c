"""benchmarks.many_partitions: its pure parts (keys, the summary table). No broker."""

from __future__ import annotations

import math

import pytest

from benchmarks.many_partitions import KEYS, cpu_per_million, keys_for, main, summary


def test_keys_cycle_through_every_key() -> None:
    keys = keys_for(len(KEYS) + 3)
    assert keys[: len(KEYS)] == KEYS and keys[len(KEYS) :] == KEYS[:3]
    assert len(set(KEYS)) == 10_000


def test_cpu_per_million_is_the_median_over_runs() -> None:
    runs = [{"cpu_s": 0.3, "records": 100_000}, {"cpu_s": 0.5, "records": 100_000},
            {"cpu_s": 2.0, "records": 100_000}]  # fmt: skip
    assert cpu_per_million(runs) == pytest.approx(5.0)


def test_summary_shows_growth_from_the_first_count_to_the_last() -> None:
    def run(cpu: float) -> dict[str, float]:
        return {"cpu_s": cpu, "records": 1_000_000, "wall_s": 1.0}

    lines = summary(
        {"a": {1: [run(2.0)], 1000: [run(3.0)]}, "b": {1: [run(1.0)], 1000: []}}, [1, 1000]
    )
    assert "p1000 CPU s/M" in lines[0]
    assert lines[1].split()[-1] == "1.50x"
    assert lines[2].split()[-1] == f"{math.nan:.2f}x"  # a count without runs: no growth


def test_bad_arguments_are_refused_before_any_broker() -> None:
    for argv in (["--partitions", "0"], ["--partitions", "x"], ["--clients", "nope"]):
        with pytest.raises(SystemExit):
            main(argv)
