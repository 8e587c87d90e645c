"""group_protocol / group_remote_assignor options (no sockets)."""

from __future__ import annotations

import pytest

from aiokproto.consumer import Consumer
from aiokproto.consumer.group.group_config import GroupConfig
from aiokproto.errors import KafkaConfigError

BOOT = "localhost:9092"


def test_the_default_protocol_is_classic() -> None:
    c = Consumer(bootstrap_servers=BOOT, group_id="g")
    assert c._group_config.group_protocol == "classic"
    assert c._group_config.group_remote_assignor is None


@pytest.mark.parametrize("assignor", [None, "uniform", "range"])
def test_the_consumer_protocol_with_a_remote_assignor(assignor: str | None) -> None:
    c = Consumer(
        bootstrap_servers=BOOT,
        group_id="g",
        group_protocol="consumer",
        group_remote_assignor=assignor,
    )
    assert c._group_config.group_protocol == "consumer"
    assert c._group_config.group_remote_assignor == assignor


@pytest.mark.parametrize(
    "option",
    [
        {"partition_assignment_strategy": ("range",)},
        {"session_timeout_ms": 10_000},
        {"heartbeat_interval_ms": 1_000},
    ],
)
def test_classic_only_options_are_refused_with_the_consumer_protocol(
    option: dict[str, object],
) -> None:
    name = next(iter(option))
    with pytest.raises(KafkaConfigError, match=name):
        Consumer(bootstrap_servers=BOOT, group_id="g", group_protocol="consumer", **option)
    # the same option is fine with the classic protocol
    Consumer(bootstrap_servers=BOOT, group_id="g", group_protocol="classic", **option)


def test_an_unknown_protocol_is_refused() -> None:
    with pytest.raises(KafkaConfigError, match="group_protocol"):
        Consumer(bootstrap_servers=BOOT, group_id="g", group_protocol="Consumer")
    with pytest.raises(KafkaConfigError, match="group_protocol"):
        GroupConfig(group_id="g", group_protocol="share")


@pytest.mark.parametrize("bad", ["", 3])
def test_a_bad_remote_assignor_is_refused(bad: object) -> None:
    with pytest.raises(KafkaConfigError, match="group_remote_assignor"):
        Consumer(
            bootstrap_servers=BOOT, group_id="g", group_protocol="consumer",
            group_remote_assignor=bad,
        )


def test_a_remote_assignor_needs_the_consumer_protocol() -> None:
    with pytest.raises(KafkaConfigError, match="group_remote_assignor"):
        Consumer(bootstrap_servers=BOOT, group_id="g", group_remote_assignor="uniform")


def test_a_pattern_goes_to_the_broker_as_written() -> None:
    # RE2/J syntax (\p{Lu}) Python's re refuses: not compiled here, the broker judges it
    c = Consumer(bootstrap_servers=BOOT, group_id="g", group_protocol="consumer")
    c.subscribe(pattern=r"t\p{Lu}.*")
    assert c._subs.regex == r"t\p{Lu}.*"
    classic = Consumer(bootstrap_servers=BOOT, group_id="g")
    with pytest.raises(KafkaConfigError, match="pattern"):
        classic.subscribe(pattern=r"t\p{Lu}.*")
