"""Attribute names and the client facts every span carries.

The names come from ``opentelemetry-semantic-conventions`` (its messaging attributes are
still in the ``_incubating`` package, as every contrib messaging instrumentation uses
them); ``tests/unit/otel/test_attributes.py`` pins the values we rely on.
"""

from __future__ import annotations

import contextlib
import weakref
from typing import Any

from opentelemetry.semconv._incubating.attributes import messaging_attributes as _msg
from opentelemetry.semconv.attributes import error_attributes, server_attributes
from opentelemetry.util.types import AttributeValue

from aiokproto.config import ClientConfig

SYSTEM = _msg.MESSAGING_SYSTEM
OPERATION_NAME = _msg.MESSAGING_OPERATION_NAME
OPERATION_TYPE = _msg.MESSAGING_OPERATION_TYPE
DESTINATION = _msg.MESSAGING_DESTINATION_NAME
PARTITION = _msg.MESSAGING_DESTINATION_PARTITION_ID
CLIENT_ID = _msg.MESSAGING_CLIENT_ID
GROUP = _msg.MESSAGING_CONSUMER_GROUP_NAME
BATCH_COUNT = _msg.MESSAGING_BATCH_MESSAGE_COUNT
KEY = _msg.MESSAGING_KAFKA_MESSAGE_KEY
OFFSET = _msg.MESSAGING_KAFKA_OFFSET
TOMBSTONE = _msg.MESSAGING_KAFKA_MESSAGE_TOMBSTONE
ERROR_TYPE = error_attributes.ERROR_TYPE
SERVER_ADDRESS = server_attributes.SERVER_ADDRESS
SERVER_PORT = server_attributes.SERVER_PORT

KAFKA = _msg.MessagingSystemValues.KAFKA.value
SEND = _msg.MessagingOperationTypeValues.SEND.value
RECEIVE = _msg.MessagingOperationTypeValues.RECEIVE.value
PROCESS = _msg.MessagingOperationTypeValues.PROCESS.value

Attrs = dict[str, AttributeValue]

# Per client: the attributes every span of it starts from (client id, bootstrap server,
# group). Weak keys: a dropped client is not kept alive by its spans' bookkeeping.
_BASE: weakref.WeakKeyDictionary[Any, Attrs] = weakref.WeakKeyDictionary()


def _config_of(client: Any) -> ClientConfig | None:
    """The client's ``ClientConfig``: public on Producer and Admin, on the cluster
    client of a Consumer, kept aside by a ShareConsumer."""
    for found in (
        getattr(client, "config", None),
        getattr(getattr(client, "_client", None), "config", None),
        getattr(client, "_client_config", None),
    ):
        if isinstance(found, ClientConfig):
            return found
    return None


def _group_of(client: Any) -> str | None:
    for holder in ("_config", "_opts"):  # Consumer's ConsumerConfig, ShareConsumer's options
        group = getattr(getattr(client, holder, None), "group_id", None)
        if isinstance(group, str) and group:
            return group
    return None


def operation_attributes(client: Any, name: str, kind: str) -> Attrs:
    """``client_attributes`` plus ``messaging.operation.name``/``type``: the dict every
    span of that operation starts from (copy it before adding to it). Kept on the
    client itself, a plain attribute read on every send."""
    try:
        cache: dict[str, Attrs] = client.__dict__[_CACHE]
    except (AttributeError, KeyError):
        cache = {}
        with contextlib.suppress(AttributeError, TypeError):
            client.__dict__[_CACHE] = cache
    found = cache.get(name)
    if found is None:
        found = cache[name] = {
            **client_attributes(client),
            OPERATION_NAME: name,
            OPERATION_TYPE: kind,
        }
    return found


_CACHE = "_aiokproto_otel_attributes"


def client_attributes(client: Any) -> Attrs:
    """``messaging.system``, ``messaging.client.id``, ``server.address``/``port`` (the
    first bootstrap server: the broker a record goes to is only known later) and
    ``messaging.consumer.group.name`` for a group member. Cached per client."""
    with contextlib.suppress(KeyError, TypeError):
        return _BASE[client]
    attrs: Attrs = {SYSTEM: KAFKA}
    config = _config_of(client)
    if config is not None:
        attrs[CLIENT_ID] = config.client_id
        if config.bootstrap_servers:
            host, port = config.bootstrap_servers[0]
            attrs[SERVER_ADDRESS] = host
            attrs[SERVER_PORT] = port
    group = _group_of(client)
    if group is not None:
        attrs[GROUP] = group
    with contextlib.suppress(TypeError):  # not weak-referenceable: recomputed each time
        _BASE[client] = attrs
    return attrs


def key_string(key: Any) -> str | None:
    """The key as ``messaging.kafka.message.key`` wants it: a str, UTF-8 bytes decoded,
    an int's digits; None when there is no unambiguous string form."""
    if key is None:
        return None
    if isinstance(key, str):
        return key
    if isinstance(key, (bytes, bytearray, memoryview)):
        try:
            return bytes(key).decode("utf-8")
        except UnicodeDecodeError:
            return None
    if isinstance(key, int) and not isinstance(key, bool):
        return str(key)
    return None
