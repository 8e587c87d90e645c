"""Pure metadata rules: epochs never regress, recreated topics replace old state."""

from __future__ import annotations

import random
import uuid
from types import MappingProxyType

from aiokproto.cluster.backoff import Backoff
from aiokproto.cluster.metadata import snapshot_from_response
from aiokproto.cluster.snapshot import (
    BrokerInfo,
    ClusterSnapshot,
    PartitionInfo,
    TopicInfo,
    apply_leader_hint,
    apply_metadata,
)
from aiokproto.protocol.messages.metadata import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)

TID = uuid.uuid4()


def topic(name: str, tid: uuid.UUID, leaders: dict[int, tuple[int, int]]) -> TopicInfo:
    parts = {p: PartitionInfo(name, p, leader, epoch) for p, (leader, epoch) in leaders.items()}
    return TopicInfo(name, tid, MappingProxyType(parts))


def snap_with(*topics: TopicInfo) -> ClusterSnapshot:
    return apply_metadata(
        ClusterSnapshot(),
        [BrokerInfo(1, "h", 1), BrokerInfo(2, "h", 2)],
        topics,
        controller_id=1,
        cluster_id="c",
        full=False,
    )


def test_older_leader_epoch_does_not_win() -> None:
    s = snap_with(topic("t", TID, {0: (1, 5)}))
    s2 = apply_metadata(
        s, [], [topic("t", TID, {0: (2, 4)})], controller_id=1, cluster_id="c", full=False
    )
    assert s2.leader_for("t", 0) == 1
    s3 = apply_metadata(
        s, [], [topic("t", TID, {0: (2, 6)})], controller_id=1, cluster_id="c", full=False
    )
    assert s3.leader_for("t", 0) == 2


def test_recreated_topic_replaces_partitions_even_with_lower_epoch() -> None:
    s = snap_with(topic("t", TID, {0: (1, 9), 1: (1, 9)}))
    s2 = apply_metadata(
        s, [], [topic("t", uuid.uuid4(), {0: (2, 0)})], controller_id=1, cluster_id="c", full=False
    )
    assert s2.leader_for("t", 0) == 2
    assert s2.partitions_for("t") == (0,)


def test_partial_refresh_keeps_other_topics_full_drops_them_missing_removes() -> None:
    s = snap_with(topic("a", TID, {0: (1, 0)}), topic("b", uuid.uuid4(), {0: (1, 0)}))
    partial = apply_metadata(
        s, [], [topic("a", TID, {0: (1, 0)})], controller_id=1, cluster_id="c", full=False
    )
    assert set(partial.topics) == {"a", "b"}
    full = apply_metadata(
        s, [], [topic("a", TID, {0: (1, 0)})], controller_id=1, cluster_id="c", full=True
    )
    assert set(full.topics) == {"a"}
    gone = apply_metadata(s, [], [], missing=["b"], controller_id=1, cluster_id="c", full=False)
    assert set(gone.topics) == {"a"}
    assert gone.version == s.version + 1


def test_leader_hint_applies_only_when_newer() -> None:
    s = snap_with(topic("t", TID, {0: (1, 3)}))
    assert apply_leader_hint(s, "t", 0, 2, 3) is None
    assert apply_leader_hint(s, "nope", 0, 2, 9) is None
    hinted = apply_leader_hint(s, "t", 0, 3, 4, [BrokerInfo(3, "new", 9)])
    assert hinted is not None
    assert hinted.leader_for("t", 0) == 3
    assert hinted.brokers[3].host == "new"


def test_backoff_grows_exponentially_with_bounded_jitter() -> None:
    rng = random.Random(7)
    b = Backoff(base_ms=50, max_ms=1000)
    assert b.delay_s(rng) == 0
    delays = []
    for _ in range(8):
        b.failed(0.0, rng)
        delays.append(b.not_before)
    assert 0.04 <= delays[0] <= 0.06
    assert 0.08 <= delays[1] <= 0.12
    assert all(d <= 1.0 for d in delays)
    assert delays[-1] >= 0.8
    b.succeeded()
    assert b.failures == 0 and b.not_before == 0


def _metadata(partitions: list[int], port: int = 9092) -> MetadataResponse:
    return MetadataResponse(
        brokers=[
            MetadataResponseBroker(node_id=1, host="h", port=port),
            MetadataResponseBroker(node_id=2, host="", port=9092),  # no usable address
        ],
        controller_id=1,
        topics=[
            MetadataResponseTopic(
                name="t",
                topic_id=uuid.UUID(int=7),
                partitions=[
                    MetadataResponsePartition(partition_index=i, leader_id=1, leader_epoch=0)
                    for i in partitions
                ],
            )
        ],
    )


def test_a_topic_whose_partitions_are_not_0_to_n_is_left_out() -> None:
    # A keyed send maps keys onto 0..n-1: a layout with gaps or repeats is garbage.
    for bad in ([1, 2], [0, 0], [0, 2], [-1]):
        snap, errors = snapshot_from_response(ClusterSnapshot(), _metadata(bad), full=False)
        assert "t" not in snap.topics and errors["t"] != 0, bad
    old, _ = snapshot_from_response(ClusterSnapshot(), _metadata([0, 1]), full=False)
    kept, _ = snapshot_from_response(old, _metadata([0, 0]), full=False)
    assert set(kept.topics["t"].partitions) == {0, 1}  # the last good view stays
    good, errors = snapshot_from_response(ClusterSnapshot(), _metadata([1, 0, 2]), full=False)
    assert set(good.topics["t"].partitions) == {0, 1, 2} and not errors


def test_brokers_without_a_usable_address_are_left_out() -> None:
    snap, _ = snapshot_from_response(ClusterSnapshot(), _metadata([0], port=70000), full=False)
    assert dict(snap.brokers) == {}
    snap, _ = snapshot_from_response(ClusterSnapshot(), _metadata([0]), full=False)
    assert list(snap.brokers) == [1]
