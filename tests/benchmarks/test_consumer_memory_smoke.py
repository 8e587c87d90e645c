"""A tiny run of benchmarks/consumer_memory.py on the session broker: the topic is
written, each client runs in its own process, and the report shows every row."""

from __future__ import annotations

import pytest

from aiokproto.testing.discovery import KafkaService
from benchmarks import consumer_memory


def test_a_tiny_run_reports_every_client(
    kafka: KafkaService, capsys: pytest.CaptureFixture[str]
) -> None:
    clients = ["aiokproto-8mib", "aiokproto-unbounded"]
    argv = ["--partitions", "20", "--per-partition", "16384", "--seconds", "0.5"]
    argv += ["--take", "50", "--every-ms", "20", "--clients", ",".join(clients)]
    assert consumer_memory.main([*argv, "--bootstrap-servers", kafka.bootstrap_servers]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[2:]}
    assert sorted(rows) == sorted(clients)
    for client in clients:
        grown, base, read, own = (float(v.replace(",", "")) for v in rows[client])
        assert base > 10 and grown >= 0 and read > 0
        assert 0 < own <= 0.4  # its own accounting: at most the 320 KB written, and some
