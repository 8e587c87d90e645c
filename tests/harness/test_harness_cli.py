"""``python -m aiokproto.testing broker start|status|stop`` in a private cache dir."""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from aiokproto.testing import PLAINTEXT_ONLY, cli, default_cache_dir, metadata, resolve_jars
from aiokproto.testing.cli import DEFAULT_PORT, parse_listeners, port_free
from aiokproto.testing.discovery import local_jars_possible
from aiokproto.testing.jars import DEFAULT_VERSION
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
    if not local_jars_possible(DEFAULT_VERSION):
        pytest.skip("needs Java and Maven")
    # Reuse the real jar cache (the CLI's default version); only the broker-run dir
    # is private to this test.
    real = resolve_jars(DEFAULT_VERSION).parent
    (tmp_path / f"kafka-{DEFAULT_VERSION}").symlink_to(real, target_is_directory=True)
    env = {**os.environ, "AIOKPROTO_CACHE_DIR": str(tmp_path)}
    assert default_cache_dir() != tmp_path

    assert _cli(env, "broker", "status").returncode == 1
    # 9092 held (by this test if nobody else holds it): the broker takes another port
    # and says so, rather than failing or taking a port the examples do not use
    with contextlib.ExitStack() as stack:
        if port_free(DEFAULT_PORT):
            holder = stack.enter_context(socket.socket())
            holder.bind(("127.0.0.1", DEFAULT_PORT))
            holder.listen()
        started = _cli(env, "broker", "start")
    assert started.returncode == 0, started.stderr
    bootstrap = started.stdout.strip()
    state = json.loads((tmp_path / "broker-run" / "state.json").read_text())
    try:
        assert f"port {DEFAULT_PORT} is taken" in started.stderr
        assert bootstrap != f"127.0.0.1:{DEFAULT_PORT}"
        assert f"bootstrap servers: {bootstrap}" in started.stderr
        assert f"data and log: {tmp_path / 'broker-run'}" in started.stderr
        assert "stop it with: python -m aiokproto.testing broker stop" in started.stderr
        assert "Downloading" not in started.stderr  # the jars were cached
        assert state["bootstrap_servers"] == bootstrap
        assert list(state["listeners"]) == ["PLAINTEXT"]  # no extra unless asked
        host, port = bootstrap.rsplit(":", 1)
        assert metadata(host, int(port)).broker_ids == {1}
        again = _cli(env, "broker", "start")
        assert again.returncode == 0 and again.stdout.strip() == bootstrap
        assert "already running" in again.stderr
        status = _cli(env, "broker", "status", "--bootstrap")
        assert status.returncode == 0 and status.stdout.strip() == bootstrap
    finally:
        stopped = _cli(env, "broker", "stop")
    assert stopped.returncode == 0, stopped.stderr
    assert not pid_alive(state["pid"])
    assert _cli(env, "broker", "status").returncode == 1


def test_the_cache_is_the_users_not_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AIOKPROTO_CACHE_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "aiokproto"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "aiokproto"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # invalid per the XDG spec
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "aiokproto"
    monkeypatch.setenv("AIOKPROTO_CACHE_DIR", str(tmp_path / "mine"))
    assert default_cache_dir() == tmp_path / "mine"


def test_listeners_option() -> None:
    assert parse_listeners("") == PLAINTEXT_ONLY
    assert parse_listeners("all").protocols == ("SASL_PLAINTEXT", "SSL", "SASL_SSL")
    assert parse_listeners("ssl").protocols == ("SSL",)
    assert not parse_listeners("SASL_PLAINTEXT").needs_tls
    with pytest.raises(argparse.ArgumentTypeError, match="unknown listener TLS"):
        parse_listeners("TLS")
    usage = _cli(dict(os.environ), "broker", "start", "--listeners", "TLS")
    assert usage.returncode == 2 and "unknown listener TLS" in usage.stderr


def _start_in(tmp_path: Path, *args: str) -> tuple[int, str]:
    """``broker start`` in-process with an empty cache dir; any download is an error."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = cli.main(["broker", "start", *args])
    assert not (tmp_path / "m2").exists()
    assert not (tmp_path / f"kafka-{DEFAULT_VERSION}").exists()
    return code, err.getvalue()


@pytest.fixture
def empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AIOKPROTO_CACHE_DIR", str(tmp_path))

    def no_download(*args: object, **kwargs: object) -> Path:
        raise AssertionError("downloaded before checking its tools")

    monkeypatch.setattr(cli, "resolve_jars", no_download)
    monkeypatch.setattr(cli, "port_free", lambda port: True)
    return tmp_path


def test_ssl_without_cryptography_is_named_before_any_download(
    empty_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "cryptography" else real(name, *a),
    )
    code, err = _start_in(empty_cache, "--listeners", "all")
    assert code == 2
    assert "need the 'cryptography' package" in err and "pip install cryptography" in err
    assert "Downloading" not in err


def test_missing_java_or_maven_fails_at_once(
    empty_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli, "find_java", lambda: None)
    code, err = _start_in(empty_cache)
    assert code == 2 and "Java is not on PATH" in err and "Java 17+" in err

    monkeypatch.setattr(cli, "find_java", lambda: "/usr/bin/java")
    monkeypatch.setattr(cli, "tool_on_path", lambda name: None)
    code, err = _start_in(empty_cache)
    assert code == 2 and "Maven ('mvn') is not on PATH" in err and "apt-get install maven" in err
    assert "Downloading" not in err


def test_resolve_reports_the_libs_dir() -> None:
    if not local_jars_possible("3.9.1"):
        pytest.skip("needs Java and Maven")
    out = _cli(dict(os.environ), "resolve", "--version", "3.9.1")
    assert out.returncode == 0, out.stderr
    assert "kafka-3.9.1/libs" in out.stdout


def test_a_taken_port_asked_for_fails_before_any_download(
    empty_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.undo()  # the real port check; then the empty cache and no download again
    monkeypatch.setenv("AIOKPROTO_CACHE_DIR", str(empty_cache))
    monkeypatch.setattr(cli, "ensure_jars", lambda version: pytest.fail("downloaded"))
    monkeypatch.setattr(cli, "find_java", lambda: "/usr/bin/java")
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        code, err = _start_in(empty_cache, "--port", str(port))
    assert code == 2 and f"port {port} is taken" in err
