"""A tiny run of benchmarks.defaults on the session broker: child processes with each
client's defaults, fresh topics per run (deleted after), the table with ratios."""

from __future__ import annotations

import pytest

from aiokproto.testing.discovery import KafkaService
from benchmarks.defaults import main


def test_a_tiny_run_prints_a_row_per_client_with_ratios(
    kafka: KafkaService, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--bootstrap-servers", kafka.bootstrap_servers, "--sizes", "1000", "--mb", "0.2",
            "--runs", "1", "--clients", "aiokproto,confluent-kafka"]  # fmt: skip
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "load average" in lines[1]
    rows = {line.split()[1]: line.split() for line in lines[3:]}
    assert set(rows) == {"aiokproto", "confluent-kafka"}
    assert rows["confluent-kafka"][-2:] == ["1.00x", "1.00x"]
    assert float(rows["aiokproto"][2].replace(",", "")) > 0  # records/s
