"""Child JVM bookkeeping: no broker outlives the Python process that started it."""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

_PR_SET_PDEATHSIG = 1
_live: dict[int, subprocess.Popen[bytes]] = {}
_lock = threading.Lock()


def _die_with_parent() -> None:
    # Runs in the child between fork and exec: if the parent dies without running
    # atexit (SIGKILL, OOM), the kernel kills the JVM too.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def spawn(
    argv: list[str],
    cwd: Path,
    output: Path,
    *,
    detached: bool = False,
    env: Mapping[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start ``argv`` with stdout+stderr appended to ``output``.

    A tracked (non-detached) child is killed at interpreter exit and, when started
    from the main thread, also by the kernel if this process dies abruptly. (The
    kernel ties PDEATHSIG to the creating *thread*, so worker threads skip it.)
    A detached child (``broker start`` from the CLI) survives us on purpose.
    ``env`` replaces the inherited environment when given.
    """
    preexec: Callable[[], None] | None = None
    if not detached and threading.current_thread() is threading.main_thread():
        preexec = _die_with_parent
    with output.open("ab") as out:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=None if env is None else dict(env),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a terminal's Ctrl-C goes to pytest, which tears down
            preexec_fn=preexec,
        )
    if not detached:
        with _lock:
            _live[proc.pid] = proc
    return proc


def forget(proc: subprocess.Popen[bytes]) -> None:
    with _lock:
        _live.pop(proc.pid, None)


def signal_term(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)


def terminate(proc: subprocess.Popen[bytes], grace: float) -> int:
    """SIGTERM, wait up to ``grace`` seconds, then SIGKILL; returns the exit code."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            return kill(proc)
    forget(proc)
    return proc.returncode


def kill(proc: subprocess.Popen[bytes]) -> int:
    """SIGKILL and reap (bounded: a SIGKILLed process is gone within moments)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
    forget(proc)
    return proc.returncode if proc.returncode is not None else -signal.SIGKILL


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def rss_bytes(pid: int) -> int | None:
    """Resident set size from /proc (Linux), or None when unavailable."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


@atexit.register
def _reap_all() -> None:
    with _lock:
        procs = list(_live.values())
    for proc in procs:  # signal all first so the JVMs shut down in parallel
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
    for proc in procs:
        terminate(proc, grace=5.0)
