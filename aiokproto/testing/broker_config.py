"""Broker configuration: server.properties, the log4j2 config and StorageTool arguments."""

from __future__ import annotations

import base64
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from aiokproto.testing.certs import TlsFiles
from aiokproto.testing.errors import KafkaHarnessError

PLAINTEXT = "PLAINTEXT"
SASL_PLAINTEXT = "SASL_PLAINTEXT"
SSL = "SSL"
SASL_SSL = "SASL_SSL"
SECURITY_PROTOCOLS: tuple[str, ...] = (PLAINTEXT, SASL_PLAINTEXT, SSL, SASL_SSL)
# OAUTHBEARER uses the broker's built-in unsecured-JWT validator (tests only): any
# unsigned token with a "sub" claim and a future "exp" is accepted.
REAUTH_TEST_SESSION_MS = 3000

SASL_MECHANISMS: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
CONTROLLER_LISTENER = "CONTROLLER"
LOOPBACK = "127.0.0.1"

# Credentials end up inside JAAS strings and StorageTool arguments: keep them plain.
_SAFE_CREDENTIAL = re.compile(r"^[A-Za-z0-9._-]+$")


@dataclass(frozen=True)
class SaslUser:
    username: str
    password: str

    def __post_init__(self) -> None:
        for value in (self.username, self.password):
            if not _SAFE_CREDENTIAL.match(value):
                raise KafkaHarnessError(
                    f"SASL credential {value!r} must match {_SAFE_CREDENTIAL.pattern}"
                )


DEFAULT_SASL_USERS: tuple[SaslUser, ...] = (
    SaslUser("alice", "alice-secret"),
    SaslUser("bob", "bob-secret"),
)


@dataclass(frozen=True)
class SecurityOptions:
    """Which listeners a node has besides PLAINTEXT and who may log in over SASL.

    PLAINTEXT is always present (inter-broker traffic and the default client listener).
    Every SASL mechanism in ``mechanisms`` accepts every user in ``users``.
    """

    protocols: tuple[str, ...] = (SASL_PLAINTEXT, SSL, SASL_SSL)
    users: tuple[SaslUser, ...] = DEFAULT_SASL_USERS
    mechanisms: tuple[str, ...] = SASL_MECHANISMS
    # "requested": a client certificate is optional, so both one-way TLS and mTLS work.
    ssl_client_auth: Literal["none", "requested", "required"] = "requested"

    def __post_init__(self) -> None:
        for proto in self.protocols:
            if proto not in SECURITY_PROTOCOLS or proto == PLAINTEXT:
                raise KafkaHarnessError(f"unknown extra security protocol {proto!r}")
        for mech in self.mechanisms:
            if mech not in SASL_MECHANISMS:
                raise KafkaHarnessError(f"unsupported SASL mechanism {mech!r}")

    @property
    def needs_tls(self) -> bool:
        return SSL in self.protocols or SASL_SSL in self.protocols

    @property
    def has_sasl(self) -> bool:
        return SASL_PLAINTEXT in self.protocols or SASL_SSL in self.protocols


ALL_LISTENERS = SecurityOptions()
PLAINTEXT_ONLY = SecurityOptions(protocols=())


@dataclass(frozen=True)
class NodeAddress:
    """The ports of one node: one per client security protocol, plus the controller."""

    node_id: int
    controller_port: int
    ports: Mapping[str, int] = field(default_factory=dict)  # security protocol -> port

    def address(self, protocol: str = PLAINTEXT) -> str:
        try:
            return f"{LOOPBACK}:{self.ports[protocol]}"
        except KeyError:
            raise KafkaHarnessError(
                f"node {self.node_id} has no {protocol} listener (has {sorted(self.ports)})"
            ) from None


def new_cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding.

    Like Kafka's own ``Uuid.randomUuid()``, never one starting with "-": the storage
    tool's argument parser would read it as an option (about 1 id in 64).
    """
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")
        if not text.startswith("-"):
            return text


def quorum_voters(nodes: Sequence[NodeAddress]) -> str:
    # Static voters work unchanged on 3.9 and 4.x and need no --standalone format flag.
    return ",".join(f"{n.node_id}@{LOOPBACK}:{n.controller_port}" for n in nodes)


def server_properties(
    node: NodeAddress,
    all_nodes: Sequence[NodeAddress],
    version: str,
    data_dir: Path,
    security: SecurityOptions,
    tls: TlsFiles | None,
    overrides: Mapping[str, str | None] | None = None,
) -> dict[str, str]:
    """The full server.properties of one combined broker+controller node."""
    size = len(all_nodes)
    replication = str(min(size, 3))
    min_isr = "2" if size >= 3 else "1"
    client_protocols = [PLAINTEXT, *security.protocols]
    listeners = [f"{p}://{node.address(p)}" for p in client_protocols]
    props: dict[str, str] = {
        "process.roles": "broker,controller",
        "node.id": str(node.node_id),
        "controller.quorum.voters": quorum_voters(all_nodes),
        "listeners": ",".join(
            [*listeners, f"{CONTROLLER_LISTENER}://{LOOPBACK}:{node.controller_port}"]
        ),
        "advertised.listeners": ",".join(listeners),
        "controller.listener.names": CONTROLLER_LISTENER,
        "inter.broker.listener.name": PLAINTEXT,
        "listener.security.protocol.map": ",".join(
            [*(f"{p}:{p}" for p in client_protocols), f"{CONTROLLER_LISTENER}:PLAINTEXT"]
        ),
        "log.dirs": str(data_dir),
        # Topic defaults that tests rely on.
        "num.partitions": "1",
        "auto.create.topics.enable": "true",
        "default.replication.factor": replication,
        "min.insync.replicas": min_isr,
        "offsets.topic.replication.factor": replication,
        "offsets.topic.num.partitions": "10",
        "transaction.state.log.replication.factor": replication,
        "transaction.state.log.min.isr": min_isr,
        "transaction.state.log.num.partitions": "10",
        "group.initial.rebalance.delay.ms": "0",
        # Tests write records with fixed old timestamps (2023): with the 7-day default
        # the first retention check (30 s after start) deletes them mid-test.
        "log.retention.ms": "-1",
        # Faster failure detection than the 9 s default, still tolerant of GC pauses.
        "broker.heartbeat.interval.ms": "1000",
        "broker.session.timeout.ms": "6000",
        # A 2-core CI box: fewer threads, less memory, same behaviour.
        "num.network.threads": "2",
        "num.io.threads": "4",
        "background.threads": "4",
        "num.recovery.threads.per.data.dir": "1",
        "log.cleaner.dedupe.buffer.size": str(32 * 1024 * 1024),
        "log.cleaner.backoff.ms": "1000",
    }
    if not version.startswith("3."):
        # KIP-848 groups: lower floors let a test set a short session timeout on its
        # group (consumer.session.timeout.ms); the broker defaults stay Kafka's.
        props["group.consumer.min.session.timeout.ms"] = "6000"
        props["group.consumer.min.heartbeat.interval.ms"] = "500"
        # share groups (KIP-932): the same for their session and heartbeat, and a 1 s
        # floor for a group's share.record.lock.duration.ms (the floor is 15 s by
        # default, a broker start setting; the duration 30 s) so lock expiry tests
        # take seconds
        props["group.share.min.session.timeout.ms"] = "6000"
        props["group.share.min.heartbeat.interval.ms"] = "500"
        props["group.share.min.record.lock.duration.ms"] = "1000"
        props["share.coordinator.state.topic.replication.factor"] = replication
        props["share.coordinator.state.topic.min.isr"] = min_isr
    if security.has_sasl:
        props.update(_sasl_properties(security))
    if security.needs_tls:
        if tls is None:
            raise KafkaHarnessError("SSL listeners requested but no TLS files were generated")
        props.update(
            {
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(tls.server_keystore),
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(tls.ca_file),
            }
        )
        # Listener-prefixed: the broker-wide ssl.client.auth only reaches SSL listeners.
        for proto in (SSL, SASL_SSL):
            if proto in security.protocols:
                props[f"listener.name.{proto.lower()}.ssl.client.auth"] = security.ssl_client_auth
    for key, value in (overrides or {}).items():
        if value is None:
            props.pop(key, None)
        else:
            props[key] = value
    return props


def _sasl_properties(security: SecurityOptions) -> dict[str, str]:
    props = {"sasl.enabled.mechanisms": ",".join(security.mechanisms)}
    plain_users = " ".join(f'user_{u.username}="{u.password}"' for u in security.users)
    plain_module = "org.apache.kafka.common.security.plain.PlainLoginModule"
    for proto in (SASL_PLAINTEXT, SASL_SSL):
        if proto not in security.protocols:
            continue
        prefix = f"listener.name.{proto.lower()}"
        for mech in security.mechanisms:
            if mech == "PLAIN":
                jaas = f"{plain_module} required {plain_users};"
            elif mech == "OAUTHBEARER":
                jaas = (
                    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
                    'required unsecuredLoginStringClaim_sub="broker";'
                )
            else:
                # SCRAM credentials live in the cluster metadata (added at format time).
                jaas = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            props[f"{prefix}.{mech.lower()}.sasl.jaas.config"] = jaas
    if SASL_PLAINTEXT in security.protocols and "PLAIN" in security.mechanisms:
        # Short sessions for PLAIN over SASL_PLAINTEXT only, so tests see KIP-368
        # re-authentication; other listener/mechanism pairs keep unlimited sessions.
        props["listener.name.sasl_plaintext.plain.connections.max.reauth.ms"] = str(
            REAUTH_TEST_SESSION_MS
        )
    return props


def scram_format_args(security: SecurityOptions) -> list[str]:
    """``--add-scram`` arguments for ``StorageTool format``: SCRAM users in KRaft are
    bootstrap metadata records, so they must exist before the first start."""
    if not security.has_sasl:
        return []
    args: list[str] = []
    for mech in security.mechanisms:
        if mech.startswith("SCRAM-"):
            for user in security.users:
                args += ["--add-scram", f"{mech}=[name={user.username},password={user.password}]"]
    return args


def render_properties(props: Mapping[str, str]) -> str:
    """Java .properties text; backslashes and line breaks escaped, keys sorted.
    (Config keys never contain '=' or ':', so keys need no further escaping.)"""

    def escape(text: str) -> str:
        return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")

    lines = [f"{escape(key)}={escape(value)}" for key, value in sorted(props.items())]
    return "# written by aiokproto.testing\n" + "\n".join(lines) + "\n"


def log4j2_config(log_file: Path) -> str:
    """A log4j2 XML config sending INFO and above to ``log_file`` (works for 3.9 and 4.x:
    both POMs bind SLF4J to log4j2)."""
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN">
  <Appenders>
    <File name="server" fileName="{_xml_escape(str(log_file))}" append="true">
      <PatternLayout pattern="[%d] %p %m (%c)%n"/>
    </File>
  </Appenders>
  <Loggers>
    <Logger name="kafka.request.logger" level="WARN"/>
    <Logger name="org.apache.kafka.clients.NetworkClient" level="WARN"/>
    <Root level="INFO"><AppenderRef ref="server"/></Root>
  </Loggers>
</Configuration>
"""


def _xml_escape(text: str) -> str:
    return (
        text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    )
