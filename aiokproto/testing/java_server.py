"""What the harness's Java test servers (the OIDC provider, the schema registry) share:
a Maven build done once into the user cache dir (a marker file records which project
files it was built from), and one server process on 127.0.0.1 that is ready when an
HTTP URL answers 200, its log's tail in every error."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Self

from aiokproto.testing import processes
from aiokproto.testing.errors import KafkaHarnessError
from aiokproto.testing.jars import _file_lock, tool_on_path
from aiokproto.testing.lifecycle import BlockingService

MARKER = ".built.json"
#: how long a server may take to answer after its process started
START_TIMEOUT_S = 90.0


def is_built(work: Path, digest: str, product: Path) -> bool:
    """Whether ``work`` holds a build of the project files with this ``digest`` (its
    marker says so) whose ``product`` (a file the build makes) is there."""
    try:
        marker = json.loads((work / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(marker, dict) and marker.get("digest") == digest and product.is_file()


def build_once(
    cache: Path,
    work: Path,
    digest: str,
    product: Path,
    what: str,
    build: Callable[[str], None],
) -> None:
    """Run ``build(mvn)`` unless ``work`` is built already, under a file lock (safe
    across processes), then mark ``work`` built. ``what`` names the server in the
    error when Maven is missing."""
    if is_built(work, digest, product):
        return
    mvn = tool_on_path("mvn")
    if mvn is None:
        raise KafkaHarnessError(
            f"Maven ('mvn') is not on PATH; it is needed once to build {what} "
            "(install it, e.g. 'apt-get install maven')"
        )
    cache.mkdir(parents=True, exist_ok=True)
    with _file_lock(cache / f"{work.name}.lock"):
        if not is_built(work, digest, product):
            build(mvn)
            (work / MARKER).write_text(
                json.dumps({"digest": digest, "built_at": time.time()}), encoding="utf-8"
            )


def run_maven(cmd: list[str], what: str, timeout_s: float) -> None:
    """Run one Maven command; ``KafkaHarnessError`` with the end of its output if it
    fails or outlasts ``timeout_s``."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        raise KafkaHarnessError(f"Maven did not build {what} within {timeout_s:.0f}s") from exc
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-40:])
        raise KafkaHarnessError(f"Maven failed to build {what} (exit {proc.returncode}): {tail}")


def log_tail(path: Path, lines: int = 30) -> str:
    """The last ``lines`` of a process's log, or ``(no log)``."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class JavaServer(BlockingService):
    """One server process (``processes.spawn``: reaped at exit, killed with this
    process), ready once ``ready_url`` answers 200. Subclasses set ``what`` (for
    errors), ``stop_grace_s``, ``ready_url`` and ``_log``, and start the process into
    ``_proc``; ``wait_ready`` then waits for it."""

    what = "the server"
    stop_grace_s = 10.0
    ready_url: str
    _log: Path
    _proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Self:
        raise NotImplementedError

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc is None or self._proc.poll() is not None:
                code = self._proc.returncode if self._proc is not None else None
                raise KafkaHarnessError(f"{self.what} exited ({code}) at start: {self._log_tail()}")
            if self._answers():
                return
            time.sleep(0.2)
        self.stop()
        raise KafkaHarnessError(
            f"{self.what} did not answer within {timeout_s:.0f}s: {self._log_tail()}"
        )

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(self.ready_url, timeout=1.0) as resp:
                return bool(resp.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def _log_tail(self) -> str:
        return log_tail(self._log)

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            processes.terminate(proc, grace=self.stop_grace_s)
