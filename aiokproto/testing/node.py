"""One KRaft node (combined broker + controller) as a child JVM."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from aiokproto.testing import probe, processes
from aiokproto.testing.broker_config import (
    LOOPBACK,
    PLAINTEXT,
    NodeAddress,
    log4j2_config,
    render_properties,
)
from aiokproto.testing.errors import KafkaHarnessError

# Measured on a 2-core box: C1-only JIT and SerialGC start the broker noticeably faster
# and keep RSS lower; tests are latency-bound, not throughput-bound.
FAST_START_JVM_OPTIONS: tuple[str, ...] = (
    "-Xms256m",
    "-Xmx512m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
)
# For benchmarks against a long-running broker: full JIT, G1.
THROUGHPUT_JVM_OPTIONS: tuple[str, ...] = (
    "-Xms1g",
    "-Xmx1g",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
)

_FORMAT_TIMEOUT_S = 120.0
_LOG_TAIL_LINES = 60


class KafkaNode:
    """A broker+controller process with its own directory.

    Layout of ``directory``: ``server.properties``, ``log4j2.xml``, ``data/`` (log.dirs
    and KRaft metadata), ``logs/server.log`` (the broker's log4j output) and
    ``stdout.log`` (JVM stdout/stderr: crashes before logging starts land here).
    """

    def __init__(
        self,
        address: NodeAddress,
        version: str,
        directory: Path,
        java: str,
        classpath: str,
        properties: Mapping[str, str],
        jvm_options: Sequence[str] = FAST_START_JVM_OPTIONS,
        detached: bool = False,
    ) -> None:
        self.address = address
        self.version = version
        self.directory = directory
        self._java = java
        self._classpath = classpath
        self._properties = dict(properties)
        self._jvm_options = tuple(jvm_options)
        self._detached = detached
        self._proc: subprocess.Popen[bytes] | None = None

    # -- paths and facts -------------------------------------------------------------

    @property
    def node_id(self) -> int:
        return self.address.node_id

    @property
    def properties_file(self) -> Path:
        return self.directory / "server.properties"

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    @property
    def log_file(self) -> Path:
        return self.directory / "logs" / "server.log"

    @property
    def stdout_file(self) -> Path:
        return self.directory / "stdout.log"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def bootstrap(self, protocol: str = PLAINTEXT) -> str:
        return self.address.address(protocol)

    def rss_bytes(self) -> int | None:
        return processes.rss_bytes(self._proc.pid) if self.is_running and self._proc else None

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        parts = []
        for path in (self.log_file, self.stdout_file):
            text = _tail(path, lines)
            if text:
                parts.append(f"[{path.name} of node {self.node_id}]\n{text}")
        return "\n".join(parts)

    # -- lifecycle ---------------------------------------------------------------------

    def write_config(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        self.properties_file.write_text(render_properties(self._properties), encoding="utf-8")
        (self.directory / "log4j2.xml").write_text(log4j2_config(self.log_file), "utf-8")

    def format_command(self, cluster_id: str, extra_args: Sequence[str]) -> list[str]:
        return [
            *self._java_prefix(),
            "kafka.tools.StorageTool", "format",
            "-t", cluster_id,
            "-c", str(self.properties_file),
            *extra_args,
        ]  # fmt: skip

    def start_format(self, cluster_id: str, extra_args: Sequence[str]) -> subprocess.Popen[bytes]:
        """Launch ``StorageTool format`` for this node (caller waits: see finish_format)."""
        self.write_config()
        if self.data_dir.exists():
            shutil.rmtree(self.data_dir)
        return processes.spawn(
            self.format_command(cluster_id, extra_args), self.directory, self.stdout_file
        )

    def finish_format(self, proc: subprocess.Popen[bytes]) -> None:
        try:
            code = proc.wait(timeout=_FORMAT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            processes.kill(proc)
            raise KafkaHarnessError(
                f"formatting storage of node {self.node_id} took over {_FORMAT_TIMEOUT_S:.0f}s",
                self.log_tail(),
            ) from None
        processes.forget(proc)
        if code != 0:
            raise KafkaHarnessError(
                f"StorageTool format failed for node {self.node_id} (exit {code})",
                self.log_tail(),
            )

    def format(self, cluster_id: str, extra_args: Sequence[str] = ()) -> None:
        self.finish_format(self.start_format(cluster_id, extra_args))

    def launch(self) -> None:
        """Start the JVM without waiting for readiness (see wait_ready)."""
        if self.is_running:
            raise KafkaHarnessError(f"node {self.node_id} is already running")
        argv = [*self._java_prefix(), "kafka.Kafka", str(self.properties_file)]
        self._proc = processes.spawn(
            argv, self.directory, self.stdout_file, detached=self._detached
        )

    def wait_ready(self, expected_brokers: Collection[int] = (), timeout: float = 90.0) -> None:
        """Block until the node's PLAINTEXT listener answers ApiVersions and its Metadata
        lists every broker in ``expected_brokers`` (itself always included).

        Raises KafkaHarnessError (with the log tail) if the JVM exits or time runs out.
        """
        expected = {self.node_id, *expected_brokers}
        port = self.address.ports[PLAINTEXT]
        deadline = time.monotonic() + timeout
        last_issue = "no answer yet"
        while True:
            if self._proc is None or self._proc.poll() is not None:
                code = None if self._proc is None else self._proc.returncode
                raise KafkaHarnessError(
                    f"Kafka {self.version} node {self.node_id} exited during start (exit {code})",
                    self.log_tail(),
                )
            try:
                versions = probe.api_versions(LOOPBACK, port, timeout=2.0)
                if probe.API_METADATA not in versions:
                    raise probe.ProbeError("ApiVersions does not list Metadata")
                seen = probe.metadata(LOOPBACK, port, timeout=2.0).broker_ids
                if expected <= seen:
                    return
                last_issue = f"metadata lists brokers {sorted(seen)}, want {sorted(expected)}"
            except (OSError, probe.ProbeError) as exc:
                last_issue = f"{type(exc).__name__}: {exc}"
            if time.monotonic() >= deadline:
                raise KafkaHarnessError(
                    f"Kafka {self.version} node {self.node_id} not ready after {timeout:.0f}s "
                    f"({last_issue})",
                    self.log_tail(),
                )
            time.sleep(0.1)

    def start(self, expected_brokers: Collection[int] = (), timeout: float = 90.0) -> None:
        self.launch()
        try:
            self.wait_ready(expected_brokers, timeout)
        except BaseException:
            self.kill()
            raise

    def stop(self, timeout: float = 30.0) -> int | None:
        """Graceful shutdown (SIGTERM: controlled shutdown), SIGKILL after ``timeout``."""
        if self._proc is None:
            return None
        return processes.terminate(self._proc, grace=timeout)

    def kill(self) -> int | None:
        """Crash the node (SIGKILL): no controlled shutdown, leadership moves on timeout."""
        if self._proc is None:
            return None
        return processes.kill(self._proc)

    def _java_prefix(self) -> list[str]:
        return [
            self._java,
            *self._jvm_options,
            f"-Dlog4j2.configurationFile={self.directory / 'log4j2.xml'}",
            "-cp", self._classpath,
        ]  # fmt: skip


def find_java() -> str | None:
    """``$JAVA_HOME/bin/java`` if set and present, else ``java`` on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    return shutil.which("java")


def _tail(path: Path, lines: int) -> str:
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 64 * 1024))
            data = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(data.splitlines()[-lines:])
