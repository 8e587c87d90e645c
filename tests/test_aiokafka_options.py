"""Options as aiokafka code passes them: other names, None for "the default", ignored
options, aiokafka's assignor classes, and a suggestion for a misspelt name."""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from aiokproto import Admin, Consumer, Producer, config
from aiokproto.consumer.group import GroupConfig
from aiokproto.consumer.group.assignors import (
    CooperativeStickyAssignor,
    RangeAssignor,
    RangePartitionAssignor,
    RoundRobinAssignor,
    RoundRobinPartitionAssignor,
    StickyAssignor,
    StickyPartitionAssignor,
    resolve_assignors,
)
from aiokproto.errors import KafkaConfigError
from aiokproto.records import compression

B = "127.0.0.1:9"  # never contacted: these tests only construct clients


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # ignored options warn once per process; each test starts with none warned
    monkeypatch.setattr(config, "_warned", set())
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        yield


def test_max_batch_size_is_batch_size_for_the_producer_only() -> None:
    assert Producer(bootstrap_servers=B, max_batch_size=1234).options.batch_size == 1234
    with pytest.raises(KafkaConfigError, match=r"both max_batch_size.*and batch_size"):
        Producer(bootstrap_servers=B, max_batch_size=1, batch_size=2)
    with pytest.raises(KafkaConfigError, match="batch_size must be an int"):
        Producer(bootstrap_servers=B, max_batch_size="big")
    with pytest.raises(KafkaConfigError, match=r"unknown option.*max_batch_size"):
        Consumer(bootstrap_servers=B, max_batch_size=1)


def test_none_means_the_default_where_aiokafka_allows_none() -> None:
    producer = Producer(bootstrap_servers=B, client_id=None, compression_type=None)
    assert producer.config.client_id == "aiokproto"
    assert producer.options.compression == compression.NONE
    consumer = Consumer(bootstrap_servers=B, max_poll_records=None, client_id=None)
    assert consumer._config.max_poll_records == 500
    assert consumer._client.config.client_id == "aiokproto"
    # options where None already meant "unset" keep working
    Consumer(bootstrap_servers=B, group_id=None, group_instance_id=None, client_rack=None)
    Consumer(bootstrap_servers=B, group_id="g", rebalance_timeout_ms=None)
    # for a client without the option, it is still unknown
    with pytest.raises(KafkaConfigError, match=r"unknown option.*compression_type"):
        Consumer(bootstrap_servers=B, compression_type=None)
    # elsewhere None stays an error, named
    with pytest.raises(KafkaConfigError, match="linger_ms"):
        Producer(bootstrap_servers=B, linger_ms=None)


def test_connections_max_idle_ms_none_disables_the_idle_close_as_in_aiokafka() -> None:
    admin = Admin(bootstrap_servers=B, connections_max_idle_ms=None)
    assert admin.config.connection.connections_max_idle_ms == 2**31 - 1


def test_api_version_is_ignored_with_one_warning() -> None:
    with pytest.warns(UserWarning, match="api_version='2.0.1' is ignored: API versions"):
        Producer(bootstrap_servers=B, api_version="2.0.1")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Consumer(bootstrap_servers=B, api_version="auto")  # already warned once
        Admin(bootstrap_servers=B, api_version=None)  # None: nothing to ignore
    assert not caught


def test_warnings_point_at_the_caller() -> None:
    with pytest.warns(UserWarning) as caught:
        Admin(bootstrap_servers=B, loop=object())
    assert caught[0].filename == __file__


def test_ignored_options_apply_only_to_clients_aiokafka_gives_them_to() -> None:
    with pytest.warns(UserWarning, match="consumer_timeout_ms=100 is ignored"):
        Consumer(bootstrap_servers=B, consumer_timeout_ms=100)
    with pytest.raises(KafkaConfigError, match=r"unknown option.*consumer_timeout_ms"):
        Producer(bootstrap_servers=B, consumer_timeout_ms=100)
    with pytest.raises(KafkaConfigError, match=r"unknown option.*transaction_timeout_ms"):
        Consumer(bootstrap_servers=B, transaction_timeout_ms=100)


def test_an_unknown_option_suggests_the_closest_valid_name() -> None:
    with pytest.raises(KafkaConfigError) as info:
        Producer(bootstrap_servers=B, linger=5, max_batch_sise=1, frobnicate=1)
    text = str(info.value)
    assert "linger (did you mean linger_ms?)" in text
    assert "max_batch_sise (did you mean max_batch_size?)" in text
    assert "frobnicate" in text and "frobnicate (" not in text  # nothing close
    with pytest.raises(
        KafkaConfigError, match=r"session_timeout \(did you mean session_timeout_ms"
    ):
        Consumer(bootstrap_servers=B, group_id="g", session_timeout=1)


def aiokafka_defaults(cls: Any, *skip: str) -> dict[str, Any]:
    """Every keyword option of an aiokafka client class with its default value."""
    out = {}
    for p in inspect.signature(cls.__init__).parameters.values():
        if p.kind is p.KEYWORD_ONLY or p.kind is p.POSITIONAL_OR_KEYWORD:
            if p.name not in ("self", *skip) and p.default is not p.empty:
                out[p.name] = p.default
    return out


def test_every_aiokafka_option_with_its_default_is_accepted() -> None:
    aiokafka = pytest.importorskip("aiokafka")
    from aiokafka.admin import AIOKafkaAdminClient

    # bootstrap_servers: aiokafka's "localhost" default is ours to require
    consumer = aiokafka_defaults(aiokafka.AIOKafkaConsumer)
    consumer["bootstrap_servers"] = B
    producer = aiokafka_defaults(aiokafka.AIOKafkaProducer, "acks")  # a private sentinel
    producer["bootstrap_servers"] = B
    admin = aiokafka_defaults(AIOKafkaAdminClient)
    admin["bootstrap_servers"] = B
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Consumer(**consumer)
        grouped = Consumer(**{**consumer, "group_id": "g"})
        Producer(**producer)
        Admin(**admin)
    warned = {str(w.message).split("=")[0].split(": ")[1] for w in caught}
    assert warned == {"consumer_timeout_ms"}
    # aiokafka's default assignor (its RoundRobinPartitionAssignor class) is ours by name
    assert grouped._group_config.partition_assignment_strategy == ("roundrobin",)


def test_aiokafka_assignor_classes_and_instances_become_ours() -> None:
    rr = pytest.importorskip("aiokafka.coordinator.assignors.roundrobin")
    rng = pytest.importorskip("aiokafka.coordinator.assignors.range")
    sticky = pytest.importorskip("aiokafka.coordinator.assignors.sticky.sticky_assignor")
    got = resolve_assignors(
        [
            rr.RoundRobinPartitionAssignor,
            rng.RangePartitionAssignor(),
            sticky.StickyPartitionAssignor,
        ]
    )
    assert [type(a) for a in got] == [RoundRobinAssignor, RangeAssignor, StickyAssignor]

    class Custom(rr.RoundRobinPartitionAssignor):  # type: ignore[misc]
        name = "custom"

    with pytest.raises(KafkaConfigError, match=r"Custom is an aiokafka assignor.*subclass"):
        resolve_assignors([Custom])


def test_aiokafka_assignors_are_recognised_without_importing_aiokafka() -> None:
    # a class shaped like aiokafka's, whatever is installed: matched by module and name
    fake = type("RoundRobinPartitionAssignor", (), {})
    fake.__module__ = "aiokafka.coordinator.assignors.roundrobin"
    assert [type(a) for a in resolve_assignors([fake])] == [RoundRobinAssignor]
    other = type("WeightedAssignor", (), {})
    other.__module__ = "aiokafka.coordinator.assignors.weighted"
    with pytest.raises(KafkaConfigError, match="WeightedAssignor is an aiokafka assignor"):
        resolve_assignors([other])
    config = GroupConfig(group_id="g", partition_assignment_strategy=[fake, "range"])  # type: ignore[arg-type]
    assert config.partition_assignment_strategy == ("roundrobin", "range")


def test_aiokafka_named_assignors_exist_in_aiokproto_and_classes_are_accepted() -> None:
    from aiokproto.consumer.group.assignors.range import RangePartitionAssignor as by_module
    from aiokproto.consumer.group.assignors.roundrobin import RoundRobinPartitionAssignor as rr
    from aiokproto.consumer.group.assignors.sticky import StickyPartitionAssignor as st

    assert (by_module, rr, st) == (
        RangePartitionAssignor,
        RoundRobinPartitionAssignor,
        StickyPartitionAssignor,
    )
    got = resolve_assignors((RoundRobinPartitionAssignor, CooperativeStickyAssignor, "range"))
    assert [a.name for a in got] == ["roundrobin", "cooperative-sticky", "range"]
    # a class is a fresh instance per resolution (sticky assignors keep state)
    assert resolve_assignors([StickyAssignor])[0] is not resolve_assignors([StickyAssignor])[0]
    Consumer(
        bootstrap_servers=B, group_id="g", partition_assignment_strategy=(StickyPartitionAssignor,)
    )

    class NeedsArgs(RoundRobinAssignor):
        def __init__(self, weight: int) -> None:
            self.weight = weight

    with pytest.raises(KafkaConfigError, match="NeedsArgs cannot be created without arguments"):
        resolve_assignors([NeedsArgs])
    with pytest.raises(KafkaConfigError, match="must be names, Assignor objects or classes"):
        resolve_assignors([int])
