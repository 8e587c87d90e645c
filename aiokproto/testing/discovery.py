"""Which Kafka the tests talk to: external, local jars, or a container."""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from aiokproto.testing.broker_config import ALL_LISTENERS, SecurityOptions
from aiokproto.testing.cluster import LocalKafka
from aiokproto.testing.errors import KafkaHarnessError
from aiokproto.testing.jars import DEFAULT_VERSION, check_version, is_resolved, tool_on_path
from aiokproto.testing.node import find_java

BOOTSTRAP_ENV = "KAFKA_BOOTSTRAP_SERVERS"
VERSION_ENV = "AIOKPROTO_KAFKA_VERSION"
IMAGE_ENV = "AIOKPROTO_KAFKA_IMAGE"

# Confluent Platform images closest to each Apache Kafka version (testcontainers'
# KafkaContainer knows how to configure these in KRaft mode).
CONTAINER_IMAGES: Mapping[str, str] = {
    "4.4.0": "confluentinc/cp-kafka:8.0.0",
    "4.3.1": "confluentinc/cp-kafka:8.0.0",
    "3.9.1": "confluentinc/cp-kafka:7.9.0",
}


@runtime_checkable
class KafkaService(Protocol):
    """What every backend offers a test: where to connect, which version, how to stop."""

    @property
    def bootstrap_servers(self) -> str: ...

    @property
    def version(self) -> str: ...

    def stop(self) -> None: ...


@dataclass(frozen=True)
class ExternalKafka:
    """A cluster someone else runs (``KAFKA_BOOTSTRAP_SERVERS``); never started or
    stopped by us."""

    bootstrap_servers: str
    version: str

    def stop(self) -> None:
        """Nothing to do: the cluster is not ours."""


class ContainerKafka:
    """A single-node KRaft broker in Docker through testcontainers."""

    def __init__(self, version: str, image: str | None = None) -> None:
        self.version = version
        self.image = image or os.environ.get(IMAGE_ENV) or CONTAINER_IMAGES[version]
        self._container: Any = None
        self._bootstrap: str | None = None

    @property
    def bootstrap_servers(self) -> str:
        if self._bootstrap is None:
            raise KafkaHarnessError("the Kafka container has not been started")
        return self._bootstrap

    def start(self, timeout: int = 120) -> ContainerKafka:
        try:
            from testcontainers.community.kafka import KafkaContainer
        except ImportError:
            from testcontainers.kafka import KafkaContainer
        container = (
            KafkaContainer(image=self.image)
            .with_kraft()
            # Same test-friendly defaults as LocalKafka's single node.
            .with_env("KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS", "0")
            .with_env("KAFKA_AUTO_CREATE_TOPICS_ENABLE", "true")
            .with_env("KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR", "1")
            .with_env("KAFKA_TRANSACTION_STATE_LOG_MIN_ISR", "1")
        )
        container.start(timeout=timeout)
        self._container = container
        self._bootstrap = str(container.get_bootstrap_server())
        return self

    def stop(self) -> None:
        if self._container is not None:
            self._container.stop()
            self._container = None
            self._bootstrap = None


def requested_version(explicit: str | None = None) -> str:
    """``explicit`` or ``$AIOKPROTO_KAFKA_VERSION`` or the default, validated."""
    return check_version(explicit or os.environ.get(VERSION_ENV) or DEFAULT_VERSION)


def external_bootstrap() -> str | None:
    value = os.environ.get(BOOTSTRAP_ENV, "").strip()
    return value or None


def local_jars_possible(version: str) -> bool:
    """Java is there, and the jars are cached or Maven can fetch them."""
    return find_java() is not None and (is_resolved(version) or tool_on_path("mvn") is not None)


def docker_answers(timeout: float = 3.0) -> bool:
    try:
        docker: Any = importlib.import_module("docker")  # untyped; ships with testcontainers
    except ImportError:
        return False
    try:
        client = docker.from_env(timeout=int(max(1, timeout)))
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:  # any failure to reach the engine means "no Docker"
        return False


def kafka_for_tests(
    version: str | None = None,
    *,
    nodes: int = 1,
    security: SecurityOptions = ALL_LISTENERS,
    overrides: Mapping[str, str | None] | None = None,
) -> KafkaService:
    """A running Kafka, first match wins:

    1. ``$KAFKA_BOOTSTRAP_SERVERS`` set: that external cluster (not started or stopped);
    2. ``java`` plus cached jars or ``mvn``: a :class:`LocalKafka` started now;
    3. a Docker engine that answers: a testcontainers broker (single node, PLAINTEXT);
    4. otherwise :class:`KafkaHarnessError` saying what to install.

    The caller owns the result and must call ``stop()``.
    """
    wanted = requested_version(version)
    bootstrap = external_bootstrap()
    if bootstrap is not None:
        return ExternalKafka(bootstrap, os.environ.get("KAFKA_VERSION", wanted))
    if local_jars_possible(wanted):
        local = LocalKafka(nodes=nodes, version=wanted, security=security, overrides=overrides)
        return local.start()
    if nodes == 1 and docker_answers():
        return ContainerKafka(wanted).start()
    raise KafkaHarnessError(
        "no Kafka available for tests: set KAFKA_BOOTSTRAP_SERVERS to use a running "
        "cluster, or install Java 17+ and Maven (e.g. 'apt-get install openjdk-17-jre-headless "
        "maven') so the harness can run Kafka from Maven Central jars, or start a Docker "
        "engine for testcontainers"
        + ("" if nodes == 1 else f" (a {nodes}-node cluster needs Java and Maven)")
    )
