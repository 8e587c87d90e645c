"""Untrusted metadata: the KIP-951 leader hints carried by Produce/Fetch answers."""

from __future__ import annotations

import uuid
from types import MappingProxyType

from aiokproto.cluster.snapshot import (
    BrokerInfo,
    ClusterSnapshot,
    PartitionInfo,
    TopicInfo,
    apply_leader_hint,
    apply_metadata,
)


def test_a_leader_hint_cannot_bring_in_an_unusable_broker_address() -> None:
    """Expected (DESIGN: "Metadata answers are untrusted. Brokers without a usable
    address ... are left out of a snapshot"): the node_endpoints of a Produce/Fetch
    answer (KIP-951) are metadata too; an endpoint with an empty host or port 0 never
    enters the snapshot, and never replaces a known broker's good address.
    Observed: apply_leader_hint() copies every endpoint into snapshot.brokers
    unchecked: node 1's address becomes ('', 0) and every connection to it fails
    until the next full refresh."""
    parts = {0: PartitionInfo("t", 0, 1, 5)}
    snap = apply_metadata(
        ClusterSnapshot(),
        [BrokerInfo(1, "good-host", 9092), BrokerInfo(2, "other", 9092)],
        [TopicInfo("t", uuid.uuid4(), MappingProxyType(parts))],
        controller_id=1,
        cluster_id="c",
        full=False,
    )
    hinted = apply_leader_hint(
        snap, "t", 0, 2, 6, [BrokerInfo(1, "", 0), BrokerInfo(-3, "x", 70000)]
    )
    assert hinted is not None
    assert hinted.brokers[1] == BrokerInfo(1, "good-host", 9092), hinted.brokers[1]
    assert -3 not in hinted.brokers
