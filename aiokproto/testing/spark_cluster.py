"""A Spark standalone cluster (one master, N workers) on loopback, from the installed pyspark.

Each daemon is a JVM started with pyspark's bundled ``bin/spark-class``; executors that
the workers launch are separate JVMs with their own Python workers, so a job submitted
to ``master_url`` runs like on a real cluster (only the machine is shared).

    with SparkStandalone(workers=2) as cluster:      # or: async with ...
        spark = SparkSession.builder.master(cluster.master_url)...

``python -m aiokproto.testing.spark_cluster`` keeps one running until Ctrl-C/SIGTERM.
Every wait is bounded; a daemon that dies or never registers fails ``start`` with the
tail of its log.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from aiokproto.testing.errors import KafkaHarnessError
from aiokproto.testing.java_server import log_tail
from aiokproto.testing.lifecycle import BlockingService
from aiokproto.testing.ports import free_ports
from aiokproto.testing.processes import spawn, terminate

HOST = "127.0.0.1"
# Master and workers do little work: skip the C2 compiler (start-up CPU on small machines).
DAEMON_JAVA_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


class SparkClusterError(KafkaHarnessError):
    """The standalone cluster could not be started."""


def spark_home() -> Path:
    """The pyspark package directory, which holds ``bin/spark-class`` and ``jars/``."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise SparkClusterError("pyspark is not installed (the spark extra)")
    home = Path(spec.origin).parent
    if not (home / "bin" / "spark-class").exists():
        raise SparkClusterError(f"{home} has no bin/spark-class")
    return home


class _Daemon:
    def __init__(self, name: str, proc: subprocess.Popen[bytes], log: Path) -> None:
        self.name = name
        self.proc = proc
        self.log = log


class SparkStandalone(BlockingService):
    """A master and ``workers`` workers, each with ``worker_cores`` and ``worker_memory``."""

    def __init__(
        self,
        workers: int = 2,
        *,
        worker_cores: int = 1,
        worker_memory: str = "1g",
        daemon_memory: str = "256m",
        base_dir: Path | None = None,
        python: str | None = None,
        start_timeout: float = 120.0,
        stop_grace: float = 10.0,
    ) -> None:
        self.workers = workers
        self.worker_cores = worker_cores
        self.worker_memory = worker_memory
        self.daemon_memory = daemon_memory
        self.python = python or sys.executable
        self.start_timeout = start_timeout
        self.stop_grace = stop_grace
        self._own_dir = base_dir is None
        self.base_dir = base_dir or Path(tempfile.mkdtemp(prefix="aiokproto-spark-"))
        self.port = 0
        self.ui_port = 0
        self._daemons: list[_Daemon] = []

    @property
    def master_url(self) -> str:
        return f"spark://{HOST}:{self.port}"

    @property
    def ui_url(self) -> str:
        return f"http://{HOST}:{self.ui_port}"

    def _env(self, name: str) -> dict[str, str]:
        home = spark_home()
        conf = self.base_dir / "conf"  # empty: no spark-defaults/spark-env from elsewhere
        conf.mkdir(parents=True, exist_ok=True)
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("SPARK_", "PYSPARK_")) and k != "_JAVA_OPTIONS"
        }
        env.update(
            SPARK_HOME=str(home),
            SPARK_CONF_DIR=str(conf),
            SPARK_LOG_DIR=str(self.base_dir / "logs"),
            SPARK_LOCAL_IP=HOST,
            SPARK_LOCAL_HOSTNAME="localhost",
            SPARK_DAEMON_MEMORY=self.daemon_memory,
            SPARK_DAEMON_JAVA_OPTS=DAEMON_JAVA_OPTS,
            SPARK_LOCAL_DIRS=str(self.base_dir / name / "local"),
            PYSPARK_PYTHON=self.python,
        )
        return env

    def _spawn(self, name: str, main_class: str, args: list[str], env: dict[str, str]) -> None:
        work = self.base_dir / name
        (work / "local").mkdir(parents=True, exist_ok=True)
        log = self.base_dir / "logs" / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        argv = [str(spark_home() / "bin" / "spark-class"), main_class, *args]
        proc = spawn(argv, cwd=work, output=log, env=env)
        self._daemons.append(_Daemon(name, proc, log))

    def start(self) -> SparkStandalone:
        """Start the master, then the workers; return once every worker is ALIVE."""
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        ports = free_ports(2 + self.workers)
        self.port, self.ui_port = ports[0], ports[1]
        self._spawn(
            "master",
            "org.apache.spark.deploy.master.Master",
            ["--host", HOST, "--port", str(self.port), "--webui-port", str(self.ui_port)],
            self._env("master"),
        )
        deadline = time.monotonic() + self.start_timeout
        self._wait(deadline, lambda state: state is not None, "the master web UI")
        for i in range(self.workers):
            name = f"worker-{i + 1}"
            env = self._env(name)
            env.update(
                SPARK_WORKER_CORES=str(self.worker_cores),
                SPARK_WORKER_MEMORY=self.worker_memory,
                SPARK_WORKER_DIR=str(self.base_dir / name / "work"),
            )
            self._spawn(
                name,
                "org.apache.spark.deploy.worker.Worker",
                [
                    "--host",
                    HOST,
                    "--webui-port",
                    str(ports[2 + i]),
                    "--cores",
                    str(self.worker_cores),
                    "--memory",
                    self.worker_memory,
                    "--work-dir",
                    str(self.base_dir / name / "work"),
                    self.master_url,
                ],
                env,
            )
        self._wait(
            deadline,
            lambda state: state is not None and self._alive_workers(state) >= self.workers,
            f"{self.workers} workers to register",
        )

    @staticmethod
    def _alive_workers(state: dict[str, Any]) -> int:
        return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")

    def state(self) -> dict[str, Any] | None:
        """The master's JSON status (workers, applications), or None if unreachable."""
        try:
            with urllib.request.urlopen(f"{self.ui_url}/json/", timeout=2) as resp:
                data: dict[str, Any] = json.loads(resp.read())
                return data
        except (OSError, urllib.error.URLError, ValueError):
            return None

    def _wait(self, deadline: float, done: Any, what: str) -> None:
        while True:
            for d in self._daemons:
                if d.proc.poll() is not None:
                    raise SparkClusterError(
                        f"spark {d.name} exited with {d.proc.returncode} while waiting for "
                        f"{what}; log {d.log}:\n{log_tail(d.log)}"
                    )
            if done(self.state()):
                return
            if time.monotonic() > deadline:
                logs = "\n".join(
                    f"--- {d.name} ({d.log}):\n{log_tail(d.log, 10)}" for d in self._daemons
                )
                raise SparkClusterError(f"timed out waiting for {what}\n{logs}")
            time.sleep(0.25)

    def stop(self) -> None:
        """SIGTERM every daemon (workers first), SIGKILL what is left after the grace,
        then kill whatever the daemons launched (executors) and is still running."""
        daemons = list(reversed(self._daemons))
        self._daemons.clear()
        for d in daemons:
            if d.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    d.proc.send_signal(signal.SIGTERM)
        for d in daemons:
            terminate(d.proc, grace=self.stop_grace)
            # Each daemon leads its own process group (spawn starts a new session);
            # executors and their Python workers are in it unless they left it.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(d.proc.pid, signal.SIGKILL)
        if self._own_dir:
            shutil.rmtree(self.base_dir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m aiokproto.testing.spark_cluster",
        description="Run a Spark standalone master and workers on 127.0.0.1 until "
        "Ctrl-C or SIGTERM.",
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--worker-cores", type=int, default=1)
    parser.add_argument("--worker-memory", default="1g")
    parser.add_argument("--dir", type=Path, default=None, help="logs and work dirs (kept)")
    parser.add_argument("--pid-file", type=Path, default=None)
    args = parser.parse_args(argv)

    def on_term(_sig: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    cluster = SparkStandalone(
        args.workers,
        worker_cores=args.worker_cores,
        worker_memory=args.worker_memory,
        base_dir=args.dir.resolve() if args.dir else None,
    )
    try:
        cluster.start()
        if args.pid_file:
            args.pid_file.parent.mkdir(parents=True, exist_ok=True)
            args.pid_file.write_text(f"{os.getpid()}\n")
        print(f"Spark master: {cluster.master_url}  (web UI {cluster.ui_url})", flush=True)
        print(f"logs: {cluster.base_dir / 'logs'}; Ctrl-C to stop", flush=True)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        print("stopping the Spark cluster", flush=True)
    except SparkClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        cluster.stop()
        if args.pid_file:
            args.pid_file.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
