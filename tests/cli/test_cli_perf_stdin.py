"""``aiokproto perf`` and ``produce``'s Ctrl-C end to end: subprocesses against the real
broker (stderr is a pipe here: no live display)."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import signal
import struct
import subprocess
import sys
import termios
import time
from typing import Any

import pytest

from aiokproto.testing.discovery import KafkaService

ENV = {k: v for k, v in os.environ.items() if not k.startswith("AIOKPROTO_")}
AIOKPROTO = [sys.executable, "-m", "aiokproto"]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*AIOKPROTO, *args], capture_output=True, text=True, timeout=120,
                          env=ENV)


def ok(*args: str) -> Any:
    proc = cli(*args, "--output", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture
def bs(kafka: KafkaService) -> list[str]:
    return ["--bootstrap-server", kafka.bootstrap_servers, "--timeout", "20"]


def test_perf_produce_then_consume(bs: list[str], topic_name: str) -> None:
    ok("topics", "create", topic_name, "-p", "3", *bs)
    s = ok("perf", "produce", topic_name, "--num-records", "3000", "--record-size", "100",
           "--acks", "1", "--compression", "lz4", "--batch-size", "32768", *bs)
    assert (s["records"], s["bytes"], s["interrupted"]) == (3000, 300_000, False)
    lat = s["latency_ms"]
    assert 0 < lat["p50"] <= lat["p95"] <= lat["p99"] <= lat["p999"] <= lat["max"]
    assert 0 < lat["avg"] <= lat["max"]
    assert s["records_per_second"] > 0 and s["mb_per_second"] > 0
    # the table form: one line in the manner of kafka-producer-perf-test, nothing else
    proc = cli("perf", "produce", topic_name, "-n", "1000", "-s", "10", *bs)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # no live display when stderr is no terminal
    assert re.fullmatch(
        r"1000 records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, "
        r"[\d.]+ ms max latency, [\d.]+ ms 50th, [\d.]+ ms 95th, [\d.]+ ms 99th, "
        r"[\d.]+ ms 99.9th\.\n", proc.stdout), proc.stdout

    c = ok("perf", "consume", topic_name, "--num-records", "4000", *bs)
    assert (c["records"], c["bytes"]) == (4000, 310_000)
    assert c["first_record_seconds"] is not None and c["records_per_second"] > 0
    group = f"g-{topic_name}"
    proc = cli("perf", "consume", topic_name, "-n", "2500", "--group", group, *bs)
    assert proc.returncode == 0, proc.stderr
    assert re.fullmatch(r"2500 records consumed, [\d.]+ records/sec \([\d.]+ MB/sec\), "
                        r"[\d.]+ MB in [\d.]+ s, \d+ ms to the first record\.\n", proc.stdout)
    lag = ok("groups", "lag", group, *bs)  # the group committed what it consumed
    assert sum(p["current"] for p in lag["partitions"]) == 2500
    assert lag["total_lag"] == 1500


def test_perf_produce_throughput_is_limited(bs: list[str], topic_name: str) -> None:
    ok("topics", "create", topic_name, *bs)
    n, rate = 300, 150.0  # 2 s at the limit
    began = time.monotonic()
    s = ok("perf", "produce", topic_name, "-n", str(n), "-s", "50", "--throughput", str(rate),
           *bs)
    wall = time.monotonic() - began
    assert s["records"] == n
    # record i goes at i / rate: the run lasts (n - 1) / rate at least
    assert s["seconds"] >= (n - 1) / rate * 0.99, s
    assert wall >= n / rate * 0.95
    assert s["records_per_second"] <= rate * 1.02, s


def test_perf_consume_gives_up_when_records_stop(bs: list[str], topic_name: str) -> None:
    ok("topics", "create", topic_name, *bs)
    subprocess.run([*AIOKPROTO, "produce", topic_name, *bs], input="1\n2\n3\n", text=True,
                   env=ENV, check=True, capture_output=True)
    proc = cli("perf", "consume", topic_name, "-n", "10", "--idle-timeout", "1", "-o", "json",
               *bs)
    assert proc.returncode == 1, proc.stderr
    assert json.loads(proc.stdout)["records"] == 3  # the figures of what came
    assert "only 3 of 10 records: none came for 1 s" in proc.stderr
    assert "Traceback" not in proc.stderr


def _unread(fd: int) -> int:
    return int(struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4))[0])


def _has_socket(pid: int) -> bool:
    """The command has connected (it looks the topic up before reading stdin): its imports
    are done. Before that a SIGINT is an interrupted start, not what is tested here."""
    try:
        links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
    except OSError:
        return False
    return any(link.startswith("socket:") for link in links)


@pytest.mark.parametrize("stdin", ["pipe", "tty"])
def test_sigint_ends_produce_at_once_and_delivers_what_was_read(
    bs: list[str], topic_name: str, stdin: str
) -> None:
    """Ctrl-C while stdin stays open (a pipe, or a terminal where nobody presses Enter):
    the command ends at once with exit 0, having delivered the lines it had read."""
    ok("topics", "create", topic_name, *bs)
    # a long linger: the records wait in the producer until the Ctrl-C flushes them
    args = [*AIOKPROTO, "produce", topic_name, "--linger-ms", "600000", "-o", "json", *bs]
    lines = b"one\ntwo\nthree\n"
    if stdin == "pipe":
        proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=ENV)
        assert proc.stdin is not None
        proc.stdin.write(lines)
        proc.stdin.flush()
        watch = keep = proc.stdin.fileno()  # Linux: FIONREAD on either end of a pipe
    else:
        master, keep = pty.openpty()
        proc = subprocess.Popen(args, stdin=keep, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=ENV)
        os.write(master, lines)
        watch = keep
    try:
        deadline = time.monotonic() + 30
        # a loaded machine: the data may reach a pty's line discipline only after a first
        # FIONREAD said 0, while the interpreter is still importing; wait for the connection
        while not _has_socket(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        while _unread(watch) and time.monotonic() < deadline:  # the command read them
            time.sleep(0.05)
        time.sleep(1.0)  # and handed them to the producer
        proc.send_signal(signal.SIGINT)
        began = time.monotonic()
        proc.wait(timeout=15)
        took = time.monotonic() - began
        out, err = proc.communicate()
    finally:
        proc.kill()
        if stdin == "tty":
            os.close(master)
            os.close(keep)
    assert proc.returncode == 0, err
    assert took < 5, took
    summary = json.loads(out)
    assert summary["interrupted"] is True and summary["records"] == 3
    assert b"Traceback" not in err
    got = cli("consume", topic_name, "--from-beginning", "-n", "3", *bs)
    assert got.stdout.splitlines() == ["one", "two", "three"]
