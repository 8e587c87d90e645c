"""The examples run end to end against the session's broker and finish by themselves."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def run_example(kafka: Any, event_loop_name: str) -> Callable[..., str]:
    """Run an example script against the session's broker, on the selected event loop."""

    def run(*args: str, timeout: float = 180, env: dict[str, str] | None = None) -> str:
        return _run(kafka, event_loop_name, *args, timeout=timeout, env=env)

    return run


def _run(
    kafka: Any, loop: str, *args: str, timeout: float = 180, env: dict[str, str] | None = None
) -> str:
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers, **(env or {})}
    runner = ["-m", "tests.examples.on_uvloop"] if loop == "uvloop" else []
    done = subprocess.run(
        [sys.executable, *runner, *args],
        cwd=EXAMPLES.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, f"{args[0]} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_quickstart(run_example: Callable[..., str]) -> None:
    out = run_example("examples/quickstart.py")
    assert out.count("produced to quickstart-events") == 10
    assert "committed" in out


def test_consumer_service(run_example: Callable[..., str]) -> None:
    run_example("examples/consumer_service.py")


def test_ingest_service_load(run_example: Callable[..., str]) -> None:
    pytest.importorskip("uvicorn")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    out = run_example("examples/ingest_service.py", "--load", "2000", "--port", str(port))
    assert "2000" in out


@pytest.mark.slow
def test_spark_pipeline(run_example: Callable[..., str]) -> None:
    pytest.importorskip("pyspark")
    out = run_example("examples/spark_pipeline.py", timeout=400)
    assert "totals match the events that were sent" in out


def test_examples_use_the_selected_loop(
    run_example: Callable[..., str], event_loop_name: str, tmp_path: Path
) -> None:
    # The runner really swaps the loop: a script reports what asyncio.run gave it.
    script = tmp_path / "which_loop.py"
    script.write_text(
        "import asyncio\n"
        "async def main():\n"
        "    print(type(asyncio.get_running_loop()).__module__)\n"
        "asyncio.run(main())\n"
    )
    out = run_example(str(script))
    assert out.strip().split(".")[0] == event_loop_name


def test_exactly_once(run_example: Callable[..., str]) -> None:
    out = run_example("examples/exactly_once.py")
    assert "exactly once: 2000 payments, 2000 fee records, none twice" in out


def test_work_queue(run_example: Callable[..., str]) -> None:
    out = run_example("examples/work_queue.py")
    assert "poison jobs rejected" in out


def test_parallel_service(run_example: Callable[..., str]) -> None:
    out = run_example("examples/parallel_service.py")
    assert "dead-lettered: [13, 1010, 2007, 3004]" in out
    assert "billed 3996 orders of 500 customers" in out


def test_avro_orders(
    run_example: Callable[..., str], request: pytest.FixtureRequest, event_loop_name: str
) -> None:
    pytest.importorskip("fastavro")
    if event_loop_name == "uvloop":
        # make test's uvloop slice starts no registry otherwise (a JVM: seconds of CI),
        # and the serdes do nothing loop-specific that the asyncio run does not check
        pytest.skip("the schema registry example runs on asyncio's loop only")
    registry = request.getfixturevalue("schema_registry")  # only when fastavro is there
    out = run_example("examples/avro_orders.py", env={"SCHEMA_REGISTRY_URL": registry.url})
    assert "read 600 orders of 7 customers" in out
    dead = "dead letters: ['offset 300: NotWireFormatError', 'offset 301: UnknownSchemaError']"
    assert dead in out
