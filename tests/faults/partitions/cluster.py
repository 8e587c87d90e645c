"""A 3-node KRaft cluster whose JVMs run inside the namespaces of a ``netns.Network``:
each node listens on its own namespace address (PLAINTEXT 9092, CONTROLLER 9093) and
the quorum voters are those addresses, so every byte between nodes, and between a
client and a node, crosses the switch where the test cuts links.

The nodes are aiokproto.testing's ``KafkaNode`` (same configuration, logs, process
tracking: a JVM dies with the test process) started through ``ip netns exec``. The test
process stays in the root namespace and cannot reach them; readiness is probed from the
client namespace by a child Python.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from aiokproto.testing import KafkaHarnessError
from aiokproto.testing.broker_config import (
    PLAINTEXT,
    PLAINTEXT_ONLY,
    NodeAddress,
    new_cluster_id,
    server_properties,
)
from aiokproto.testing.jars import DEFAULT_VERSION, resolve_jars
from aiokproto.testing.node import KafkaNode, find_java
from tests.faults.partitions.netns import Network

CLIENT_PORT = 9092
CONTROLLER_PORT = 9093
ROOT = Path(__file__).resolve().parents[3]

# Faster than the harness defaults so a cut bites within seconds: a follower cut off
# leaves the ISR after 8 s (30 s by default).
OVERRIDES = {"replica.lag.time.max.ms": "8000"}

_READY_PROBE = """
import sys, time
from aiokproto.testing import probe
hosts, want = sys.argv[1].split(","), set(map(int, sys.argv[2].split(",")))
deadline = time.monotonic() + float(sys.argv[3])
last = "no answer"
while time.monotonic() < deadline:
    try:
        if all(probe.metadata(h, 9092, timeout=2.0).broker_ids >= want for h in hosts):
            sys.exit(0)
        last = "not every broker listed yet"
    except (OSError, probe.ProbeError) as exc:
        last = f"{type(exc).__name__}: {exc}"
    time.sleep(0.3)
sys.exit(f"not ready: {last}")
"""


class NetnsNode(KafkaNode):
    """A KafkaNode whose JVM (and storage format) runs inside a network namespace."""

    def __init__(self, namespace_argv: Sequence[str], *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._namespace_argv = list(namespace_argv)

    def _java_prefix(self) -> list[str]:
        return [*self._namespace_argv, *super()._java_prefix()]


class NetnsKafka:
    def __init__(
        self,
        net: Network,
        brokers: Sequence[str],
        client: str,
        directory: Path,
        version: str = DEFAULT_VERSION,
    ) -> None:
        self.net = net
        self.brokers = list(brokers)  # host names; node id = position + 1
        self.client = client
        self.directory = directory
        self.version = version
        self.nodes: dict[int, NetnsNode] = {}
        self.startup_seconds = 0.0

    def host_of(self, node_id: int) -> str:
        return self.brokers[node_id - 1]

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{self.net.hosts[h]}:{CLIENT_PORT}" for h in self.brokers)

    def start(self, timeout: float = 180.0) -> None:
        began = time.monotonic()
        java = find_java()
        if java is None:
            raise KafkaHarnessError("'java' (17+) is not on PATH and JAVA_HOME is not set")
        classpath = str(resolve_jars(self.version) / "*")
        addresses = [
            NodeAddress(i + 1, CONTROLLER_PORT, {PLAINTEXT: CLIENT_PORT})
            for i in range(len(self.brokers))
        ]
        voters = ",".join(
            f"{a.node_id}@{self.net.hosts[self.host_of(a.node_id)]}:{CONTROLLER_PORT}"
            for a in addresses
        )
        cluster_id = new_cluster_id()
        for address in addresses:
            ip = self.net.hosts[self.host_of(address.node_id)]
            directory = self.directory / f"node-{address.node_id}"
            props = server_properties(
                address,
                addresses,
                self.version,
                directory / "data",
                PLAINTEXT_ONLY,
                None,
                {
                    **OVERRIDES,
                    "listeners": f"PLAINTEXT://{ip}:{CLIENT_PORT},CONTROLLER://{ip}:{CONTROLLER_PORT}",
                    "advertised.listeners": f"PLAINTEXT://{ip}:{CLIENT_PORT}",
                    "controller.quorum.voters": voters,
                },
            )
            self.nodes[address.node_id] = NetnsNode(
                self.net.exec_argv(self.host_of(address.node_id)),
                address,
                self.version,
                directory,
                java,
                classpath,
                props,
            )
        args = [] if self.version.startswith("3.") else ["--feature", "share.version=1"]
        pending = [(n, n.start_format(cluster_id, args)) for n in self.nodes.values()]
        for node, proc in pending:
            node.finish_format(proc)
        for node in self.nodes.values():
            node.launch()
        self.wait_ready(timeout)
        self.startup_seconds = time.monotonic() - began

    def wait_ready(self, timeout: float) -> None:
        """Every node answers Metadata listing every broker, seen from the client."""
        hosts = ",".join(self.net.hosts[h] for h in self.brokers)
        ids = ",".join(str(i) for i in self.nodes)
        argv = [*self.net.exec_argv(self.client), sys.executable, "-c", _READY_PROBE]
        try:
            done = subprocess.run(
                [*argv, hosts, ids, str(timeout)],
                cwd=ROOT, capture_output=True, text=True, timeout=timeout + 30, check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            raise KafkaHarnessError("the readiness probe hung", self.log_tail()) from None
        dead = [n.node_id for n in self.nodes.values() if not n.is_running]
        if done.returncode != 0 or dead:
            raise KafkaHarnessError(
                f"cluster not ready ({done.stderr.strip()[-300:]}; exited nodes {dead})",
                self.log_tail(),
            )

    def stop(self) -> None:
        # SIGKILL: a controlled shutdown across cut links only waits for its timeout,
        # and the data directory goes with the test's tmp_path anyway.
        for node in self.nodes.values():
            node.kill()

    def log_tail(self) -> str:
        return "\n".join(n.log_tail(30) for n in self.nodes.values())
