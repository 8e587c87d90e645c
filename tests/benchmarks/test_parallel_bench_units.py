"""The ParallelConsumer benchmark's pure parts: cases, ceilings, the table. No broker."""

from __future__ import annotations

import dataclasses

import pytest

from benchmarks.parallel_bench import (
    Case,
    Result,
    cases,
    main,
    parse_list,
    render_table,
    sleeps_alone,
)


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
    assert [c.in_flight(12) for c in todo] == [1, 50, 1_000, 12, 12]


def test_table_and_rates() -> None:
    r = Result("key @ 50", 5_000, 2.0, 0.1, Case("key", 50).ceiling(0.02, 12))
    assert r.rate == 2_500 and r.cpu_us_per_record == pytest.approx(20)
    assert r.client_cpu_us is None
    table = render_table([r])
    assert r.core_share == pytest.approx(0.05)
    assert "| key @ 50 | 2,500 | 2,500 | 100% | - | 20.0 | - | - | 5% | - |" in table
    split = dataclasses.replace(r, sleep_cpu_us=6.5, sleep_rate=2_400.4, load=3.25)
    assert split.client_cpu_us == pytest.approx(13.5)
    row = "| key @ 50 | 2,500 | 2,500 | 100% | 2,400 | 20.0 | 6.5 | 13.5 | 5% | 3.2 |"
    assert row in render_table([split])


async def test_the_sleep_reference_counts_cpu_per_sleep() -> None:
    """The handler's own cost, no Kafka: 20 coroutines sleeping 10 ms for 0.1 s."""
    per_sleep, rate = await sleeps_alone(20, 0.1, 0.01)
    assert 0 < per_sleep < 10_000
    assert 0 < rate <= 20 / 0.01 * 1.05


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="subset of"):
        parse_list("key,keys", ("key", "partition"))
    with pytest.raises(SystemExit):
        main(["--concurrency", "0"])
    with pytest.raises(SystemExit):
        main(["--orderings", "random"])
