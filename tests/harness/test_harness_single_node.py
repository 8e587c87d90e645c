"""A single local broker: real ApiVersions and Metadata round trips, lifecycle, errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiokproto.testing import (
    PLAINTEXT_ONLY,
    KafkaHarnessError,
    KafkaService,
    LocalKafka,
    api_versions,
    metadata,
)
from aiokproto.testing.probe import API_METADATA, API_VERSIONS
from aiokproto.testing.processes import pid_alive


def _host_port(bootstrap: str) -> tuple[str, int]:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    return host, int(port)


def test_api_versions_round_trip(kafka: KafkaService) -> None:
    versions = api_versions(*_host_port(kafka.bootstrap_servers))
    assert API_VERSIONS in versions
    low, high = versions[API_METADATA]
    assert low <= 4 <= high


def test_metadata_lists_the_broker(kafka: KafkaService) -> None:
    host, port = _host_port(kafka.bootstrap_servers)
    md = metadata(host, port)
    assert md.cluster_id
    assert len(md.brokers) >= 1
    if isinstance(kafka, LocalKafka):
        assert [(b.node_id, b.host, b.port) for b in md.brokers] == [(1, host, port)]
        assert md.controller_id == 1


def test_local_broker_facts(kafka: KafkaService) -> None:
    if not isinstance(kafka, LocalKafka):
        pytest.skip("only for a locally started broker")
    node = kafka.nodes[0]
    assert node.is_running
    rss = node.rss_bytes()
    assert rss is not None and rss < 1024 * 1024 * 1024
    log = node.log_file.read_text()
    assert "Kafka Server started" in log  # the log4j2 binding writes the broker's log
    assert set(kafka.listeners) == {"PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL"}


def test_topic_name_is_unique(topic_name: str) -> None:
    assert topic_name.startswith("t-test_topic_name_is_unique-")
    assert len(topic_name) < 249


def test_failed_start_raises_with_log_tail(tmp_path: Path) -> None:
    broken = LocalKafka(
        security=PLAINTEXT_ONLY,
        overrides={"num.io.threads": "not-a-number"},
        start_timeout=60,
    )
    with pytest.raises(KafkaHarnessError) as info:
        broken.start()
    assert "not-a-number" in str(info.value)
    assert info.value.log_tail
    assert not broken.nodes  # nothing left running


async def test_async_context_manager_starts_and_cleans_up() -> None:
    async with LocalKafka(security=PLAINTEXT_ONLY) as k:
        directory = k.directory
        pid = k.nodes[0].pid
        assert metadata(*_host_port(k.bootstrap_servers)).broker_ids == {1}
    assert not directory.exists()
    assert pid is not None
    assert not pid_alive(pid)
