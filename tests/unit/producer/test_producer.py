"""The Producer's own checks before anything is buffered (no sockets): not started, an
async ``on_delivery``, ``send_batch``'s values and charges."""

from __future__ import annotations

from typing import Any

import pytest

from aiokproto.producer import Producer


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
