"""What send() takes: bytes without a serializer, the serializer's type with one."""

# ruff: noqa: E501 - one call per line, so mypy's line numbers match the marks

import json
from typing import Any

from aiokproto import KafkaError, Producer, RecordMetadata


def to_json(value: dict[str, int]) -> bytes:
    return json.dumps(value).encode()


def report(error: KafkaError | None, metadata: RecordMetadata | None) -> None:
    """confluent-kafka's delivery callback, annotated as its docs say"""


async def plain(p: Producer) -> None:
    await p.send("t", b"v", on_delivery=report)
    await p.send("t", 123)  # E: Argument 2 to "send" of "Producer" has incompatible type "int"; expected "bytes | bytearray | memoryview[int] | None"
    await p.send("t", "text")  # E: Argument 2 to "send" of "Producer" has incompatible type "str"
    await p.send("t", b"v", key="k")  # E: Argument "key" to "send" of "Producer" has incompatible type "str"
    await p.send("t", b"v", key=b"k")
    await p.send("t", bytearray(b"v"), key=memoryview(b"k"))
    await p.send("t", None, key=b"k")  # a tombstone
    await p.send_batch("t", [b"a", b"b"], keys=[b"1", None])
    await p.send_batch("t", [1, 2])  # E: List item 0 has incompatible type "int"


async def serialized() -> None:
    async with Producer(bootstrap_servers="h:9092", value_serializer=to_json) as p:
        await p.send("t", {"a": 1})
        await p.send("t", "text")  # E: Argument 2 to "send" of "Producer" has incompatible type "str"; expected "dict[str, int] | None"
    keyed = Producer(bootstrap_servers="h:9092", key_serializer=str.encode)
    await keyed.send("t", b"v", key="k")
    await keyed.send("t", b"v", key=1)  # E: Argument "key" to "send" of "Producer" has incompatible type "int"; expected "str | None"
    # a lambda tells nothing about its argument: anything goes (Any)
    loose = Producer(bootstrap_servers="h:9092", value_serializer=lambda v: json.dumps(v).encode())
    await loose.send("t", {"any": ["thing"]})
    untyped: Producer[Any, Any] = loose
    await untyped.send("t", 1)
