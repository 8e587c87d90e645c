"""A tiny end-to-end run of the harness on the session broker: child processes, topic
set-up, broker-side validation, the report. Two fast peers keep it well under 30 s."""

from __future__ import annotations

from pathlib import Path

from aiokproto import Admin
from aiokproto.testing.discovery import KafkaService
from benchmarks import report, runner
from benchmarks.scenarios import Job, Scenario
from benchmarks.validation import check_run

CLIENTS = ["confluent-kafka", "aiokafka"]


def test_tiny_session_validates_every_run(kafka: KafkaService, tmp_path: Path) -> None:
    scenarios = [
        Scenario("produce", 100, 2_000, partitions=2, acks="all", compression="lz4"),
        # enough records for several polls: consume runs are timed from the first one
        Scenario("consume", 100, 30_000, partitions=2, compression="zstd"),
        Scenario("latency", 100, 200, rate=400),
    ]
    lines: list[str] = []
    opts = runner.RunOptions(scenarios=scenarios, clients=CLIENTS, runs=1, warmup_records=0,
                             bootstrap_servers=kafka.bootstrap_servers, progress=lines.append)
    doc = runner.run_session(opts)
    runs = doc["runs"]
    assert len(runs) == len(scenarios) * len(CLIENTS)
    for r in runs:
        assert r["valid"], (r["client"], r["scenario_id"], r["reasons"])
        assert r["max_rss_kb"] > 10_000 and r["cpu_s"] > 0
    produce = [r for r in runs if r["scenario_id"].startswith("produce")]
    assert all(r["offsets_delta"] == 2_000 and r["acked"] == 2_000 for r in produce)
    latency = [r for r in runs if r["scenario_id"].startswith("latency")]
    assert all(r["offsets_delta"] == 201 and r["received"] == 200 for r in latency)
    assert any("seeded" in line for line in lines)
    consume = [r for r in runs if r["scenario_id"].startswith("consume")]
    assert all(0 < r["measured_records"] < 30_000 and r["consumed"] == 30_000 for r in consume)

    paths = report.write_outputs(doc, tmp_path)
    md = paths["markdown"].read_text()
    assert "| produce 100B acks=all p2 lz4 | confluent-kafka |" in md
    assert "FAILED" not in md


def test_transactional_runs_are_read_back(kafka: KafkaService) -> None:
    """Each transactional client commits three transactions (the last one short); the
    parent reads them back read_committed and counts the commit markers."""
    clients = ["aiokproto", "confluent-kafka", "aiokafka"]
    scenario = Scenario("produce", 100, 2_500, acks="all", txn_records=1_000)
    opts = runner.RunOptions(scenarios=[scenario], clients=clients, runs=1, warmup_records=0,
                             bootstrap_servers=kafka.bootstrap_servers, progress=lambda m: None)
    runs = runner.run_session(opts)["runs"]
    assert [r["client"] for r in runs] == clients
    for r in runs:
        assert r["valid"], (r["client"], r["reasons"])
        assert (r["transactions"], r["committed_records"], r["offsets_delta"]) == (3, 2_500,
                                                                                   2_503)


async def test_a_short_count_is_caught(kafka: KafkaService) -> None:
    """A consumer that gets fewer records than the scenario asked for is invalid: here the
    topic holds 300 records and the scenario claims 500."""
    opts = runner.RunOptions(scenarios=[], clients=CLIENTS, runs=1,
                             bootstrap_servers=kafka.bootstrap_servers, progress=lambda m: None)
    session = runner.Session(opts, kafka.bootstrap_servers)
    seed = Scenario("consume", 100, 300)
    async with Admin(bootstrap_servers=kafka.bootstrap_servers) as admin:
        session.admin_client = admin
        topic, error = await session.seed(seed)
        assert topic is not None, error
        claimed = Scenario("consume", 100, 500)
        job = Job("aiokafka", claimed, kafka.bootstrap_servers, topic, 0, timeout_s=6.0)
        result = await runner.run_child(job)
        await session.delete_topic(topic)
    reasons = check_run(claimed, result, None)
    assert "consumed 300 records, expected exactly 500" in reasons


def test_the_uvloop_and_pure_python_rows_run_what_they_say(kafka: KafkaService) -> None:
    """Rows made by an adapter's environment: the child really runs on uvloop / without
    the compiled codec (its reported version says so) and its runs validate."""
    scenario = Scenario("produce", 100, 2_000, partitions=2)
    clients = ["aiokproto-uvloop", "aiokproto-pure"]
    opts = runner.RunOptions(scenarios=[scenario], clients=clients, runs=1, warmup_records=0,
                             bootstrap_servers=kafka.bootstrap_servers, progress=lambda _: None)
    runs = {r["client"]: r for r in runner.run_session(opts)["runs"]}
    for r in runs.values():
        assert r["valid"], (r["client"], r["reasons"])
    assert runs["aiokproto-uvloop"]["client_version"].endswith(", uvloop)")
    assert "(python" in runs["aiokproto-pure"]["client_version"]
