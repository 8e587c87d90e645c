"""Span attribute names are the messaging conventions' own; key strings; the client
facts of each client kind."""

from __future__ import annotations

from typing import Any

from opentelemetry.semconv._incubating.attributes import messaging_attributes

from aiokproto.otel import _attributes as A


def test_the_attribute_names_are_the_conventions_ones() -> None:
    """The names spans carry; a semconv release that renames one fails here first."""
    assert A.SYSTEM == "messaging.system" and A.KAFKA == "kafka"
    assert A.OPERATION_NAME == "messaging.operation.name"
    assert A.OPERATION_TYPE == "messaging.operation.type"
    assert (A.SEND, A.RECEIVE, A.PROCESS) == ("send", "receive", "process")
    assert A.DESTINATION == "messaging.destination.name"
    assert A.PARTITION == "messaging.destination.partition.id"
    assert A.CLIENT_ID == "messaging.client.id"
    assert A.GROUP == "messaging.consumer.group.name"
    assert A.BATCH_COUNT == "messaging.batch.message_count"
    assert A.KEY == "messaging.kafka.message.key"
    assert A.OFFSET == messaging_attributes.MESSAGING_KAFKA_OFFSET == "messaging.kafka.offset"
    assert A.TOMBSTONE == "messaging.kafka.message.tombstone"
    assert (A.ERROR_TYPE, A.SERVER_ADDRESS, A.SERVER_PORT) == (
        "error.type",
        "server.address",
        "server.port",
    )


def test_key_strings() -> None:
    assert A.key_string(None) is None
    assert A.key_string("k") == "k"
    assert A.key_string(b"k\xc3\xa9") == "ké"
    assert A.key_string(bytearray(b"ab")) == "ab"
    assert A.key_string(memoryview(b"ab")) == "ab"
    assert A.key_string(b"\xff\xfe") is None  # no unambiguous string form
    assert A.key_string(42) == "42"
    assert A.key_string(True) is None
    assert A.key_string(object()) is None


def test_client_attributes_of_each_client_kind() -> None:
    from aiokproto import Admin, Consumer, Producer, ShareConsumer

    bs = "b1:9093,b2:9094"
    for client, group in (
        (Producer(bootstrap_servers=bs, client_id="c"), None),
        (Admin(bootstrap_servers=bs, client_id="c"), None),
        (Consumer(bootstrap_servers=bs, client_id="c", group_id="g"), "g"),
        (Consumer(bootstrap_servers=bs, client_id="c"), None),
        (ShareConsumer(bootstrap_servers=bs, client_id="c", group_id="sg"), "sg"),
    ):
        attrs = A.client_attributes(client)
        want: dict[str, Any] = {
            "messaging.system": "kafka",
            "messaging.client.id": "c",
            "server.address": "b1",
            "server.port": 9093,
        }
        if group is not None:
            want["messaging.consumer.group.name"] = group
        assert attrs == want, type(client)
    assert A.client_attributes(object()) == {"messaging.system": "kafka"}
