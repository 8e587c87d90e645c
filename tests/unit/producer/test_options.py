"""Producer options validation and the per-partition answer rules (no sockets)."""

from __future__ import annotations

from typing import Any

import pytest

from aiokproto.config import split_options
from aiokproto.errors import KafkaConfigError
from aiokproto.producer import Producer
from aiokproto.producer.options import PRODUCER_OPTIONS, ProducerOptions, parse_producer_options
from aiokproto.producer.sender import Action, decide
from aiokproto.records import compression


def parse(**options: Any) -> ProducerOptions:
    config, own = split_options({"bootstrap_servers": "x:1", **options}, PRODUCER_OPTIONS, "P")
    return parse_producer_options(config, own)


def test_defaults_are_javas() -> None:
    opts = parse()
    assert opts.acks == -1 and opts.enable_idempotence
    assert (opts.batch_size, opts.linger_ms, opts.max_request_size) == (16384, 5, 1048576)
    assert (opts.buffer_memory, opts.max_block_ms, opts.delivery_timeout_ms) == (
        33554432, 60000, 120000,
    )
    assert opts.compression == compression.NONE and opts.max_in_flight == 5


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


async def test_send_before_start_is_a_clear_error() -> None:
    from aiokproto.errors import IllegalStateError

    producer = Producer(bootstrap_servers="x:1")
    with pytest.raises(IllegalStateError, match="not started"):
        await producer.send("t", b"v")


async def test_an_async_on_delivery_is_refused_at_send() -> None:
    """on_delivery is called, never awaited: an ``async def`` one would only make a
    coroutine nobody runs (a RuntimeWarning at delivery time, the report lost)."""

    async def report(error: BaseException | None, metadata: object) -> None:
        pass  # pragma: no cover

    producer = Producer(bootstrap_servers="x:1")
    with pytest.raises(TypeError, match="plain function, not a coroutine function"):
        await producer.send("t", b"v", on_delivery=report)


# -- decide() ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "idempotent", "first", "hint", "action"),
    [
        (0, True, True, False, Action.DONE),
        (46, True, True, False, Action.DONE),  # DUPLICATE_SEQUENCE_NUMBER
        (45, True, False, False, Action.RETRY),  # OUT_OF_ORDER behind an unresolved batch
        (45, True, True, False, Action.RESET),  # OUT_OF_ORDER at the head: a real gap
        (59, True, True, False, Action.RESET),  # UNKNOWN_PRODUCER_ID
        (59, True, False, False, Action.RETRY),
        (6, True, True, False, Action.RETRY),  # NOT_LEADER_OR_FOLLOWER
        (6, True, True, True, Action.RETRY_NOW),  # ... with a KIP-951 leader hint
        (19, False, True, False, Action.RETRY),  # NOT_ENOUGH_REPLICAS
        (7, False, True, False, Action.RETRY),  # REQUEST_TIMED_OUT
        (10, False, True, False, Action.FAIL),  # MESSAGE_TOO_LARGE
        (29, False, True, False, Action.FAIL),  # TOPIC_AUTHORIZATION_FAILED
        (45, False, True, False, Action.FAIL),  # not idempotent: nothing to reset
        (87, True, True, False, Action.FAIL),  # INVALID_RECORD
    ],
)
def test_decide(code: int, idempotent: bool, first: bool, hint: bool, action: Action) -> None:
    assert (
        decide(code, idempotent=idempotent, first_unresolved=first, leader_hint_applied=hint)
        is action
    )


@pytest.mark.parametrize(
    ("items", "nulls"),
    [
        ([b"a", b"bb", b""], False),
        ([b"a", None, b"ccc"], True),
        ([bytearray(b"ab"), memoryview(b"cd"), None], True),
        ([], False),
    ],
)
def test_send_batch_bytes_and_charges_match_the_per_record_rule(
    items: list[Any], nulls: bool
) -> None:
    from aiokproto.producer.producer import _bytes_list, _charges

    got, has_none = _bytes_list(list(items), "value")
    assert has_none is nulls
    assert all(v is None or isinstance(v, (bytes, bytearray)) for v in got)
    assert [None if v is None else bytes(v) for v in got] == [
        None if v is None else bytes(v) for v in items
    ]
    assert _charges(got, has_none, 70) == [70 + (0 if v is None else len(v)) for v in got]


@pytest.mark.parametrize("bad", ["text", 7, [b"x"], True])
def test_send_batch_refuses_what_is_not_bytes(bad: Any) -> None:
    from aiokproto.producer.producer import SerializationError, _bytes_list

    with pytest.raises(SerializationError, match="key"):
        _bytes_list([b"ok", bad, None], "key")
