"""Producer options validation (no sockets): Java's defaults, acks, implicit
idempotence, errors naming the option."""

from __future__ import annotations

from typing import Any

import pytest

from aiokproto.config import split_options
from aiokproto.errors import KafkaConfigError
from aiokproto.producer import Producer
from aiokproto.producer.options import PRODUCER_OPTIONS, ProducerOptions, parse_producer_options
from aiokproto.records import compression


def parse(**options: Any) -> ProducerOptions:
    config, own = split_options({"bootstrap_servers": "x:1", **options}, PRODUCER_OPTIONS, "P")
    return parse_producer_options(config, own)


def test_defaults_are_javas_but_the_batch_size() -> None:
    opts = parse()
    assert opts.acks == -1 and opts.enable_idempotence
    # batch_size is librdkafka's (docs/guides/producer.md says why), the rest Java's
    assert (opts.batch_size, opts.linger_ms, opts.max_request_size) == (1_000_000, 5, 1048576)
    assert (opts.buffer_memory, opts.max_block_ms, opts.delivery_timeout_ms) == (
        33554432, 60000, 120000,
    )
    assert opts.compression == compression.NONE and opts.max_in_flight == 5


def test_the_default_batch_is_never_bigger_than_a_request() -> None:
    assert parse(max_request_size=100_000).batch_size == 100_000
    assert parse(max_request_size=4_000_000).batch_size == 1_000_000
    # set, it is the user's: Java lets a batch be bigger than a request may be
    assert parse(max_request_size=100_000, batch_size=200_000).batch_size == 200_000


def test_keyless_records_switch_partition_after_javas_batch_size_unless_it_is_set() -> None:
    assert parse().sticky_bytes == 16_384
    assert parse(batch_size=65_536).sticky_bytes == 65_536
    assert parse(max_batch_size=2_048).sticky_bytes == 2_048  # aiokafka's spelling


@pytest.mark.parametrize(("given", "wire"), [("all", -1), (-1, -1), (1, 1), (0, 0), ("1", 1)])
def test_acks_values(given: Any, wire: int) -> None:
    assert parse(acks=given, enable_idempotence=False).acks == wire


def test_acks_other_than_all_turn_implicit_idempotence_off() -> None:
    assert not parse(acks=1).enable_idempotence
    assert not parse(max_in_flight_requests_per_connection=6).enable_idempotence


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"enable_idempotence": True, "acks": 1}, "acks must be 'all'"),
        (
            {"enable_idempotence": True, "max_in_flight_requests_per_connection": 6},
            "max_in_flight_requests_per_connection must be <= 5",
        ),
        ({"enable_idempotence": True, "retries": 0}, "retries must be > 0"),
        ({"acks": 2}, "acks must be 0, 1 or 'all'"),
        ({"batch_size": 0}, "batch_size must be an int >= 1"),
        ({"linger_ms": -1}, "linger_ms"),
        ({"buffer_memory": "big"}, "buffer_memory"),
        ({"compression_type": "brotli"}, "compression_type"),
        ({"compression_level": "high"}, "compression_level"),
        ({"delivery_timeout_ms": 1000}, "delivery_timeout_ms .* must be >= linger_ms"),
        ({"transactional_id": ""}, "transactional_id must be a non-empty str"),
        ({"transactional_id": 5}, "transactional_id must be a non-empty str"),
        ({"transactional_id": "tx", "enable_idempotence": False}, "needs idempotence"),
        ({"transactional_id": "tx", "acks": 1}, "needs idempotence"),
        ({"transaction_timeout_ms": 0}, "transaction_timeout_ms must be an int"),
        ({"partitioner": 3}, "partitioner must be callable"),
        ({"value_serializer": "json"}, "value_serializer must be callable"),
        ({"enable_idempotence": "yes"}, "enable_idempotence must be a bool"),
        ({"max_request_size": 10}, "at least"),
    ],
)
def test_bad_options_raise_config_errors(options: dict[str, Any], message: str) -> None:
    with pytest.raises(KafkaConfigError, match=message):
        parse(**options)


def test_unknown_option_is_named() -> None:
    with pytest.raises(KafkaConfigError, match="lingerms"):
        Producer(bootstrap_servers="x:1", lingerms=5)


def test_compression_names() -> None:
    for name, cid in compression.CODEC_IDS.items():
        assert parse(compression_type=name).compression == cid
