"""The examples run end to end against the session's broker and finish by themselves."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_example(kafka: Any, *args: str, timeout: float = 180) -> str:
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers}
    done = subprocess.run(
        [sys.executable, *args],
        cwd=EXAMPLES.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, f"{args[0]} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_quickstart(kafka: Any) -> None:
    out = run_example(kafka, "examples/quickstart.py")
    assert out.count("produced to quickstart-events") == 10
    assert "committed" in out


def test_consumer_service(kafka: Any) -> None:
    run_example(kafka, "examples/consumer_service.py")


def test_ingest_service_load(kafka: Any) -> None:
    pytest.importorskip("uvicorn")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    out = run_example(kafka, "examples/ingest_service.py", "--load", "2000", "--port", str(port))
    assert "2000" in out


@pytest.mark.slow
def test_spark_pipeline(kafka: Any) -> None:
    pytest.importorskip("pyspark")
    out = run_example(kafka, "examples/spark_pipeline.py", timeout=400)
    assert "totals match the events that were sent" in out
