"""benchmarks.local_broker's shared parts of the small benchmarks: their client options,
the run order, a child run's result, and the broker given. No broker."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from benchmarks.local_broker import (
    chosen_clients,
    client_arguments,
    on_broker,
    rotated,
    run_child,
)

CLIENTS = ("aiokproto", "confluent-kafka", "aiokafka")


def test_client_arguments_and_the_clients_chosen(capsys: pytest.CaptureFixture[str]) -> None:
    ap = argparse.ArgumentParser(prog="bench")
    client_arguments(ap, CLIENTS, runs=3, child=("aiokproto-base",))
    args = ap.parse_args([])
    assert (args.runs, args.clients, args.bootstrap_servers, args.child) == (
        3, "aiokproto,confluent-kafka,aiokafka", None, None,
    )  # fmt: skip
    assert ap.parse_args(["--child", "aiokproto-base"]).child == "aiokproto-base"
    assert chosen_clients(ap, "aiokafka,,aiokproto", CLIENTS) == ["aiokafka", "aiokproto"]
    assert chosen_clients(ap, "aiokproto-base", CLIENTS, also=("aiokproto-base",)) == [
        "aiokproto-base"
    ]
    with pytest.raises(SystemExit) as exited:
        chosen_clients(ap, "aiokproto,kafka-python", CLIENTS)
    assert exited.value.code == 2
    assert "unknown clients ['kafka-python']; choose from ('aiokproto'," in capsys.readouterr().err


def test_each_run_starts_with_the_next_client() -> None:
    assert [rotated(CLIENTS, i)[0] for i in range(4)] == [*CLIENTS, CLIENTS[0]]
    assert rotated(CLIENTS, 1) == ["confluent-kafka", "aiokafka", "aiokproto"]


def test_a_child_run_is_its_last_json_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "fake_bench.py").write_text(
        "import json, sys\n"
        "if sys.argv[2] == 'broken':\n"
        "    sys.exit('it broke')\n"
        "print('noise first')\n"
        "print(json.dumps({'argv': sys.argv[1:], 'stdin': sys.stdin.read()}))\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    got = run_child("fake_bench", "aiokafka", ["--topic", "t"], stdin=json.dumps([1]))
    assert got == {"argv": ["--child", "aiokafka", "--topic", "t"], "stdin": "[1]"}
    with pytest.raises(RuntimeError, match="broken run failed:\nit broke"):
        run_child("fake_bench", "broken")


def test_a_given_cluster_is_used_as_it_is() -> None:
    assert on_broker("h:9092", lambda bootstrap: f"ran on {bootstrap}") == "ran on h:9092"
