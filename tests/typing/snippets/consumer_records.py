"""What records hold: bytes | None without a deserializer, its return type with one."""

# ruff: noqa: E501, F841 - one call per line, so mypy's line numbers match the marks

import json

from aiokproto import Consumer, ConsumerRecord, ShareConsumer, ShareRecord


def from_json(data: bytes | None) -> dict[str, int]:
    return {} if data is None else dict(json.loads(data))


def handle(record: ConsumerRecord) -> bytes | None:  # a bare annotation: no deserializer
    return record.value


async def plain() -> None:
    async with Consumer("t", bootstrap_servers="h:9092", group_id="g") as c:
        record = await c.getone()
        s: str = record.value  # E: Incompatible types in assignment (expression has type "bytes | None", variable has type "str")
        b: bytes | None = record.value
        handle(record)
        for records in (await c.getmany(timeout_ms=100)).values():
            k: bytes | None = records[0].key
        async for r in c:
            n: int = r.offset
            t: str = r.key  # E: Incompatible types in assignment (expression has type "bytes | None", variable has type "str")


async def deserialized() -> None:
    c = Consumer("t", bootstrap_servers="h:9092", value_deserializer=from_json)
    async with c:
        record = await c.getone()
        d: dict[str, int] = record.value
        s: str = record.value  # E: Incompatible types in assignment (expression has type "dict[str, int]", variable has type "str")
        k: bytes | None = record.key
        handle(record)  # E: Argument 1 to "handle" has incompatible type "ConsumerRecord[bytes | None, dict[str, int]]"
        c.store_offsets(record)  # any record's offset, whatever its key and value types
        c.store_offsets([record, record])


def options() -> None:
    Consumer("t", bootstrap_servers="h:9092", auto_offset_reset="earliest", isolation_level="read_committed")
    Consumer("t", bootstrap_servers="h:9092", auto_offset_reset="first")  # E: No overload variant of "Consumer"
    Consumer("t", bootstrap_servers="h:9092", session_timeout="45s")  # E: Unexpected keyword argument "session_timeout"
    Consumer("t", bootstrap_servers="h:9092", group_protocol="consumer", group_remote_assignor="uniform")
    Consumer("t", bootstrap_servers="h:9092", key_deserializer=lambda b: b)


async def share() -> None:
    ShareConsumer("t", bootstrap_servers="h:9092")  # E: No overload variant of "ShareConsumer"
    async with ShareConsumer("t", bootstrap_servers="h:9092", group_id="g", key_deserializer=from_json) as sc:
        async for r in sc:
            key: dict[str, int] = r.key
            value: str = r.value  # E: Incompatible types in assignment (expression has type "bytes | None", variable has type "str")
            sc.acknowledge(r)


def share_bare(record: ShareRecord) -> bytes | None:
    return record.value
