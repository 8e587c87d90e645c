"""A local KRaft cluster of 1..N combined broker+controller nodes."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Self

from aiokproto.testing import probe
from aiokproto.testing.broker_config import (
    ALL_LISTENERS,
    PLAINTEXT,
    NodeAddress,
    SaslUser,
    SecurityOptions,
    new_cluster_id,
    scram_format_args,
    server_properties,
)
from aiokproto.testing.certs import TlsFiles, generate_tls_files
from aiokproto.testing.errors import KafkaHarnessError
from aiokproto.testing.jars import DEFAULT_VERSION, check_version, resolve_jars
from aiokproto.testing.lifecycle import BlockingService
from aiokproto.testing.node import FAST_START_JVM_OPTIONS, KafkaNode, find_java
from aiokproto.testing.ports import free_ports

#: share.version to format a node of each Kafka version with (1 where not listed): the
#: release's own default (``kafka-storage version-mapping``)
_SHARE_VERSION = {"4.4.0": 2}


class LocalKafka(BlockingService):
    """Apache Kafka in KRaft mode, run from jars resolved from Maven Central.

    ``LocalKafka()`` is one combined broker+controller; ``LocalKafka(nodes=3)`` is three
    combined nodes forming a 3-voter quorum (replication factor 3, min ISR 2), which
    survives losing any one node. Every node has a PLAINTEXT listener and, by default,
    SASL_PLAINTEXT, SSL and SASL_SSL listeners too (see ``security``).

    Use as a context manager (``with`` or ``async with``) or call start()/stop().
    ``directory`` keeps the node dirs at a chosen place (not deleted by stop());
    ``detached`` leaves the JVMs running after this Python process exits (the CLI's
    persistent broker); ``plaintext_port`` pins a single node's PLAINTEXT port;
    ``extra_classpath`` puts directories or jars in front of Kafka's (plugins such as a
    ``metric.reporters`` class, configured through ``overrides``).
    """

    def __init__(
        self,
        *,
        nodes: int = 1,
        version: str = DEFAULT_VERSION,
        security: SecurityOptions = ALL_LISTENERS,
        overrides: Mapping[str, str | None] | None = None,
        jvm_options: Sequence[str] = FAST_START_JVM_OPTIONS,
        cache_dir: Path | None = None,
        directory: Path | None = None,
        start_timeout: float = 120.0,
        detached: bool = False,
        plaintext_port: int | None = None,
        extra_classpath: Sequence[str | Path] = (),
    ) -> None:
        if nodes < 1:
            raise KafkaHarnessError("a cluster needs at least one node")
        if plaintext_port is not None and nodes != 1:
            raise KafkaHarnessError("a fixed PLAINTEXT port only works for a single node")
        self.version = check_version(version)
        self.security = security
        self.start_timeout = start_timeout
        self._node_count = nodes
        self._overrides = dict(overrides or {})
        self._jvm_options = tuple(jvm_options)
        self._cache_dir = cache_dir
        self._own_directory = directory is None
        self._directory = directory
        self._detached = detached
        self._plaintext_port = plaintext_port
        self._extra_classpath = tuple(str(p) for p in extra_classpath)
        self._nodes: dict[int, KafkaNode] = {}
        self.cluster_id = new_cluster_id()
        self.tls: TlsFiles | None = None
        self.startup_seconds: float | None = None

    # -- addresses for clients -----------------------------------------------------------

    @property
    def directory(self) -> Path:
        if self._directory is None:
            raise KafkaHarnessError("the cluster has not been started")
        return self._directory

    @property
    def nodes(self) -> list[KafkaNode]:
        return [self._nodes[i] for i in sorted(self._nodes)]

    def node(self, node_id: int) -> KafkaNode:
        try:
            return self._nodes[node_id]
        except KeyError:
            raise KafkaHarnessError(f"no node {node_id} (have {sorted(self._nodes)})") from None

    @property
    def bootstrap_servers(self) -> str:
        return self.bootstrap(PLAINTEXT)

    def bootstrap(self, protocol: str = PLAINTEXT, *, running_only: bool = False) -> str:
        """Comma-separated ``host:port`` of every node's ``protocol`` listener."""
        nodes = [n for n in self.nodes if n.is_running or not running_only]
        if not nodes:
            raise KafkaHarnessError("the cluster has no nodes (not started?)")
        return ",".join(n.bootstrap(protocol) for n in nodes)

    @property
    def listeners(self) -> dict[str, str]:
        """Security protocol -> bootstrap string, for every listener the nodes have."""
        return {proto: self.bootstrap(proto) for proto in [PLAINTEXT, *self.security.protocols]}

    @property
    def ca_file(self) -> Path | None:
        return self.tls.ca_file if self.tls else None

    @property
    def users(self) -> tuple[SaslUser, ...]:
        return self.security.users if self.security.has_sasl else ()

    @property
    def sasl_mechanisms(self) -> tuple[str, ...]:
        return self.security.mechanisms if self.security.has_sasl else ()

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> Self:
        """Resolve jars, format every node's storage and start all nodes; returns when
        every node answers Metadata listing all brokers."""
        if self._nodes:
            raise KafkaHarnessError("the cluster is already started")
        began = time.monotonic()
        java = find_java()
        if java is None:
            raise KafkaHarnessError("'java' (17+) is not on PATH and JAVA_HOME is not set")
        classpath = os.pathsep.join(
            [*self._extra_classpath, str(resolve_jars(self.version, self._cache_dir) / "*")]
        )
        if self._directory is None:
            self._directory = Path(tempfile.mkdtemp(prefix=f"aiokproto-kafka-{self.version}-"))
        try:
            self._create_nodes(java, classpath)
            self._format_all()
            for node in self.nodes:
                node.launch()
            expected = list(self._nodes)
            deadline = time.monotonic() + self.start_timeout
            for node in self.nodes:
                node.wait_ready(expected, timeout=max(1.0, deadline - time.monotonic()))
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Stop every node, then delete the cluster directory if the cluster created it.

        Nodes stop one after another with SIGTERM (SIGKILL after ``timeout``). The last
        node of a multi-node cluster is SIGKILLed instead: alone it has no quorum to
        complete a controlled shutdown and would only hang until the timeout.
        """
        try:
            running = [n for n in self.nodes if n.is_running]
            for index, node in enumerate(running):
                if len(running) > 1 and index == len(running) - 1:
                    node.kill()
                else:
                    node.stop(timeout)
            for node in self.nodes:
                node.kill()  # no-op for stopped nodes; reaps anything left
        finally:
            self._nodes.clear()
            if self._own_directory and self._directory is not None and not self._detached:
                shutil.rmtree(self._directory, ignore_errors=True)
                self._directory = None

    def stop_node(self, node_id: int, timeout: float = 30.0) -> None:
        """Gracefully stop one node (controlled shutdown: leadership moves first)."""
        self.node(node_id).stop(timeout)

    def kill_node(self, node_id: int) -> None:
        """SIGKILL one node; the others notice after broker.session.timeout.ms."""
        self.node(node_id).kill()

    def restart_node(self, node_id: int, timeout: float | None = None) -> None:
        """Start a stopped or killed node again with its old data and ports, and wait
        until it and every other running node see each other."""
        node = self.node(node_id)
        if node.is_running:
            node.stop()
        node.launch()
        running = [n.node_id for n in self.nodes if n.is_running]
        limit = timeout if timeout is not None else self.start_timeout
        deadline = time.monotonic() + limit
        try:
            for other in [node, *(n for n in self.nodes if n.is_running and n is not node)]:
                other.wait_ready(running, timeout=max(1.0, deadline - time.monotonic()))
        except BaseException:
            node.kill()
            raise

    def wait_for_brokers(self, broker_ids: Sequence[int], timeout: float = 30.0) -> None:
        """Wait until every running node's Metadata lists exactly ``broker_ids``."""
        wanted = frozenset(broker_ids)
        deadline = time.monotonic() + timeout
        while True:
            seen: dict[int, frozenset[int]] = {}
            for node in self.nodes:
                if not node.is_running:
                    continue
                host, port = node.bootstrap().rsplit(":", 1)
                try:
                    seen[node.node_id] = probe.metadata(host, int(port), timeout=2.0).broker_ids
                except (OSError, probe.ProbeError):
                    seen[node.node_id] = frozenset()
            if seen and all(ids == wanted for ids in seen.values()):
                return
            if time.monotonic() >= deadline:
                raise KafkaHarnessError(
                    f"brokers never converged on {sorted(wanted)}: "
                    + ", ".join(f"node {k} sees {sorted(v)}" for k, v in sorted(seen.items()))
                )
            time.sleep(0.2)

    def rss_bytes(self) -> dict[int, int | None]:
        return {n.node_id: n.rss_bytes() for n in self.nodes}

    def log_tail(self) -> str:
        return "\n".join(n.log_tail() for n in self.nodes)

    def __repr__(self) -> str:
        state = self.bootstrap_servers if self._nodes else "not started"
        return f"LocalKafka(version={self.version!r}, nodes={self._node_count}, {state})"

    # -- internals -------------------------------------------------------------------------

    def _create_nodes(self, java: str, classpath: str) -> None:
        protocols = [PLAINTEXT, *self.security.protocols]
        per_node = len(protocols) + 1
        ports = free_ports(per_node * self._node_count)
        addresses = []
        for index in range(self._node_count):
            chunk = ports[index * per_node : (index + 1) * per_node]
            if self._plaintext_port:
                chunk[0] = self._plaintext_port
            addresses.append(
                NodeAddress(
                    node_id=index + 1,
                    controller_port=chunk[-1],
                    ports=dict(zip(protocols, chunk[:-1], strict=True)),
                )
            )
        if self.security.needs_tls:
            self.tls = generate_tls_files(self.directory / "tls")
        for address in addresses:
            props = server_properties(
                address,
                addresses,
                self.version,
                self.directory / f"node-{address.node_id}" / "data",
                self.security,
                self.tls,
                self._overrides,
            )
            self._nodes[address.node_id] = KafkaNode(
                address,
                self.version,
                self.directory / f"node-{address.node_id}",
                java,
                classpath,
                props,
                self._jvm_options,
                detached=self._detached,
            )

    def _format_all(self) -> None:
        # One short-lived JVM per node; running them side by side halves the wait.
        args = list(scram_format_args(self.security))
        if not self.version.startswith("3."):
            # share groups (KIP-932) need share.version >= 1; a fresh 4.3 node has it,
            # and saying so makes a node of a version that does not fail at format time.
            # 4.4's default is 2 (adds the share-group dead-letter queue, KIP-1191).
            level = _SHARE_VERSION.get(self.version, 1)
            args += ["--feature", f"share.version={level}"]
        pending = [(n, n.start_format(self.cluster_id, args)) for n in self.nodes]
        for node, proc in pending:
            node.finish_format(proc)
