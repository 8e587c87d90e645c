"""``python -m aiokproto.testing``: resolve jars, run a persistent local broker.

resolve [--version V | --all]        fetch the broker jars into the cache
broker start [--version V] [...]     start a background broker, print its bootstrap
broker stop                          stop it
broker status [--bootstrap]          is it running? (exit 1 if not)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aiokproto.testing import probe
from aiokproto.testing.cluster import LocalKafka
from aiokproto.testing.config import ALL_LISTENERS, PLAINTEXT_ONLY
from aiokproto.testing.errors import KafkaHarnessError
from aiokproto.testing.jars import (
    DEFAULT_VERSION,
    SUPPORTED_VERSIONS,
    default_cache_dir,
    resolve_jars,
)
from aiokproto.testing.node import FAST_START_JVM_OPTIONS, THROUGHPUT_JVM_OPTIONS
from aiokproto.testing.processes import pid_alive

_JVM_PROFILES = {"fast": FAST_START_JVM_OPTIONS, "throughput": THROUGHPUT_JVM_OPTIONS}


def run_dir(cache_dir: Path | None = None) -> Path:
    return (cache_dir or default_cache_dir()) / "broker-run"


def state_file(cache_dir: Path | None = None) -> Path:
    return run_dir(cache_dir) / "state.json"


def read_state(cache_dir: Path | None = None) -> dict[str, Any] | None:
    try:
        state = json.loads(state_file(cache_dir).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def broker_running(state: dict[str, Any]) -> bool:
    """The recorded pid is alive and still our broker (pids get reused)."""
    pid = state.get("pid")
    if not isinstance(pid, int) or not pid_alive(pid):
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    marker = str(state.get("directory", "")).encode()
    return b"kafka.Kafka" in cmdline and any(marker and marker in arg for arg in cmdline)


def cmd_resolve(args: argparse.Namespace) -> int:
    versions = SUPPORTED_VERSIONS if args.all else (args.version,)
    for version in versions:
        began = time.monotonic()
        libs = resolve_jars(version)
        print(f"Kafka {version}: {libs} ({time.monotonic() - began:.1f}s)")
    return 0


def cmd_start(args: argparse.Namespace) -> int:
    state = read_state()
    if state and broker_running(state):
        print(state["bootstrap_servers"])
        print(f"already running (pid {state['pid']}, Kafka {state['version']})", file=sys.stderr)
        return 0
    directory = run_dir()
    if directory.exists():
        shutil.rmtree(directory)
    kafka = LocalKafka(
        version=args.version,
        security=PLAINTEXT_ONLY if args.plaintext_only else ALL_LISTENERS,
        jvm_options=_JVM_PROFILES[args.jvm],
        directory=directory,
        detached=True,
        plaintext_port=args.port or None,
        start_timeout=args.timeout,
    )
    kafka.start()
    node = kafka.nodes[0]
    new_state = {
        "pid": node.pid,
        "version": kafka.version,
        "bootstrap_servers": kafka.bootstrap_servers,
        "listeners": kafka.listeners,
        "ca_file": str(kafka.ca_file) if kafka.ca_file else None,
        "users": [{"username": u.username, "password": u.password} for u in kafka.users],
        "sasl_mechanisms": list(kafka.sasl_mechanisms),
        "directory": str(directory),
        "log_file": str(node.log_file),
        "started_at": time.time(),
    }
    state_file().write_text(json.dumps(new_state, indent=2), encoding="utf-8")
    print(kafka.bootstrap_servers)
    print(
        f"Kafka {kafka.version} started in {kafka.startup_seconds:.1f}s (pid {node.pid}); "
        f"log: {node.log_file}",
        file=sys.stderr,
    )
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    state = read_state()
    if not state or not broker_running(state):
        print("no broker running", file=sys.stderr)
        state_file().unlink(missing_ok=True)
        return 0
    pid = int(state["pid"])
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + args.timeout
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if pid_alive(pid):
        os.kill(pid, signal.SIGKILL)
        print(f"broker did not stop within {args.timeout:.0f}s; killed", file=sys.stderr)
    state_file().unlink(missing_ok=True)
    print(f"stopped broker (pid {pid})", file=sys.stderr)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    state = read_state()
    if not state or not broker_running(state):
        print("not running", file=sys.stderr)
        return 1
    host, port = str(state["bootstrap_servers"]).split(",")[0].rsplit(":", 1)
    try:
        probe.api_versions(host, int(port), timeout=3.0)
    except (OSError, KafkaHarnessError) as exc:
        print(f"pid {state['pid']} is alive but does not answer: {exc}", file=sys.stderr)
        return 1
    if args.bootstrap:
        print(state["bootstrap_servers"])
    else:
        print(json.dumps(state, indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m aiokproto.testing",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)

    resolve = sub.add_parser("resolve", help="fetch Kafka jars from Maven Central into the cache")
    resolve.add_argument("--version", choices=SUPPORTED_VERSIONS, default=DEFAULT_VERSION)
    resolve.add_argument("--all", action="store_true", help="every supported version")
    resolve.set_defaults(func=cmd_resolve)

    broker = sub.add_parser("broker", help="a persistent single-node broker in the background")
    actions = broker.add_subparsers(dest="action", required=True)
    start = actions.add_parser("start", help="start it and print its bootstrap address")
    start.add_argument("--version", choices=SUPPORTED_VERSIONS, default=DEFAULT_VERSION)
    start.add_argument("--port", type=int, default=0, help="PLAINTEXT port (default: free)")
    start.add_argument(
        "--jvm",
        choices=sorted(_JVM_PROFILES),
        default="fast",
        help="'throughput' (full JIT, G1, 1 GiB heap) for benchmarks",
    )
    start.add_argument("--plaintext-only", action="store_true", help="no SASL/SSL listeners")
    start.add_argument("--timeout", type=float, default=120.0)
    start.set_defaults(func=cmd_start)
    stop = actions.add_parser("stop", help="stop it (SIGTERM, SIGKILL after --timeout)")
    stop.add_argument("--timeout", type=float, default=30.0)
    stop.set_defaults(func=cmd_stop)
    status = actions.add_parser("status", help="print its state; exit 1 if not running")
    status.add_argument("--bootstrap", action="store_true", help="print only the bootstrap")
    status.set_defaults(func=cmd_status)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except KafkaHarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
