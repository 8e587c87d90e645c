"""The driver's list-offsets lookups against the real broker (no Spark needed)."""

from __future__ import annotations

import pytest

from aiokproto.errors import KafkaConfigError
from aiokproto.spark.lookup import lookup
from aiokproto.spark.offsets import AtTimestamp, Earliest
from aiokproto.spark.options import Assign, Subscribe, SubscribePattern
from aiokproto.spark.planning import resolve
from aiokproto.structs import TopicPartition as TP
from tests.spark.helpers import create_topic, produce


def test_bounds_and_timestamps(bootstrap: str, topic_name: str) -> None:
    create_topic(bootstrap, topic_name, partitions=2)
    produce(bootstrap, topic_name, [(None, b"old", 0)] * 3, timestamp_ms=1_000_000)
    produce(bootstrap, topic_name, [(None, b"new", 0)] * 2, timestamp_ms=2_000_000)
    client = {"bootstrap_servers": bootstrap}

    bounds, (hits,) = lookup(client, Subscribe((topic_name,)), AtTimestamp(1_500_000))
    p0, p1 = TP(topic_name, 0), TP(topic_name, 1)
    assert bounds.partitions == [p0, p1]
    assert bounds.earliest == {p0: 0, p1: 0}
    assert bounds.latest == {p0: 5, p1: 0}
    assert hits == {p0: 3, p1: -1}
    start = resolve(AtTimestamp(1_500_000), bounds, hits, ending=False, strategy="latest")
    assert start == {p0: 3, p1: 0}

    prefix = topic_name[: len(topic_name) // 2]
    by_pattern, _ = lookup(client, SubscribePattern(f"{prefix}.*"), Earliest())
    assert {p0, p1} <= set(by_pattern.partitions)

    assigned, _ = lookup(client, Assign((p1,)))
    assert assigned.partitions == [p1]


def test_missing_topics(bootstrap: str, topic_name: str) -> None:
    client = {"bootstrap_servers": bootstrap}
    # subscribing to a topic that does not exist (yet) sees no partitions
    bounds, _ = lookup(client, Subscribe((topic_name,)))
    assert bounds.partitions == []
    with pytest.raises(KafkaConfigError, match="do not exist"):
        lookup(client, Assign((TP(topic_name, 0),)))
