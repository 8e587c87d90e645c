"""benchmarks.defaults: its pure parts (record counts, run order, figures, the table).
No broker."""

from __future__ import annotations

import pytest

from benchmarks.defaults import (
    MIN_RECORDS,
    check_last,
    default_mb,
    figures,
    main,
    records_for,
    rotated,
    summary,
)


def test_records_make_the_megabytes_asked_for_with_a_floor() -> None:
    assert records_for(100, 30) == 300_000
    assert records_for(1_000, 30) == 30_000
    assert records_for(100_000, 30) == 300
    assert records_for(100_000, 1) == MIN_RECORDS  # 10 records would be a batch or two
    for size, mb in ((0, 1.0), (100, 0.0), (100, -1.0)):
        with pytest.raises(ValueError):
            records_for(size, mb)


def test_bigger_values_get_more_megabytes_by_default() -> None:
    assert [default_mb(s) for s in (100, 999, 1_000, 99_999, 100_000)] == [
        50.0, 50.0, 100.0, 100.0, 300.0,
    ]  # fmt: skip
    assert records_for(100_000, default_mb(100_000)) == 3_000


def test_each_run_starts_one_client_further_along() -> None:
    clients = ["a", "b", "c"]
    assert [rotated(clients, i) for i in range(4)] == [
        ["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"],
    ]  # fmt: skip
    assert rotated([], 2) == []


def _run(wall: float, cpu: float, records: int = 1_000, size: int = 1_000) -> dict[str, float]:
    return {"wall_s": wall, "cpu_s": cpu, "records": records, "size": size}


def test_figures_are_medians_per_record_and_per_megabyte() -> None:
    f = figures([_run(1.0, 0.5), _run(2.0, 0.2), _run(4.0, 0.1)])  # 1 MB of values each
    assert f["records_s"] == pytest.approx(500.0)
    assert f["mb_s"] == pytest.approx(0.5)
    assert f["cpu_us_record"] == pytest.approx(200.0)
    assert f["cpu_ms_mb"] == pytest.approx(200.0)
    with pytest.raises(ValueError):
        figures([])


def test_summary_gives_ratios_to_confluent_kafka() -> None:
    results = {
        1_000: {
            "aiokproto": [_run(1.0, 0.2)],
            "confluent-kafka": [_run(2.0, 0.4)],
            "aiokafka": [],  # a client without runs gets no row
        },
        100: {"aiokproto": [_run(1.0, 0.1, size=100)], "confluent-kafka": []},
    }
    lines = summary(results, load=3.25)
    assert "load average 3.2" in lines[0] and "x rate" in lines[1]
    ours, theirs, alone = lines[2].split(), lines[3].split(), lines[4].split()
    assert ours[:2] == ["1,000", "aiokproto"] and ours[-2:] == ["2.00x", "0.50x"]
    assert theirs[1] == "confluent-kafka" and theirs[-2:] == ["1.00x", "1.00x"]
    assert len(lines) == 5 and alone[-2:] == ["nanx", "nanx"]  # no reference: no ratio


def test_a_run_that_lost_or_added_records_is_refused() -> None:
    check_last(200, 200)  # the warm-up record is offset 0
    for offset in (199, 201, None):
        with pytest.raises(RuntimeError, match="not 200"):
            check_last(offset, 200)


def test_bad_arguments_are_refused_before_any_broker() -> None:
    for argv in (["--sizes", "0"], ["--sizes", "x"], ["--clients", "nope"], ["--mb", "0"],
                 ["--runs", "0"]):  # fmt: skip
        with pytest.raises(SystemExit):
            main(argv)
