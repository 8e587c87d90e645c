"""The benchmark harness's pure parts: stats, scenarios, payloads, validation, parsers,
summaries and rendering. No broker."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from benchmarks import java_tools, machine, report
from benchmarks.clients import ADAPTERS
from benchmarks.payloads import (
    POOL_SIZE,
    STAMP_SIZE,
    payload_file_bytes,
    read_stamp,
    stamp,
    value_pool,
)
from benchmarks.scenarios import (
    TXN_RECORDS,
    Job,
    Scenario,
    full_matrix,
    job_timeout_s,
    quick_matrix,
    run_order,
)
from benchmarks.stats import latency_summary, percentile, spread
from benchmarks.validation import check_run

# -- stats ------------------------------------------------------------------------------


def test_spread_median_and_range() -> None:
    s = spread([3.0, 1.0, 2.0, 10.0])
    assert (s.median, s.low, s.high, s.runs) == (2.5, 1.0, 10.0, 4)
    assert s.rel_spread == pytest.approx(9 / 2.5)
    with pytest.raises(ValueError):
        spread([])


def test_percentile_nearest_rank() -> None:
    values = [float(i) for i in range(1, 1001)]  # 1..1000
    assert percentile(values, 50) == 500
    assert percentile(values, 99) == 990
    assert percentile(values, 99.9) == 999
    assert percentile(values, 100) == 1000
    assert percentile(values, 0) == 1
    assert percentile([7.0], 99.9) == 7.0
    with pytest.raises(ValueError):
        percentile(values, 101)
    with pytest.raises(ValueError):
        percentile([], 50)


def test_latency_summary_orders_its_input() -> None:
    s = latency_summary([5.0, 1.0, 3.0, 2.0, 4.0])
    assert s["p50_ms"] == 3.0
    assert s["max_ms"] == 5.0
    assert s["mean_ms"] == 3.0


# -- scenarios ---------------------------------------------------------------------------


def test_run_order_rotates_each_client_through_every_position() -> None:
    clients = ["a", "b", "c", "d"]
    orders = [run_order(clients, r) for r in range(4)]
    assert orders[0] == ["a", "b", "c", "d"]
    assert orders[1] == ["b", "c", "d", "a"]
    for client in clients:
        assert sorted(o.index(client) for o in orders) == [0, 1, 2, 3]
    assert run_order([], 3) == []


def test_scenario_ids_are_unique_and_readable() -> None:
    full = full_matrix()
    ids = [s.id for s in full]
    assert len(ids) == len(set(ids))
    assert "produce 100B acks=1 p1 none" in ids
    assert "produce 1KB acks=all p8 zstd" in ids
    assert "consume 1KB p8 lz4" in ids
    # full = every size x acks x partitions x codec for produce, same minus acks for consume
    assert sum(s.kind == "produce" and not s.txn_records for s in full) == 2 * 2 * 2 * 3
    assert "produce txn 100B p1 none" in ids
    assert sum(s.kind == "consume" for s in full) == 2 * 2 * 3
    assert any(s.kind == "latency" for s in full)


def test_quick_matrix_is_a_subset_of_the_issue_list() -> None:
    ids = [s.id for s in quick_matrix()]
    assert ids[:3] == [
        "produce 100B acks=1 p1 none",
        "produce 100B acks=1 p1 zstd",
        "produce 1KB acks=all p8 none",
    ]
    assert any(i.startswith("consume 100B") for i in ids)
    assert any(i.startswith("latency") for i in ids)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"kind": "fetch", "value_size": 100, "records": 10},
        {"kind": "produce", "value_size": 100, "records": 10, "compression": "brotli"},
        {"kind": "produce", "value_size": 100, "records": 10, "acks": "2"},
        {"kind": "produce", "value_size": 8, "records": 10},
        {"kind": "produce", "value_size": 100, "records": 0},
        {"kind": "latency", "value_size": 100, "records": 10},  # no rate
        {"kind": "produce", "value_size": 100, "records": 10, "rate": 5},
    ],
)
def test_bad_scenarios_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        Scenario(**kwargs)


def test_transactional_scenarios() -> None:
    s = Scenario("produce", 100, 2_500, acks="all", txn_records=1000)
    assert s.id == "produce txn 100B p1 none"
    assert (s.entry, s.transactions) == ("produce_txn", 3)  # the last one is short
    assert (PRODUCE.entry, PRODUCE.transactions) == ("produce", 0)
    assert any(q.txn_records == TXN_RECORDS for q in quick_matrix())
    back = Job.from_json(Job("aiokafka", s, "b", "t", 0, 1.0).to_json())
    assert back.scenario == s


@pytest.mark.parametrize(
    "kwargs",
    [
        {"kind": "consume", "value_size": 100, "records": 10, "txn_records": 5},
        {"kind": "produce", "value_size": 100, "records": 10, "txn_records": 5},  # acks=1
        {"kind": "produce", "value_size": 100, "records": 10, "acks": "all",
         "txn_records": -1},
    ],
)
def test_bad_transactional_scenarios_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        Scenario(**kwargs)


def test_only_transactional_adapters_get_transactional_scenarios() -> None:
    txn = Scenario("produce", 100, 10, acks="all", txn_records=5)
    able = {name for name, a in ADAPTERS.items() if a.supports(txn)}
    assert {"aiokproto", "confluent-kafka", "aiokafka"} <= able
    assert "java-perf" not in able and "kafka-python" not in able
    for name in able:
        assert hasattr(importlib.import_module(ADAPTERS[name].module), "produce_txn"), name
    assert all(a.supports(PRODUCE) == ("produce" in a.kinds) for a in ADAPTERS.values())


def test_job_round_trips_through_json() -> None:
    s = Scenario("latency", 100, 500, partitions=2, acks="all", rate=250)
    job = Job("aiokafka", s, "127.0.0.1:9092", "t", 2, job_timeout_s(s), group_id="g")
    back = Job.from_json(job.to_json())
    assert back == job
    assert job.to_json()["linger_ms"] == 0  # latency runs do not linger
    assert Job.from_json(Job("x", quick_matrix()[0], "b", "t", 0, 1.0).to_json()).scenario \
        .linger_ms == 5


def test_timeouts_are_generous_but_bounded() -> None:
    for s in full_matrix():
        t = job_timeout_s(s)
        assert 60 <= t <= 600, (s.id, t)


# -- payloads ----------------------------------------------------------------------------


@pytest.mark.parametrize("size", [16, 100, 1000])
def test_value_pool_sizes_and_delimiter(size: int) -> None:
    pool = value_pool(size)
    assert len(pool) == POOL_SIZE
    assert {len(v) for v in pool} == {size}
    assert len(set(pool)) == POOL_SIZE
    assert value_pool(size) == pool  # deterministic
    data = payload_file_bytes(pool)
    assert data.split(b"\n") == pool


def test_payload_file_refuses_the_delimiter() -> None:
    with pytest.raises(ValueError):
        payload_file_bytes([b"a\nb"])


def test_values_compress_but_not_to_nothing() -> None:
    import zstandard

    raw = b"".join(value_pool(1000)[:200])
    ratio = len(raw) / len(zstandard.ZstdCompressor().compress(raw))
    assert 1.3 < ratio < 4


def test_stamp_round_trip_keeps_length() -> None:
    v = value_pool(100)[3]
    s = stamp(v, 12345, 987654321)
    assert len(s) == len(v)
    assert s[STAMP_SIZE:] == v[STAMP_SIZE:]
    assert read_stamp(s) == (12345, 987654321)
    assert read_stamp(stamp(v, -1, 0)) == (-1, 0)


# -- validation --------------------------------------------------------------------------

PRODUCE = Scenario("produce", 100, 1000)
CONSUME = Scenario("consume", 100, 1000)
LATENCY = Scenario("latency", 100, 1000, rate=100)


def good_produce() -> dict[str, Any]:
    return {"acked": 1000, "failed": 0, "elapsed_s": 0.5, "cpu_s": 0.4, "max_rss_kb": 1}


def test_valid_produce_run() -> None:
    assert check_run(PRODUCE, good_produce(), 1000) == []


@pytest.mark.parametrize(
    ("change", "delta", "needle"),
    [
        ({"acked": 999}, 1000, "999 of 1000 records acknowledged"),
        ({"failed": 3, "delivery_error": "boom"}, 1000, "3 delivery errors (first: boom)"),
        ({}, 999, "end offsets grew by 999, expected 1000"),
        ({}, 2000, "end offsets grew by 2000"),
        ({}, None, "could not be read"),
        ({"elapsed_s": None}, 1000, "no measured time"),
        ({"unflushed": 5}, 1000, "5 records still queued"),
        ({"error": "ImportError: nope"}, 1000, "client error: ImportError: nope"),
    ],
)
def test_invalid_produce_runs(change: dict[str, Any], delta: int | None, needle: str) -> None:
    reasons = check_run(PRODUCE, {**good_produce(), **change}, delta)
    assert reasons
    assert any(needle in r for r in reasons), reasons


TXN = Scenario("produce", 100, 2_500, acks="all", txn_records=1000)  # 3 transactions
TXN8 = Scenario("produce", 100, 2_500, partitions=8, acks="all", txn_records=1000)


def good_txn() -> dict[str, Any]:
    return {**good_produce(), "acked": 2_500, "transactions": 3}


def test_valid_transactional_runs() -> None:
    # the records plus one commit marker per transaction (and partition it wrote to)
    assert check_run(TXN, good_txn(), 2_503, 2_500) == []
    assert check_run(TXN8, good_txn(), 2_503, 2_500) == []
    assert check_run(TXN8, good_txn(), 2_524, 2_500) == []


@pytest.mark.parametrize(
    ("scenario", "change", "delta", "committed", "needle"),
    [
        (TXN, {}, 2_500, 2_500, "grew by 2500, expected 2503 (2500 records and a commit"),
        (TXN, {}, 2_504, 2_500, "grew by 2504, expected 2503"),
        (TXN8, {}, 2_525, 2_500, "expected 2503 to 2524"),
        # an aborted transaction moves the end offsets too: only reading back tells
        (TXN, {}, 2_503, 1_500, "a read_committed consumer read 1500 records, expected 2500"),
        (TXN, {}, 2_503, None, "could not be read back"),
        (TXN, {}, None, 2_500, "end offsets could not be read"),
        (TXN, {"transactions": 2}, 2_503, 2_500, "2 of 3 transactions committed"),
        (TXN, {"acked": 2_000}, 2_503, 2_500, "2000 of 2500 records acknowledged"),
    ],
)
def test_invalid_transactional_runs(
    scenario: Scenario, change: dict[str, Any], delta: int | None, committed: int | None,
    needle: str,
) -> None:
    reasons = check_run(scenario, {**good_txn(), **change}, delta, committed)
    assert any(needle in r for r in reasons), reasons


def test_consume_validation() -> None:
    good = {"consumed": 1000, "bytes": 100_000, "bad_size": 0, "elapsed_s": 1.0}
    assert check_run(CONSUME, good, None) == []
    assert "consumed 1001 records" in check_run(CONSUME, {**good, "consumed": 1001}, None)[0]
    assert check_run(CONSUME, {**good, "bytes": 99_999}, None)
    assert check_run(CONSUME, {**good, "bad_size": 2}, None)
    # the Java tool reports MB with 4 decimals: a tolerance it declares itself
    approx = {**good, "bytes": 99_950, "bytes_resolution": 105}
    assert check_run(CONSUME, approx, None) == []
    assert check_run(CONSUME, {**approx, "bytes": 99_800}, None)
    timed = {**good, "measured_records": 900}
    assert check_run(CONSUME, timed, None) == []
    assert "too few records to time" in check_run(CONSUME, {**timed, "measured_records": 0},
                                                  None)[0]


def test_consumed_counts_sizes_tombstones_and_any_iterable() -> None:
    from benchmarks.clients.common import Consumed

    seen = Consumed(3)
    seen.add([b"abc", b"xyz"])
    seen.add(v for v in [b"abc", b"ab", None, b""])  # a generator, a short one, a tombstone
    seen.add([])
    assert seen.fields() == {"consumed": 6, "bytes": 3 + 3 + 3 + 2, "bad_size": 3}


# ShareConsumerPerformance's output (4.3.1): per-second reports, then the summary
_EACH = " for share consumer 1"
JAVA_SHARE_PERF = "\n".join(
    [
        "start.time, end.time, data.consumed.in.MB, MB.sec, nMsg.sec, data.consumed.in.nMsg, "
        "fetch.time.ms",
        "2026-11-23 14:33:41:839, 2026-11-23 14:33:47:103, 0.0001, 0.0000, 0.1900, 1, 5264" + _EACH,
        "2026-11-23 14:33:47:103, 2026-11-23 14:33:48:104, 4.4753, 4.4707, 46879.1, 46927, 1001"
        + _EACH,
        "2026-11-23 14:33:41:545, 2026-11-23 14:33:49:545, 19.0735, 2.3983, 25147.7, 200000, 8000",
    ]
)


def test_share_bench_reads_java_share_consumer_performance() -> None:
    from benchmarks.share_bench import parse_java

    whole, steady, first = parse_java(JAVA_SHARE_PERF, 200_000)
    assert whole == pytest.approx(200_000 / 8.0)
    # from the end of the first report with records (47.103) to the last record (49.545)
    assert steady == pytest.approx(199_999 / 2.442)
    assert first == pytest.approx(5.558)
    with pytest.raises(RuntimeError, match="did not report 300000 records"):
        parse_java(JAVA_SHARE_PERF, 300_000)
    with pytest.raises(RuntimeError):
        parse_java("Exception in thread main", 1)


def test_consume_rates_use_the_records_after_the_first_batch() -> None:
    runs = [_run("aiokproto", CONSUME, r, 0.5, measured_records=500) for r in range(3)]
    row = report.summarize(_doc(runs, [CONSUME]))[0]
    assert row["msgs_per_s"]["median"] == 1000
    assert row["mb_per_s"]["median"] == pytest.approx(0.1)
    assert row["cpu_s_per_million"]["median"] == pytest.approx(0.25 / 500 * 1e6)


def test_librdkafka_consume_calls_never_ask_for_more_than_is_left() -> None:
    # consume(num_messages=n) waits until n messages are there or its timeout ends: a
    # last call asking for a full batch sat out the whole timeout
    confluent_sync = pytest.importorskip("benchmarks.clients.confluent_sync")
    remaining = confluent_sync.Remaining(25_000)
    asked = []
    while remaining.left:
        asked.append(remaining.ask())
        remaining.took(asked[-1])
    assert asked == [10_000, 10_000, 5_000]
    assert remaining.ask() == 1  # nothing left: a valid request, never 0
    job = Job("confluent-kafka", CONSUME, "b", "t", 0, 1.0)
    assert confluent_sync.consumer_config(job)["fetch.queue.backoff.ms"] == 10
    assert "fetch.queue.backoff.ms" in ADAPTERS["confluent-kafka-aio"].note


def test_latency_validation_counts_the_warmup_record() -> None:
    good = {
        "acked": 1000, "failed": 0, "received": 1000, "duplicates": 0, "unknown": 0,
        "warmup_records": 1, "elapsed_s": 10.0,
        "latency": {"p50_ms": 1, "p99_ms": 2, "p999_ms": 3, "max_ms": 4, "mean_ms": 1},
    }  # fmt: skip
    assert check_run(LATENCY, good, 1001) == []
    assert check_run(LATENCY, good, 1000)
    assert check_run(LATENCY, {**good, "received": 999}, 1001)
    assert check_run(LATENCY, {**good, "duplicates": 1}, 1001)
    no_samples = {k: v for k, v in good.items() if k != "latency"}
    assert "no latency samples" in check_run(LATENCY, no_samples, 1001)


# -- Java tool output --------------------------------------------------------------------

PRODUCER_OUT = """Reading payloads from: /tmp/x/payload.txt
Number of records read: 1024
260450 records sent, 52090.0 records/sec (5.21 MB/sec), 2.1 ms avg latency, 210.0 ms max latency.
300000 records sent, 158730.158730 records/sec (15.87 MB/sec), 40.66 ms avg latency, \
770.00 ms max latency, 34 ms 50th, 93 ms 95th, 99 ms 99th, 100 ms 99.9th.
"""

CONSUMER_OUT = """start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, \
nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
2026-11-21 12:32:49:193, 2026-11-21 12:32:49:929, 0.0143, 0.0194, 5000, 6793.4783, 552, \
184, 0.0777, 27173.9130
"""


def test_parse_producer_performance_takes_the_final_summary() -> None:
    s = java_tools.parse_producer_performance(PRODUCER_OUT)
    assert s.records == 300000
    assert s.records_per_s == pytest.approx(158730.158730)
    assert s.mb_per_s == 15.87
    assert (s.p50_ms, s.p95_ms, s.p99_ms, s.p999_ms) == (34, 93, 99, 100)
    assert s.max_latency_ms == 770


def test_parse_consumer_performance() -> None:
    s = java_tools.parse_consumer_performance(CONSUMER_OUT)
    assert s.records == 5000
    assert s.megabytes == 0.0143
    assert s.fetch_time_ms == 184
    assert s.rebalance_time_ms == 552
    assert s.total_ms == pytest.approx(736)


@pytest.mark.parametrize("text", ["", "Exception in thread main\n", "start.time, end.time\n"])
def test_unparseable_tool_output_is_an_error(text: str) -> None:
    with pytest.raises(java_tools.JavaToolsError):
        java_tools.parse_producer_performance(text)
    with pytest.raises(java_tools.JavaToolsError):
        java_tools.parse_consumer_performance(text)


def test_cpu_model_and_memory_parsing() -> None:
    assert machine.cpu_model("processor : 0\nmodel name\t: AMD EPYC 9B14\n") == "AMD EPYC 9B14"
    assert machine.mem_total_gib("MemTotal:       24684000 kB\n") == pytest.approx(23.5, 0.01)
    assert machine.mem_total_gib("") is None


# -- summaries and rendering -------------------------------------------------------------


def _run(client: str, scenario: Scenario, run: int, elapsed: float, **kw: Any) -> dict[str, Any]:
    return {
        "client": client, "scenario_id": scenario.id, "run": run, "elapsed_s": elapsed,
        "cpu_s": elapsed / 2, "max_rss_kb": 40 * 1024, "valid": True, "reasons": [],
        "client_version": "1.0", **kw,
    }  # fmt: skip


def _doc(runs: list[dict[str, Any]], scenarios: list[Scenario]) -> dict[str, Any]:
    return {
        "meta": {
            "date": "2026-11-21T12:00:00+00:00", "quick": True, "runs_per_scenario": 3,
            "machine": {"cpu_model": "Test CPU", "cores": 2, "ram_gib": 8.0,
                        "load_avg_at_start": [0.5, 0.4, 0.3]},
            "python": "3.11.2", "java": "openjdk 17", "kafka": {"version": "4.3.1"},
            "clients": {"aiokafka": "0.14.0"}, "client_notes": {"java-perf": "JVM"},
        },
        "scenarios": [s.to_json() for s in scenarios],
        "runs": runs,
    }  # fmt: skip


def test_summary_medians_ratios_and_failed_clients() -> None:
    lat = {"p50_ms": 1.0, "p99_ms": 4.0, "p999_ms": 9.0, "max_ms": 10.0, "mean_ms": 1.5}
    runs = []
    for r in range(3):
        runs.append(_run("aiokproto", PRODUCE, r, [1.0, 2.0, 4.0][r]))
        runs.append(_run("peer", PRODUCE, r, [0.5, 1.0, 2.0][r]))
        runs.append(_run("aiokproto", LATENCY, r, 10.0, latency=lat))
        runs.append(_run("peer", LATENCY, r, 10.0, latency={**lat, "p99_ms": 8.0}))
    # a broken client: one bad run is enough to withhold its numbers
    for r in range(3):
        bad = _run("broken", PRODUCE, r, 0.1)
        if r == 1:
            bad.update(valid=False, reasons=["999 of 1000 records acknowledged"])
        runs.append(bad)
    doc = _doc(runs, [PRODUCE, LATENCY])
    rows = report.summarize(doc)
    by = {(r["scenario_id"], r["client"]): r for r in rows}
    ours = by[(PRODUCE.id, "aiokproto")]
    assert ours["msgs_per_s"]["median"] == 500  # 1000 records / 2 s
    assert ours["msgs_per_s"]["low"] == 250 and ours["msgs_per_s"]["high"] == 1000
    assert ours["mb_per_s"]["median"] == pytest.approx(0.05)
    assert ours["cpu_s_per_million"]["median"] == pytest.approx(1000.0)
    assert ours["peak_rss_mb"]["median"] == 40
    assert by[(PRODUCE.id, "peer")]["throughput_vs_ref"] == pytest.approx(2.0)
    assert by[(LATENCY.id, "peer")]["p99_vs_ref"] == pytest.approx(2.0)
    broken = by[(PRODUCE.id, "broken")]
    assert broken["status"] == "FAILED"
    assert "1/3 runs invalid: 999 of 1000 records acknowledged" in broken["reason"]
    assert "msgs_per_s" not in broken
    # the reference comes first in every scenario
    assert next(r["client"] for r in rows if r["scenario_id"] == PRODUCE.id) == "aiokproto"

    md = report.render_markdown(doc, rows)
    assert "| produce 100B acks=1 p1 none | peer | 1,000 | ±75% |" in md
    assert "| 2.00 |" in md
    assert "**FAILED** | 1/3 runs invalid: 999 of 1000 records acknowledged" in md
    assert "Test CPU, 2 cores, 8.0 GiB" in md
    assert "| latency 100B 100/s p1 acks=1 | peer | 1.00 | 8.00 | 9.00 |" in md

    snippet = report.render_readme_snippet(doc, rows)
    assert "| scenario | aiokproto | peer | broken |" in snippet
    assert "| produce 100B acks=1 p1 none | 500 | 1,000 | FAILED |" in snippet
    assert "| latency 100B 100/s p1 acks=1 | 4.00 ms | 8.00 ms | n/a |" in snippet


def test_no_ratio_without_a_valid_reference() -> None:
    runs = [_run("peer", PRODUCE, r, 1.0) for r in range(3)]
    runs += [{**_run("aiokproto", PRODUCE, r, 1.0), "valid": False, "reasons": ["x"]}
             for r in range(3)]
    rows = report.summarize(_doc(runs, [PRODUCE]))
    peer = next(r for r in rows if r["client"] == "peer")
    assert "throughput_vs_ref" not in peer
    assert "| - |" in report.render_markdown(_doc(runs, [PRODUCE]), rows)


def test_write_outputs_writes_every_file(tmp_path: Any) -> None:
    lat = {"p50_ms": 1.0, "p99_ms": 4.0, "p999_ms": 9.0, "max_ms": 10.0, "mean_ms": 1.5}
    runs = [_run("aiokproto", PRODUCE, r, 1.0) for r in range(3)]
    runs += [_run("aiokproto", CONSUME, r, 1.0) for r in range(3)]
    runs += [_run("aiokproto", LATENCY, r, 1.0, latency=lat) for r in range(3)]
    runs += [{**_run("peer", CONSUME, r, 1.0), "valid": False, "reasons": ["no"]}
             for r in range(3)]
    paths = report.write_outputs(_doc(runs, [PRODUCE, CONSUME, LATENCY]), tmp_path, "\nX\n")
    names = {p.name for p in tmp_path.iterdir()}
    assert {"latest.json", "latest.md", "latest-readme.md", "latest-produce.png",
            "latest-consume.png", "latest-latency.png"} <= names
    assert any(n.startswith("clients-") and n.endswith(".json") for n in names)
    assert paths["markdown"].read_text().endswith("\nX\n")
    for key in ("chart_produce", "chart_consume", "chart_latency"):
        assert paths[key].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_peak_rss_is_this_process_image_only() -> None:
    from benchmarks.child import peak_rss_kb

    mine = peak_rss_kb()
    assert mine is not None and mine > 1000
    assert peak_rss_kb(2**22 + 12345) is None  # no such pid


async def test_async_pacing_never_sends_early_and_lets_other_tasks_run() -> None:
    import asyncio
    import time

    from benchmarks.clients.common import Schedule

    # 10 ms apart: pace has something to wait for even on a loaded machine (at 2,000/s
    # a CI run once found every send time already past, so pace never had to yield)
    schedule = Schedule(rate=100)
    ticks = 0

    async def other() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(other())
    schedule.begin()
    waited_ahead = 0
    try:
        for i in range(20):
            before, ahead = ticks, schedule.due(i) - time.perf_counter_ns()
            await schedule.pace(i)
            assert time.perf_counter_ns() >= schedule.due(i)
            if ahead > 2_000_000:  # due 2 ms or more away: pace had to let the loop run
                waited_ahead += 1
                assert ticks > before, f"record {i}: pace waited {ahead} ns without yielding"
    finally:
        task.cancel()
        schedule.close()
    assert waited_ahead > 0  # else the check above never ran


async def test_async_pacing_sleeps_in_the_loop_instead_of_spinning() -> None:
    """A spinning pace kept a CPU busy that the broker needed on a two-CPU machine: with a
    timer fd the process is almost idle between send times (CPU time against wall time,
    not a speed: a loaded machine only makes the wall time longer)."""
    import gc
    import resource
    import time

    from benchmarks.clients.common import Schedule

    def cpu_s() -> float:
        ru = resource.getrusage(resource.RUSAGE_SELF)
        return ru.ru_utime + ru.ru_stime

    schedule = Schedule(rate=500)
    gc.disable()  # a full collection of the test session's objects is CPU time too
    try:
        await schedule.pace(0)  # opens the alarm
        assert not schedule.busy_waits
        schedule.begin()
        cpu0, wall0 = cpu_s(), time.perf_counter()
        for i in range(50):
            await schedule.pace(i)
            assert time.perf_counter_ns() >= schedule.due(i)
        cpu, wall = cpu_s() - cpu0, time.perf_counter() - wall0
    finally:
        gc.enable()
        schedule.close()
    assert not schedule.busy_waits  # what the run's result reports, read after close()
    assert schedule.pacing == "timer fd"
    assert wall >= 0.098
    assert cpu < 0.5 * wall, (cpu, wall)


async def test_async_pacing_falls_back_to_yielding_without_a_timer_fd(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import time

    from benchmarks.clients import alarm
    from benchmarks.clients.common import Schedule

    monkeypatch.setattr(alarm, "_timerfd_api", lambda: None)
    schedule = Schedule(rate=2_000)
    schedule.begin()
    for i in range(5):
        await schedule.pace(i)
        assert time.perf_counter_ns() >= schedule.due(i)
    schedule.close()
    assert schedule.busy_waits and schedule.pacing == "busy wait"


async def test_alarm_never_wakes_early_after_a_cancelled_wait_or_a_stale_expiry() -> None:
    import asyncio
    import time

    from benchmarks.clients.alarm import Alarm

    alarm = Alarm.open()
    assert alarm is not None  # Linux: libc (or os, from 3.13) has timer fds
    try:
        now = time.perf_counter_ns()
        await alarm.until(now - 1_000_000)  # passed: at once
        # a wait cancelled before its time leaves an expiry behind that must not end
        # the next, later wait early
        waiting = asyncio.create_task(alarm.until(now + 2_000_000))
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await asyncio.sleep(0.005)  # the old expiry fires with nobody waiting
        later = time.perf_counter_ns() + 20_000_000
        await alarm.until(later)
        assert time.perf_counter_ns() >= later
    finally:
        alarm.close()


def test_sink_bench_batches_are_sparks_shape() -> None:
    """spark_sink_bench feeds the sink what Spark hands it: Arrow batches of 10,000
    rows with one binary value column, every value distinct and 100 B."""
    from benchmarks.spark_sink_bench import arrow_batches

    batches = arrow_batches(25_001)
    assert [b.num_rows for b in batches] == [10_000, 10_000, 5_001]
    values = [v for b in batches for v in b.column(0).to_pylist()]
    assert len(set(values)) == 25_001 and {len(v) for v in values} == {100}
    assert str(batches[0].schema) == "value: binary"


# -- the runner's order of runs -----------------------------------------------------------


async def test_each_scenario_opens_with_one_untimed_run_that_is_dropped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from benchmarks import runner

    calls: list[tuple[str, int]] = []

    async def fake_run(
        self: runner.Session, scenario: Scenario, client: str, run: int, *_: Any
    ) -> dict[str, Any]:
        calls.append((client, run))
        return {"client": client, "scenario_id": scenario.id, "run": run, "valid": True,
                "reasons": [], "elapsed_s": 1.0}

    monkeypatch.setattr(runner.Session, "one_run", fake_run)
    scenario = Scenario("produce", 100, 1_000)
    lines: list[str] = []
    opts = runner.RunOptions(scenarios=[scenario], clients=["aiokafka", "confluent-kafka"],
                             runs=2, progress=lines.append)
    session = runner.Session(opts, "unused:9092")
    session.unavailable["aiokafka"] = "not installed"  # the first available one settles
    await session.run_scenario(scenario)
    assert calls[0] == ("confluent-kafka", -1)
    assert calls[1:] == [("aiokafka", 0), ("confluent-kafka", 0),
                         ("confluent-kafka", 1), ("aiokafka", 1)]
    assert [(r["client"], r["run"]) for r in session.runs] == calls[1:]  # dropped
    assert any("untimed confluent-kafka run" in line for line in lines)

    calls.clear()
    opts.settle_runs = False
    await session.run_scenario(scenario)
    assert all(run >= 0 for _, run in calls) and len(calls) == 4


def test_the_base_adapter_refuses_a_path_that_is_not_a_checkout(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """aiokproto-base without $BENCH_AIOKPROTO_BASE (or with a wrong one) fails its run
    with a message naming the variable, instead of silently measuring this checkout."""
    from benchmarks import child

    monkeypatch.setenv("BENCH_AIOKPROTO_PATH", str(tmp_path))
    with pytest.raises(RuntimeError, match="BENCH_AIOKPROTO_BASE"):
        child._aiokproto_from_elsewhere()
    monkeypatch.setenv("BENCH_AIOKPROTO_PATH", "")
    with pytest.raises(RuntimeError, match="not a checkout"):
        child._aiokproto_from_elsewhere()


def test_the_base_adapter_imports_aiokproto_from_the_other_tree(tmp_path: Any) -> None:
    """A child with BENCH_AIOKPROTO_PATH imports aiokproto from there, ahead of this
    checkout and its editable install (what make bench-base compares)."""
    import os
    import subprocess
    import sys

    (tmp_path / "aiokproto").mkdir()
    (tmp_path / "aiokproto" / "__init__.py").write_text("WHERE = 'base'\n")
    code = (
        "from benchmarks import child; child._aiokproto_from_elsewhere(); "
        "import aiokproto; print(aiokproto.WHERE)"
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "BENCH_AIOKPROTO_PATH": str(tmp_path)},
        cwd=root, capture_output=True, text=True, check=True, timeout=60,
    )
    assert out.stdout.strip() == "base"
