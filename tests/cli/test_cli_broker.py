"""The ``aiokproto`` command end to end: a subprocess against the real broker, checking
its output (``--output json``) and exit codes, bad input included."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from aiokproto.testing.discovery import KafkaService
from tests.cli.helpers import ENV, cli


def ok(*args: str, stdin: str | None = None) -> Any:
    """Run with --output json, expect exit 0, return the parsed output."""
    proc = cli(*args, "--output", "json", stdin=stdin)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def failed(proc: subprocess.CompletedProcess[str], code: int) -> str:
    """The one-line error of a run that had to fail with ``code``."""
    assert proc.returncode == code, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    return proc.stderr


@pytest.fixture
def bs(kafka: KafkaService) -> list[str]:
    return ["--bootstrap-server", kafka.bootstrap_servers, "--timeout", "20"]


def test_topics_lifecycle(bs: list[str], topic_name: str) -> None:
    created = ok("topics", "create", topic_name, "-p", "3", "-r", "1", *bs)
    assert created[0]["name"] == topic_name and created[0]["partitions"] == 3
    assert topic_name in ok("topics", "list", *bs)
    # exists already: an error, unless --if-not-exists
    assert "TopicAlreadyExistsError" in failed(cli("topics", "create", topic_name, *bs), 1)
    assert ok("topics", "create", topic_name, "--if-not-exists", *bs) == [
        {"name": topic_name, "created": False}
    ]
    ok("topics", "alter", topic_name, "-p", "4", "-C", "retention.ms=3600000", *bs)
    [desc] = ok("topics", "describe", topic_name, *bs)
    assert [p["partition"] for p in desc["partitions"]] == [0, 1, 2, 3]
    assert desc["configs"] == {"retention.ms": "3600000"}
    assert "cannot remove partitions" in failed(
        cli("topics", "alter", topic_name, "-p", "2", *bs), 1
    )
    assert ok("topics", "delete", topic_name, *bs) == {"deleted": [topic_name], "missing": []}
    assert topic_name not in ok("topics", "list", *bs)
    assert ok("topics", "delete", topic_name, "--if-exists", *bs)["missing"] == [topic_name]


def test_cluster_describe(bs: list[str], kafka: KafkaService) -> None:
    data = ok("cluster", "describe", *bs)
    assert data["cluster_id"] and data["brokers"]
    _, port = kafka.bootstrap_servers.split(",")[0].rsplit(":", 1)
    assert any(b["port"] == int(port) for b in data["brokers"])
    table = cli("cluster", "describe", *bs)
    assert table.returncode == 0 and data["cluster_id"] in table.stdout


def test_unknown_topic(bs: list[str], topic_name: str) -> None:
    for args in (["topics", "describe", topic_name], ["consume", topic_name, "-n", "1"],
                 ["topics", "delete", topic_name], ["groups", "reset-offsets", "g",
                                                    "--topic", topic_name, "--to-earliest"]):
        message = failed(cli(*args, *bs), 1)
        assert "unknown topic" in message and topic_name in message, args
    message = failed(cli("produce", topic_name, *bs, stdin="a\n"), 1)
    assert "unknown topic" in message
    # what to do about it, rather than the broker's "wait for metadata to catch up"
    assert f"create it first (aiokproto topics create {topic_name})" in message


def test_usage_errors_exit_2(bs: list[str], tmp_path: Path) -> None:
    bad = tmp_path / "client.properties"
    bad.write_text("bootstrap.servers=localhost:9092\nsecurity.protocol=PLAINTEXT\n"
                   "sasl.kerberos.kinit.cmd=/usr/bin/kinit\n")
    message = failed(cli("topics", "list", "--config", str(bad)), 2)
    assert "unknown property: sasl.kerberos.kinit.cmd" in message
    assert "no bootstrap server" in failed(cli("topics", "list"), 2)
    assert "No such option" in failed(cli("topics", "list", "--bogus", *bs), 2)
    assert "unknown field {nope}" in failed(cli("consume", "t", "-F", "{nope}", *bs), 2)
    assert "exactly one" in failed(cli("groups", "reset-offsets", "g", "--all-topics", *bs), 2)


def test_config_file_and_environment(kafka: KafkaService, tmp_path: Path) -> None:
    props = tmp_path / "client.properties"
    props.write_text(
        f"# as a Java client reads it\nbootstrap.servers={kafka.bootstrap_servers}\n"
        "security.protocol=PLAINTEXT\nrequest.timeout.ms=15000\n"
        "key.serializer=org.apache.kafka.common.serialization.StringSerializer\n"
    )
    assert ok("cluster", "describe", "--config", str(props))["brokers"]
    env = {"AIOKPROTO_BOOTSTRAP_SERVERS": kafka.bootstrap_servers, "AIOKPROTO_OUTPUT": "json"}
    proc = cli("cluster", "describe", env=env)
    assert proc.returncode == 0 and json.loads(proc.stdout)["brokers"]


def test_broker_down_is_one_clear_line() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    began = time.monotonic()
    proc = cli("topics", "list", "-b", f"127.0.0.1:{port}", "--timeout", "3")
    elapsed = time.monotonic() - began
    message = failed(proc, 1)
    assert elapsed < 10, elapsed
    assert len(message.strip().splitlines()) == 1
    assert "no bootstrap server answered within 3 s" in message and str(port) in message


def test_produce_file_then_consume_count(bs: list[str], topic_name: str, tmp_path: Path) -> None:
    ok("topics", "create", topic_name, "-p", "3", *bs)
    lines = [f"key{i % 7}:value {i}" for i in range(300)]
    data = tmp_path / "records.txt"
    data.write_text("\n".join(lines) + "\n")
    summary = ok("produce", topic_name, "--file", str(data), "-K", ":", "-H", "src=file",
                 "--compression", "lz4", *bs)
    assert summary["records"] == 300
    assert summary["bytes"] == sum(len(x) - 1 for x in lines)
    proc = cli("consume", topic_name, "--from-beginning", "--count", "300", "-F", "json", *bs)
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(x) for x in proc.stdout.splitlines()]
    assert sorted(f"{r['key']}:{r['value']}" for r in records) == sorted(lines)
    assert all(r["headers"] == {"src": "file"} for r in records)
    # one key, one partition: the key survived the trip
    assert all(len({r["partition"] for r in records if r["key"] == k}) == 1
               for k in {r["key"] for r in records})
    assert "consumed 300 records" in proc.stderr


def test_produce_fails_when_any_record_fails(bs: list[str], topic_name: str) -> None:
    # One handle was kept per batch and waited for, and it told only its own record's
    # fate: the first records of a run (sent before the producer had the topic's
    # metadata) share one stand-in batch, so a record among them the broker refused
    # was lost while produce said it sent it and exited 0.
    ok("topics", "create", topic_name, "-C", "max.message.bytes=100000", *bs)
    lines = [f"small {i}" for i in range(50)] + ["x" * 150_000] + ["tail"]
    proc = cli("produce", topic_name, *bs, stdin="\n".join(lines) + "\n")
    assert "MessageTooLarge" in failed(proc, 1)


def test_produce_json_lines_and_positions(bs: list[str], topic_name: str) -> None:
    ok("topics", "create", topic_name, "-p", "2", *bs)
    stdin = "".join(
        json.dumps({"key": f"k{i}", "value": {"n": i}, "headers": {"i": str(i)},
                    "partition": 1}) + "\n"
        for i in range(5)
    )
    assert ok("produce", topic_name, "--json", "--acks", "1", *bs, stdin=stdin)["records"] == 5
    proc = cli("consume", topic_name, "--partition", "1", "--offset", "2", "-n", "3",
               "-F", "{partition} {offset} {key} {value} {headers}", *bs)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        '1 2 k2 {"n":2} i=2', '1 3 k3 {"n":3} i=3', '1 4 k4 {"n":4} i=4'
    ]
    proc = cli("consume", topic_name, "--timestamp", "0", "-n", "1", "-F", "{offset}", *bs)
    assert proc.stdout.splitlines() == ["0"]
    bad = failed(cli("produce", topic_name, "--json", *bs, stdin='{"value": 1}\nnot json\n'), 1)
    assert "line 2: not JSON" in bad and "1 records sent before it" in bad
    bad = failed(cli("produce", topic_name, "-K", ":", *bs, stdin="a:1\n\nb:2\nnosep\n"), 1)
    assert "line 4: no key separator ':' (2 records sent before it)" in bad


def test_groups_lag_reset_delete(bs: list[str], topic_name: str) -> None:
    group = f"g-{topic_name}"
    ok("topics", "create", topic_name, "-p", "2", *bs)
    for partition in ("0", "1"):  # both partitions have records to move within
        ok("produce", topic_name, "-p", partition, *bs, stdin="".join(f"{i}\n" for i in range(10)))
    proc = cli("consume", topic_name, "--group", group, "--from-beginning", "-n", "20", *bs)
    assert proc.returncode == 0, proc.stderr
    assert group in [g["group_id"] for g in ok("groups", "list", *bs)]
    lag = ok("groups", "lag", group, *bs)
    assert lag["total_lag"] == 0
    assert sum(p["current"] for p in lag["partitions"]) == 20
    plan = ok("groups", "reset-offsets", group, "--topic", topic_name, "--to-earliest", *bs)
    assert plan["executed"] is False and {p["new"] for p in plan["partitions"]} == {0}
    assert ok("groups", "lag", group, *bs)["total_lag"] == 0  # a dry run changes nothing
    done = ok("groups", "reset-offsets", group, "--topic", f"{topic_name}:0", "--to-offset", "1",
              "--execute", *bs)
    assert [(p["partition"], p["new"]) for p in done["partitions"]] == [(0, 1)]
    lag = ok("groups", "lag", group, *bs)
    by_partition = {p["partition"]: p for p in lag["partitions"]}
    assert by_partition[0]["current"] == 1 and lag["total_lag"] == 9
    [desc] = ok("groups", "describe", group, *bs)
    assert desc["state"] == "Empty" and desc["members"] == []
    assert ok("groups", "delete", group, *bs) == {"deleted": [group]}
    assert "GroupIdNotFoundError" in failed(cli("groups", "lag", group, *bs), 1)


def test_sigint_stops_consume_and_commits_what_was_printed(
    bs: list[str], topic_name: str
) -> None:
    group = f"g-{topic_name}"
    ok("topics", "create", topic_name, "-p", "3", *bs)
    ok("produce", topic_name, *bs, stdin="".join(f"v{i}\n" for i in range(30)))
    proc = subprocess.Popen(
        [sys.executable, "-m", "aiokproto", "consume", topic_name, "--group", group,
         "--from-beginning", "-F", "{partition} {offset}", *bs],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
    )
    assert proc.stdout is not None
    try:
        printed = [proc.stdout.readline().split() for _ in range(30)]
        proc.send_signal(signal.SIGINT)
        rest, stderr = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr
    assert rest == "" and "Traceback" not in stderr
    counts = Counter(int(p) for p, _ in printed)
    lag = ok("groups", "lag", group, *bs)
    assert {p["partition"]: p["current"] for p in lag["partitions"]} == dict(counts)
    assert lag["total_lag"] == 0


def test_consume_without_a_group_says_where_it_reads_and_honours_timeout(
    kafka: KafkaService, topic_name: str
) -> None:
    b = ["-b", kafka.bootstrap_servers]
    ok("topics", "create", topic_name, *b)
    began = time.monotonic()
    empty = failed(cli("consume", topic_name, *b, "--timeout", "2"), 1)
    assert time.monotonic() - began < 15  # it used to wait until Ctrl-C
    assert "no --group: reading new records from the end" in empty
    assert "--from-beginning" in empty and "no record within --timeout 2 s" in empty
    ok("produce", topic_name, *b, stdin="a\nb\nc\n")
    # what is there, then --timeout without a record ends it: a success, and no hint
    proc = cli("consume", topic_name, *b, "--from-beginning", "--timeout", "2")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["a", "b", "c"]
    assert "no --group" not in proc.stderr and "consumed 3 records" in proc.stderr
    # fewer than --count within --timeout is an error, as for perf consume
    short = failed(cli("consume", topic_name, *b, "--from-beginning", "-n", "5",
                       "--timeout", "2", "-g", f"g-{topic_name}"), 1)
    assert "3 of 5 records within --timeout 2 s" in short


def test_a_longer_timeout_waits_longer_for_the_bootstrap_servers() -> None:
    # the client gives up on unreachable bootstrap servers after bootstrap_timeout_ms
    # (5 s): --timeout sets it on the command line, and the error names --timeout
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    message = failed(cli("topics", "list", "-b", f"127.0.0.1:{port}", "--timeout", "6"), 1)
    assert "no bootstrap server answered within 6 s (--timeout)" in message, message
