"""Kafka 3.9.1 alongside the default version."""

from __future__ import annotations

import pytest

from aiokproto.testing import KafkaService, api_versions, metadata


def _host_port(bootstrap: str) -> tuple[str, int]:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    return host, int(port)


def test_kafka39_starts_and_answers(kafka39: KafkaService) -> None:
    assert kafka39.version == "3.9.1"
    host, port = _host_port(kafka39.bootstrap_servers)
    versions = api_versions(host, port)
    # Kafka 3.9 still serves Fetch v0 (KIP-896 removed v0-3 in 4.0).
    assert versions[1][0] == 0
    assert metadata(host, port).broker_ids == {1}


def test_kafka_any_covers_every_version(kafka_any: KafkaService) -> None:
    host, port = _host_port(kafka_any.bootstrap_servers)
    assert 18 in api_versions(host, port)


@pytest.mark.kafka39
def test_kafka39_marker_parametrizes_kafka(kafka: KafkaService) -> None:
    host, port = _host_port(kafka.bootstrap_servers)
    fetch_min = api_versions(host, port)[1][0]
    if kafka.version.startswith("3."):
        assert fetch_min == 0
    else:
        assert fetch_min >= 4
