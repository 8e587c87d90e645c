"""``python -m aiokproto.testing broker start|status|stop`` in a private cache dir."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from aiokproto.testing import default_cache_dir, metadata, resolve_jars
from aiokproto.testing.discovery import local_jars_possible
from aiokproto.testing.processes import pid_alive


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aiokproto.testing", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def test_broker_start_status_stop(tmp_path: Path) -> None:
    if not local_jars_possible("4.3.1"):
        pytest.skip("needs Java and Maven")
    # Reuse the real jar cache; only the broker-run dir is private to this test.
    real = resolve_jars("4.3.1").parent
    (tmp_path / "kafka-4.3.1").symlink_to(real, target_is_directory=True)
    env = {**os.environ, "AIOKPROTO_CACHE_DIR": str(tmp_path)}
    assert default_cache_dir() != tmp_path

    assert _cli(env, "broker", "status").returncode == 1
    started = _cli(env, "broker", "start", "--plaintext-only")
    assert started.returncode == 0, started.stderr
    bootstrap = started.stdout.strip()
    state = json.loads((tmp_path / "broker-run" / "state.json").read_text())
    try:
        assert state["bootstrap_servers"] == bootstrap
        host, port = bootstrap.rsplit(":", 1)
        assert metadata(host, int(port)).broker_ids == {1}
        again = _cli(env, "broker", "start")
        assert again.returncode == 0 and again.stdout.strip() == bootstrap
        status = _cli(env, "broker", "status", "--bootstrap")
        assert status.returncode == 0 and status.stdout.strip() == bootstrap
    finally:
        stopped = _cli(env, "broker", "stop")
    assert stopped.returncode == 0, stopped.stderr
    assert not pid_alive(state["pid"])
    assert _cli(env, "broker", "status").returncode == 1


def test_resolve_reports_the_libs_dir() -> None:
    if not local_jars_possible("3.9.1"):
        pytest.skip("needs Java and Maven")
    out = _cli(dict(os.environ), "resolve", "--version", "3.9.1")
    assert out.returncode == 0, out.stderr
    assert "kafka-3.9.1/libs" in out.stdout
