"""The Java test servers' shared parts with stand-ins (no Maven, no JVM): the build
marker, building once, Maven's failures, and a server process that dies at start, never
answers, or answers."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Self

import pytest

from aiokproto.testing import java_server, processes
from aiokproto.testing.errors import KafkaHarnessError
from aiokproto.testing.java_server import (
    MARKER,
    JavaServer,
    build_once,
    is_built,
    log_tail,
    run_maven,
)
from aiokproto.testing.ports import free_ports


def test_a_build_counts_when_its_marker_has_the_digest_and_its_product_exists(
    tmp_path: Path,
) -> None:
    product = tmp_path / "app.jar"
    assert not is_built(tmp_path, "d1", product)  # no marker
    (tmp_path / MARKER).write_text(json.dumps({"digest": "d1"}))
    assert not is_built(tmp_path, "d1", product)  # no product
    product.write_bytes(b"")
    assert is_built(tmp_path, "d1", product)
    assert not is_built(tmp_path, "d2", product)  # the project files changed
    (tmp_path / MARKER).write_text("[not json")
    assert not is_built(tmp_path, "d1", product)


def test_build_once_builds_then_reuses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(java_server, "tool_on_path", lambda name: f"/usr/bin/{name}")
    work, builds = tmp_path / "server-1.0", []

    def build(mvn: str) -> None:
        builds.append(mvn)
        work.mkdir()
        (work / "app.jar").write_bytes(b"")

    for _ in range(2):
        build_once(tmp_path, work, "d1", work / "app.jar", "the server", build)
    assert builds == ["/usr/bin/mvn"]
    assert json.loads((work / MARKER).read_text())["digest"] == "d1"


def test_without_maven_the_error_says_what_needs_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(java_server, "tool_on_path", lambda name: None)
    with pytest.raises(KafkaHarnessError, match=r"needed once to build the test IdP \(install"):
        build_once(tmp_path, tmp_path / "w", "d", tmp_path / "p", "the test IdP", print)


def test_maven_failures_end_with_its_output() -> None:
    script = "echo line1; echo the-cause >&2; exit 3"
    with pytest.raises(KafkaHarnessError, match=r"build the x \(exit 3\): line1\nthe-cause"):
        run_maven(["sh", "-c", script], "the x", 30)
    with pytest.raises(KafkaHarnessError, match="did not build the x within 0s"):
        run_maven(["sleep", "5"], "the x", 0.2)


def test_log_tail(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("".join(f"line {i}\n" for i in range(50)))
    assert log_tail(log, 2) == "line 48\nline 49"
    assert log_tail(tmp_path / "missing.log") == "(no log)"


class Stub(JavaServer):
    """A ``sh`` process standing in for the JVM, ready when ``ready_url`` answers."""

    what = "the stub"
    stop_grace_s = 2.0

    def __init__(self, tmp: Path, script: str, ready_url: str) -> None:
        self.script, self.ready_url, self._log = script, ready_url, tmp / "stub.log"

    def start(self, timeout_s: float = 2.0) -> Self:
        self._proc = processes.spawn(["sh", "-c", self.script], self._log.parent, self._log)
        self.wait_ready(timeout_s)
        return self


@pytest.fixture
def answering() -> Iterator[str]:
    class Ok(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Ok)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/ready"
    server.shutdown()
    server.server_close()


def test_a_server_is_ready_when_its_url_answers_and_stops(tmp_path: Path, answering: str) -> None:
    with Stub(tmp_path, "exec sleep 30", answering) as stub:
        assert stub.running
        proc = stub._proc
    assert not stub.running and proc is not None and proc.poll() is not None


def test_a_server_that_dies_at_start_shows_its_log(tmp_path: Path) -> None:
    stub = Stub(tmp_path, "echo no port for me; exit 4", "http://127.0.0.1:9/")
    with pytest.raises(KafkaHarnessError, match=r"the stub exited \(4\) at start: no port for me"):
        stub.start()


def test_a_server_that_never_answers_is_stopped(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    stub = Stub(tmp_path, "echo starting; exec sleep 30", f"http://127.0.0.1:{port}/")
    with pytest.raises(KafkaHarnessError, match=r"the stub did not answer within 1s: starting"):
        stub.start(timeout_s=0.6)
    assert not stub.running


def test_the_servers_share_the_base() -> None:
    from aiokproto.testing.oidc import LocalOidcServer
    from aiokproto.testing.schema_registry import LocalSchemaRegistry

    assert issubclass(LocalOidcServer, JavaServer) and issubclass(LocalSchemaRegistry, JavaServer)
