"""Broker configuration without a broker: server.properties for one node and a cluster,
listeners, SCRAM users, cluster ids."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiokproto.testing import (
    ALL_LISTENERS,
    KafkaHarnessError,
    SaslUser,
    SecurityOptions,
)
from aiokproto.testing.broker_config import (
    NodeAddress,
    new_cluster_id,
    render_properties,
    scram_format_args,
    server_properties,
)


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


def test_cluster_ids_never_start_with_a_dash() -> None:
    from aiokproto.testing.broker_config import new_cluster_id

    ids = [new_cluster_id() for _ in range(5000)]
    assert not any(i.startswith("-") for i in ids)
    assert all(len(i) == 22 for i in ids)
