"""Pieces of the harness that need no broker: config, certificates, probe codec, jars."""

from __future__ import annotations

import ipaddress
import socket
import struct
import threading
from pathlib import Path

import pytest
from cryptography import x509

from aiokproto.testing import (
    ALL_LISTENERS,
    KafkaHarnessError,
    ProbeError,
    SaslUser,
    SecurityOptions,
    api_versions,
    generate_tls_files,
    metadata,
)
from aiokproto.testing.broker_config import (
    NodeAddress,
    new_cluster_id,
    render_properties,
    scram_format_args,
    server_properties,
)
from aiokproto.testing.jars import is_resolved, libs_dir, resolve_jars
from aiokproto.testing.ports import free_ports


def _three_nodes() -> list[NodeAddress]:
    return [
        NodeAddress(i, 9100 + i, {"PLAINTEXT": 9000 + i, "SASL_PLAINTEXT": 9010 + i})
        for i in (1, 2, 3)
    ]


def test_cluster_properties_replicate_and_use_static_voters(tmp_path: Path) -> None:
    nodes = _three_nodes()
    security = SecurityOptions(protocols=("SASL_PLAINTEXT",))
    props = server_properties(nodes[1], nodes, "4.3.1", tmp_path, security, None)
    assert props["node.id"] == "2"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:9101,2@127.0.0.1:9102,3@127.0.0.1:9103"
    assert props["default.replication.factor"] == "3"
    assert props["min.insync.replicas"] == "2"
    assert props["transaction.state.log.min.isr"] == "2"
    assert props["advertised.listeners"] == (
        "PLAINTEXT://127.0.0.1:9002,SASL_PLAINTEXT://127.0.0.1:9012"
    )
    assert "CONTROLLER://127.0.0.1:9102" in props["listeners"]
    jaas = props["listener.name.sasl_plaintext.plain.sasl.jaas.config"]
    assert 'user_alice="alice-secret"' in jaas


def test_single_node_properties_and_overrides(tmp_path: Path) -> None:
    node = NodeAddress(1, 9101, {"PLAINTEXT": 9001})
    security = SecurityOptions(protocols=())
    props = server_properties(
        node, [node], "3.9.1", tmp_path, security, None, {"num.partitions": "4", "x.y": None}
    )
    assert props["offsets.topic.replication.factor"] == "1"
    assert props["group.initial.rebalance.delay.ms"] == "0"
    assert props["num.partitions"] == "4"
    assert "share.coordinator.state.topic.replication.factor" not in props  # 4.x only
    assert "sasl.enabled.mechanisms" not in props


def test_ssl_listener_without_tls_files_is_an_error(tmp_path: Path) -> None:
    node = NodeAddress(1, 9101, {"PLAINTEXT": 9001, "SSL": 9002})
    security = SecurityOptions(protocols=("SSL",))
    with pytest.raises(KafkaHarnessError, match="no TLS files"):
        server_properties(node, [node], "4.3.1", tmp_path, security, None)


def test_render_properties_escapes_backslashes() -> None:
    text = render_properties({"b": "x\\y", "a": "1"})
    assert text.splitlines()[1:] == ["a=1", "b=x\\\\y"]


def test_scram_format_args() -> None:
    args = scram_format_args(ALL_LISTENERS)
    assert "SCRAM-SHA-256=[name=alice,password=alice-secret]" in args
    assert "SCRAM-SHA-512=[name=bob,password=bob-secret]" in args
    assert args.count("--add-scram") == 4


def test_unsafe_credentials_are_refused() -> None:
    with pytest.raises(KafkaHarnessError):
        SaslUser("alice", 'quote"inside')


def test_cluster_id_shape() -> None:
    cid = new_cluster_id()
    assert len(cid) == 22 and "=" not in cid


def test_free_ports_are_distinct() -> None:
    ports = free_ports(8)
    assert len(set(ports)) == 8


def test_certificates_have_the_required_names(tmp_path: Path) -> None:
    tls = generate_tls_files(tmp_path)
    cert = x509.load_pem_x509_certificate(tls.server_cert.read_bytes())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["localhost"]
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    ca = x509.load_pem_x509_certificate(tls.ca_file.read_bytes())
    cert.verify_directly_issued_by(ca)
    keystore = tls.server_keystore.read_text()
    assert keystore.startswith("-----BEGIN PRIVATE KEY-----")
    assert keystore.count("BEGIN CERTIFICATE") == 2


def _serve_once(reply: bytes) -> tuple[int, threading.Thread]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)

    def run() -> None:
        with server:
            conn, _ = server.accept()
            with conn:
                (size,) = struct.unpack(">i", conn.recv(4))
                conn.recv(size)
                conn.sendall(struct.pack(">i", len(reply)) + reply)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return server.getsockname()[1], thread


def test_probe_decodes_api_versions() -> None:
    body = struct.pack(">ih", 0x5EED, 0) + struct.pack(">i", 2)
    body += struct.pack(">hhh", 3, 0, 12) + struct.pack(">hhh", 18, 0, 4)
    port, thread = _serve_once(body)
    assert api_versions("127.0.0.1", port) == {3: (0, 12), 18: (0, 4)}
    thread.join(5)


def test_probe_decodes_metadata() -> None:
    host = b"127.0.0.1"
    body = struct.pack(">ii", 0x5EED, 0) + struct.pack(">i", 1)
    body += struct.pack(">ih", 7, len(host)) + host + struct.pack(">ih", 9092, -1)
    body += struct.pack(">h", 3) + b"abc" + struct.pack(">ii", 7, 0)
    port, thread = _serve_once(body)
    md = metadata("127.0.0.1", port)
    assert md.cluster_id == "abc" and md.controller_id == 7 and md.broker_ids == {7}
    thread.join(5)


def test_probe_rejects_a_wrong_correlation_id() -> None:
    port, thread = _serve_once(struct.pack(">ih", 1, 0) + struct.pack(">i", 0))
    with pytest.raises(ProbeError):
        api_versions("127.0.0.1", port)
    thread.join(5)


def test_probe_rejects_truncated_bodies() -> None:
    port, thread = _serve_once(struct.pack(">ih", 0x5EED, 0) + struct.pack(">i", 5))
    with pytest.raises(ProbeError):
        api_versions("127.0.0.1", port)
    thread.join(5)


def test_resolution_marker_is_required(tmp_path: Path) -> None:
    libs = libs_dir("4.3.1", tmp_path)
    libs.mkdir(parents=True)
    (libs / "kafka_2.13-4.3.1.jar").write_bytes(b"")
    assert not is_resolved("4.3.1", tmp_path)


def test_unknown_version_is_refused() -> None:
    with pytest.raises(KafkaHarnessError, match="unsupported Kafka version"):
        resolve_jars("1.0.0")


def test_cluster_ids_never_start_with_a_dash() -> None:
    from aiokproto.testing.broker_config import new_cluster_id

    ids = [new_cluster_id() for _ in range(5000)]
    assert not any(i.startswith("-") for i in ids)
    assert all(len(i) == 22 for i in ids)
