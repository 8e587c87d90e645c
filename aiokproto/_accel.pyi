# Types of the compiled module built from _accel.c (see aiokproto/accel.py).
from collections.abc import Callable
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
def murmur2(data: bytes | bytearray | memoryview, /) -> int: ...
def now_ms() -> int: ...
def run_record_callbacks(
    handle_type: type[Any], batch: Any, calls: list[Any], report: Callable[[Any], object], /
) -> None: ...

class RecordsBuilder:
    _buf: bytearray
    _payload: bytes | None
    _count: int
    _base_ts: int
    _max_ts: int
    _limit: int
    def append(
        self, timestamp_ms: int, key: bytes | None, value: bytes | None, headers: Any = None
    ) -> int | None: ...

class DeliveryHandle:
    _batch: Any
    _error: Any
    _delta: int
    _timestamp: int
    _ksize: int
    _vsize: int
    def __init__(
        self, batch: Any, delta: int, timestamp: int, ksize: int, vsize: int, error: Any = None
    ) -> None: ...

def append_to(
    handle_type: type[Any],
    batch: Any,
    timestamp: int,
    key: bytes | None,
    value: bytes | None,
    headers: Any,
    ksize: int,
    vsize: int,
    /,
) -> Any: ...
def bind_send(
    producer: type[Any],
    topic_state: type[Any],
    sticky: type[Any],
    accumulator: type[Any],
    queue: type[Any],
    batch: type[Any],
    handle_type: type[Any],
    record_charge: int,
    /,
) -> None: ...
def send_fast(
    producer: Any, topic: Any, value: Any, key: Any, timestamp_ms: Any, /
) -> Any | None: ...
