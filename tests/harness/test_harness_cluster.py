"""The 3-node KRaft cluster keeps serving when one node stops or dies."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from aiokproto.testing import LocalKafka, metadata

pytestmark = pytest.mark.cluster


def _metadata_from(cluster: LocalKafka, node_id: int) -> frozenset[int]:
    host, port = cluster.node(node_id).bootstrap().rsplit(":", 1)
    return metadata(host, int(port)).broker_ids


def _create_topic(cluster: LocalKafka, name: str, replication: int) -> None:
    # CreateTopics goes through the controller quorum: proof that it still has a leader.
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap(running_only=True)})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=3, replication_factor=replication)], request_timeout=20
    )
    futures[name].result(timeout=30)


def test_all_three_brokers_registered(kafka_cluster: LocalKafka, topic_name: str) -> None:
    for node in kafka_cluster.nodes:
        assert _metadata_from(kafka_cluster, node.node_id) == {1, 2, 3}
    _create_topic(kafka_cluster, topic_name, replication=3)


def test_survives_a_killed_node_and_takes_it_back(
    kafka_cluster: LocalKafka, topic_name: str
) -> None:
    kafka_cluster.kill_node(3)
    assert not kafka_cluster.node(3).is_running
    # Fenced once broker.session.timeout.ms passes without heartbeats.
    kafka_cluster.wait_for_brokers([1, 2], timeout=30)
    _create_topic(kafka_cluster, topic_name, replication=2)

    kafka_cluster.restart_node(3)
    kafka_cluster.wait_for_brokers([1, 2, 3], timeout=30)
    assert _metadata_from(kafka_cluster, 3) == {1, 2, 3}


def test_survives_a_graceful_stop(kafka_cluster: LocalKafka, topic_name: str) -> None:
    kafka_cluster.stop_node(1)
    kafka_cluster.wait_for_brokers([2, 3], timeout=30)
    _create_topic(kafka_cluster, topic_name, replication=2)
    # Left stopped on purpose: the kafka_cluster fixture restarts it for the next test.


def test_fixture_heals_the_cluster(kafka_cluster: LocalKafka) -> None:
    assert all(node.is_running for node in kafka_cluster.nodes)
    kafka_cluster.wait_for_brokers([1, 2, 3], timeout=30)
