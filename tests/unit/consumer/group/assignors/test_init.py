"""Choosing assignors: names, objects and classes resolved into one rebalance protocol,
and the group options that name them."""

from __future__ import annotations

import pytest

from aiokproto.consumer.group import GroupConfig
from aiokproto.consumer.group.assignors import (
    RebalanceProtocol,
    RoundRobinAssignor,
    rebalance_protocol,
    resolve_assignors,
)
from aiokproto.errors import KafkaConfigError


def test_resolve_names_objects_and_protocol() -> None:
    custom = RoundRobinAssignor()
    got = resolve_assignors(["range", custom, "cooperative-sticky"])
    assert [a.name for a in got] == ["range", "roundrobin", "cooperative-sticky"]
    assert got[1] is custom
    assert rebalance_protocol(got) is RebalanceProtocol.EAGER
    assert (
        rebalance_protocol(resolve_assignors(["cooperative-sticky"]))
        is RebalanceProtocol.COOPERATIVE
    )


@pytest.mark.parametrize(
    "strategy",
    [(), ("nope",), ("range", "range"), (42,)],
)
def test_bad_strategies_rejected(strategy: tuple[object, ...]) -> None:
    with pytest.raises(KafkaConfigError):
        GroupConfig("g", partition_assignment_strategy=strategy)  # type: ignore[arg-type]


def test_group_config_validation() -> None:
    spelled = GroupConfig("g", partition_assignment_strategy="range, sticky")  # type: ignore[arg-type]
    assert spelled.partition_assignment_strategy == ("range", "sticky")
    assert GroupConfig("g").effective_rebalance_timeout_ms == 300_000
    with pytest.raises(KafkaConfigError, match="heartbeat_interval_ms"):
        GroupConfig("g", session_timeout_ms=6000, heartbeat_interval_ms=6000)
    with pytest.raises(KafkaConfigError):
        GroupConfig("")
    with pytest.raises(KafkaConfigError):
        GroupConfig("g", max_poll_interval_ms=0)
    with pytest.raises(KafkaConfigError):
        GroupConfig("g", group_instance_id="")
