# Types of the compiled module built from _accel.c (see aiokproto/accel.py).
from typing import Any

def decode_records(
    buf: bytes,
    count: int,
    base_offset: int,
    base_ts: int,
    cls: type[tuple[Any, ...]],
    prefix: tuple[Any, ...],
    suffix: tuple[Any, ...],
    /,
) -> list[Any]: ...
def append_record(
    buf: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: bytes | None,
    limit: int,
    /,
) -> bool: ...
def append_records(
    buf: bytearray,
    first_delta: int,
    timestamp_delta: int,
    keys: list[bytes | None] | None,
    values: list[bytes | None],
    start: int,
    stop: int,
    headers: bytes | None,
    limit: int,
    /,
) -> int: ...
def arrow_columns(
    records: list[Any] | tuple[Any, ...],
    cls: type[tuple[Any, ...]],
    include_headers: bool,
    /,
) -> tuple[Any, ...]: ...
def murmur2(data: bytes | bytearray | memoryview, /) -> int: ...
