"""What the small benchmarks share: the local test broker (the running one, else one
started here and stopped at the end: ``python -m aiokproto.testing broker``), or a
``LocalKafka`` for the session; their ``--runs/--clients/--bootstrap-servers/--child``
options; and each client's run in a child process of the benchmark's own module, its
result the child's last line of JSON."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")


@contextmanager
def local_broker() -> Iterator[str]:
    """Yields the bootstrap address. A broker already running (someone else's) is
    used and left running."""
    cmd = [sys.executable, "-m", "aiokproto.testing", "broker"]
    status = subprocess.run([*cmd, "status"], capture_output=True, text=True, check=False)
    started = status.returncode != 0
    if started:
        out = subprocess.run([*cmd, "start"], check=True, capture_output=True, text=True)
        bootstrap = out.stdout.splitlines()[0].strip()
    else:
        bootstrap = json.loads(status.stdout)["bootstrap_servers"]
    try:
        yield bootstrap
    finally:
        if started:
            subprocess.run([*cmd, "stop"], check=False, capture_output=True)


def on_broker(bootstrap: str | None, session: Callable[[str], T], version: str | None = None) -> T:
    """``session(bootstrap)`` on the cluster given, else on a single-node PLAINTEXT
    ``LocalKafka`` (of ``version``, else the harness's default) started for it."""
    if bootstrap:
        return session(bootstrap)
    from aiokproto.testing import PLAINTEXT_ONLY, LocalKafka

    kafka = (
        LocalKafka(security=PLAINTEXT_ONLY)
        if version is None
        else LocalKafka(version=version, security=PLAINTEXT_ONLY)
    )
    with kafka:
        return session(kafka.bootstrap_servers)


def compile_packages(*names: str) -> None:
    """Byte-compile the named installed packages, as pip does when it installs a wheel.

    A benchmark that times a fresh process (its imports included) would otherwise time
    compiling a source checkout's modules at each run: an editable install has no .pyc
    until a first import writes them, and none at all under PYTHONDONTWRITEBYTECODE
    (set on this project's machines), while the peers' wheels were compiled at install.
    Found without importing them, so nothing of theirs is loaded in this process."""
    import compileall
    import importlib.util

    for name in names:
        spec = importlib.util.find_spec(name)
        for folder in (spec.submodule_search_locations or []) if spec is not None else []:
            compileall.compile_dir(folder, quiet=1)


def client_arguments(
    ap: argparse.ArgumentParser, clients: Sequence[str], runs: int, child: Sequence[str] = ()
) -> None:
    """``--runs``, ``--clients`` (``clients`` by default), ``--bootstrap-servers`` and the
    hidden ``--child CLIENT`` (``clients`` and ``child``) that ``run_child`` passes."""
    ap.add_argument("--runs", type=int, default=runs)
    ap.add_argument("--clients", default=",".join(clients))
    ap.add_argument("--bootstrap-servers")
    ap.add_argument("--child", choices=(*clients, *child), help=argparse.SUPPRESS)


def chosen_clients(
    ap: argparse.ArgumentParser, text: str, clients: Sequence[str], also: Sequence[str] = ()
) -> list[str]:
    """The clients ``--clients`` names, in its order; a usage error names unknown ones."""
    chosen = [c for c in text.split(",") if c]
    unknown = set(chosen) - {*clients, *also}
    if unknown:
        ap.error(f"unknown clients {sorted(unknown)}; choose from {clients}")
    return chosen


def rotated(clients: Sequence[str], run: int) -> list[str]:
    """The clients in the order of run number ``run``: each run starts one later, so
    drift on the machine hits every client alike."""
    k = run % len(clients)
    return [*clients[k:], *clients[:k]]


def run_child(
    module: str,
    client: str,
    argv: Sequence[str] = (),
    stdin: str | None = None,
    timeout: float = 600,
) -> dict[str, Any]:
    """``python -m <module> --child <client> <argv>``: its last line of stdout as JSON
    (``RuntimeError`` with the end of its stderr if it fails)."""
    out = subprocess.run(
        [sys.executable, "-m", module, "--child", client, *argv],
        input=stdin, capture_output=True, text=True, check=False, timeout=timeout,
    )  # fmt: skip
    if out.returncode:
        raise RuntimeError(f"{client} run failed:\n{out.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result
