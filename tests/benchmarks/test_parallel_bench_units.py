"""The ParallelConsumer benchmark's pure parts: cases, ceilings, the table. No broker."""

from __future__ import annotations

import pytest

from benchmarks.parallel_bench import Case, Result, cases, main, parse_list, render_table


def test_cases_and_their_ceilings() -> None:
    todo = cases(["key", "partition"], [50, 1_000])
    assert [c.name for c in todo] == [
        "sequential async for",
        "key @ 50",
        "key @ 1000",
        "partition @ 50",
        "partition @ 1000",
    ]
    assert [c.ceiling(0.02, 12) for c in todo] == pytest.approx([50, 2_500, 50_000, 600, 600])


def test_table_and_rates() -> None:
    r = Result("key @ 50", 5_000, 2.0, 0.1, Case("key", 50).ceiling(0.02, 12))
    assert r.rate == 2_500 and r.cpu_us_per_record == pytest.approx(20)
    table = render_table([r])
    assert "| key @ 50 | 2,500 | 2,500 | 100% | 20 |" in table


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="subset of"):
        parse_list("key,keys", ("key", "partition"))
    with pytest.raises(SystemExit):
        main(["--concurrency", "0"])
    with pytest.raises(SystemExit):
        main(["--orderings", "random"])
