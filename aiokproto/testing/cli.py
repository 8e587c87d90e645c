"""``python -m aiokproto.testing``: resolve jars, run a persistent local broker.

resolve [--version V | --all]        fetch the broker jars into the cache
        [--schema-registry]          and build the test schema registry (Apicurio)
broker start [--version V] [...]     start a background broker, print its bootstrap
broker stop                          stop it
broker status [--bootstrap]          is it running? (exit 1 if not)

Needs Java 17+ and, once (to fetch Kafka's jars from Maven Central: a ~62 MB download,
~125 MB on disk), Maven on the PATH. Jars and the broker's data live in the cache dir:
$AIOKPROTO_CACHE_DIR, else $XDG_CACHE_HOME/aiokproto or ~/.cache/aiokproto.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from aiokproto.testing import probe
from aiokproto.testing.broker_config import (
    PLAINTEXT,
    PLAINTEXT_ONLY,
    SASL_PLAINTEXT,
    SASL_SSL,
    SSL,
    SecurityOptions,
)
from aiokproto.testing.cluster import LocalKafka
from aiokproto.testing.errors import KafkaHarnessError
from aiokproto.testing.jars import (
    DEFAULT_VERSION,
    SUPPORTED_VERSIONS,
    default_cache_dir,
    is_resolved,
    resolve_jars,
    tool_on_path,
)
from aiokproto.testing.node import FAST_START_JVM_OPTIONS, THROUGHPUT_JVM_OPTIONS, find_java
from aiokproto.testing.processes import pid_alive

_JVM_PROFILES = {"fast": FAST_START_JVM_OPTIONS, "throughput": THROUGHPUT_JVM_OPTIONS}

#: the port every example and guide connects to (``localhost:9092``)
DEFAULT_PORT = 9092
STOP_COMMAND = "python -m aiokproto.testing broker stop"
_EXTRA_LISTENERS = (SASL_PLAINTEXT, SSL, SASL_SSL)
#: what Maven fetches for one Kafka version into an empty cache (4.4.0: 62 MB, which
#: with the libs dir's copy makes ~125 MB on disk)
_DOWNLOAD_MB = 62


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


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _tree_bytes(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass  # Maven renames its partial downloads
    return total


@contextmanager
def _download_progress(cache: Path) -> Iterator[None]:
    """Every few seconds, how much Maven's private repository grew (on a terminal the
    line is rewritten in place; elsewhere, such as CI logs, a line every 15 s)."""
    repo = cache / "m2"
    before = _tree_bytes(repo)
    done = threading.Event()
    tty = sys.stderr.isatty()

    def report() -> None:
        while not done.wait(2.0 if tty else 15.0):
            mb = (_tree_bytes(repo) - before) / 2**20
            end = "\r" if tty else "\n"
            print(f"  {mb:.0f} of ~{_DOWNLOAD_MB} MB", end=end, file=sys.stderr, flush=True)

    thread = threading.Thread(target=report, name="download-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        if tty:
            print(" " * 24, end="\r", file=sys.stderr, flush=True)


def ensure_jars(version: str) -> Path:
    """Resolve the jars of ``version``, telling the user before and after a download
    (the first run fetches ~62 MB: 8 s on a fast line, minutes on a slow one)."""
    if is_resolved(version):
        return resolve_jars(version)
    if tool_on_path("mvn") is None:
        raise KafkaHarnessError(
            f"Maven ('mvn') is not on PATH; it is needed once, to fetch Kafka {version}'s "
            "jars from Maven Central. Install it (e.g. 'apt-get install maven', "
            "'brew install maven') and run this again"
        )
    cache = default_cache_dir()
    _say(
        f"Downloading Kafka {version}'s jars from Maven Central (~{_DOWNLOAD_MB} MB, "
        f"~125 MB on disk; only this once) into {cache} ..."
    )
    began = time.monotonic()
    repo_before = _tree_bytes(cache / "m2")
    with _download_progress(cache):
        libs = resolve_jars(version)
    fetched = (_tree_bytes(cache / "m2") - repo_before) / 2**20
    _say(f"Downloaded {fetched:.0f} MB in {time.monotonic() - began:.0f} s")
    return libs


def cmd_resolve(args: argparse.Namespace) -> int:
    versions = SUPPORTED_VERSIONS if args.all else (args.version,)
    for version in versions:
        began = time.monotonic()
        libs = ensure_jars(version)
        print(f"Kafka {version}: {libs} ({time.monotonic() - began:.1f}s)")
    if args.schema_registry:
        from aiokproto.testing import schema_registry

        began = time.monotonic()
        jar = schema_registry.build()
        print(f"schema registry: {jar} ({time.monotonic() - began:.1f}s)")
    return 0


def parse_listeners(text: str) -> SecurityOptions:
    """``--listeners``: extra client listeners beside PLAINTEXT ("all", or a comma list
    of SASL_PLAINTEXT, SSL, SASL_SSL; "" for none)."""
    names = [n.strip().upper() for n in text.split(",") if n.strip()]
    if names == ["ALL"]:
        return SecurityOptions(protocols=_EXTRA_LISTENERS)
    unknown = [n for n in names if n not in _EXTRA_LISTENERS and n != PLAINTEXT]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown listener {', '.join(unknown)}: choose 'all' or from "
            f"{', '.join(_EXTRA_LISTENERS)}"
        )
    extra = tuple(n for n in _EXTRA_LISTENERS if n in names)
    return SecurityOptions(protocols=extra) if extra else PLAINTEXT_ONLY


def check_tools(security: SecurityOptions) -> str:
    """Fail before any download when something the broker needs is missing; return
    the java executable."""
    if security.needs_tls and importlib.util.find_spec("cryptography") is None:
        raise KafkaHarnessError(
            "the SSL and SASL_SSL listeners need the 'cryptography' package to make their "
            "certificates: pip install cryptography (or start without --listeners, "
            "PLAINTEXT only)"
        )
    java = find_java()
    if java is None:
        raise KafkaHarnessError(
            "Java is not on PATH and JAVA_HOME is not set; the broker needs a Java 17+ "
            "runtime (e.g. 'apt-get install openjdk-17-jre-headless', "
            "'brew install openjdk@17')"
        )
    return java


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a listener could bind ``host:port`` now (as the broker's does, with
    SO_REUSEADDR, so a port in TIME_WAIT counts as free)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def cmd_start(args: argparse.Namespace) -> int:
    state = read_state()
    if state and broker_running(state):
        print(state["bootstrap_servers"])
        _say(
            f"already running (pid {state['pid']}, Kafka {state['version']}); "
            f"stop it with: {STOP_COMMAND}"
        )
        return 0
    security: SecurityOptions = args.listeners
    check_tools(security)
    port: int | None = args.port
    if port is None:
        port = DEFAULT_PORT if port_free(DEFAULT_PORT) else 0
        if port == 0:
            _say(f"port {DEFAULT_PORT} is taken (another Kafka?); using a free port instead")
    elif port and not port_free(port):
        raise KafkaHarnessError(f"port {port} is taken; choose another --port (0: any free)")
    ensure_jars(args.version)
    directory = run_dir()
    if directory.exists():
        shutil.rmtree(directory)
    _say(f"Starting Kafka {args.version} ...")
    kafka = LocalKafka(
        version=args.version,
        security=security,
        jvm_options=_JVM_PROFILES[args.jvm],
        directory=directory,
        detached=True,
        plaintext_port=port or None,
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
    # stdout carries the address alone, for BOOTSTRAP=$(python -m ... broker start)
    print(kafka.bootstrap_servers, flush=True)
    lines = [
        f"Kafka {kafka.version} is running in the background "
        f"(started in {kafka.startup_seconds:.1f} s, pid {node.pid})",
        f"  bootstrap servers: {kafka.bootstrap_servers}",
    ]
    lines += [f"  {proto} listener: {addr}" for proto, addr in kafka.listeners.items()][1:]
    if kafka.ca_file:
        lines.append(f"  CA file: {kafka.ca_file}")
    for user in kafka.users:
        lines.append(f"  SASL user: {user.username} / {user.password}")
    lines += [
        f"  data and log: {directory} (log: {node.log_file.name})",
        f"  stop it with: {STOP_COMMAND}",
    ]
    _say("\n".join(lines))
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
    resolve.add_argument(
        "--schema-registry",
        action="store_true",
        help="also build the tests' schema registry (Apicurio Registry, Maven, minutes once)",
    )
    resolve.set_defaults(func=cmd_resolve)

    broker = sub.add_parser("broker", help="a persistent single-node broker in the background")
    actions = broker.add_subparsers(dest="action", required=True)
    start = actions.add_parser("start", help="start it and print its bootstrap address")
    start.add_argument("--version", choices=SUPPORTED_VERSIONS, default=DEFAULT_VERSION)
    start.add_argument(
        "--port",
        type=int,
        default=None,
        help=f"PLAINTEXT port (default: {DEFAULT_PORT} if free, else a free one; 0: any free)",
    )
    start.add_argument(
        "--jvm",
        choices=sorted(_JVM_PROFILES),
        default="fast",
        help="'throughput' (full JIT, G1, 1 GiB heap) for benchmarks",
    )
    start.add_argument(
        "--listeners",
        type=parse_listeners,
        default=PLAINTEXT_ONLY,
        metavar="all|SASL_PLAINTEXT,SSL,SASL_SSL",
        help="client listeners beside PLAINTEXT (SSL ones need 'cryptography'; default none)",
    )
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
