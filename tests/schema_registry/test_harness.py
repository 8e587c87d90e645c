"""The registry harness: the JVM does not outlive the process that started it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from aiokproto.testing.schema_registry import CCOMPAT_PATH, is_built

START = (
    "from aiokproto.testing.schema_registry import LocalSchemaRegistry\n"
    "r = LocalSchemaRegistry()\n"
    "r.start()\n"
    "print(r.port, flush=True)\n"
    "import time; time.sleep(120)\n"
)


def _answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{port}{CCOMPAT_PATH}/subjects", timeout=1
        ) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _jvms_on(port: int) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError):
                if f"-Dquarkus.http.port={port}".encode() in (proc / "cmdline").read_bytes():
                    found.append(int(proc.name))
    return found


@pytest.mark.skipif(not is_built(), reason="the registry is not built here")
def test_the_registry_dies_with_a_killed_parent() -> None:
    # a bare Popen outlived a SIGKILLed pytest (OOM, CI timeout), port and ~200 MB held
    child = subprocess.Popen([sys.executable, "-c", START], stdout=subprocess.PIPE)
    port = 0
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())
        assert _answers(port)
        child.kill()
        child.wait()
        deadline = time.monotonic() + 10
        while _answers(port) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _answers(port), "the registry outlived the process that started it"
    finally:
        child.kill()
        child.wait()
        for pid in _jvms_on(port) if port else []:  # this test's own leftover
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
