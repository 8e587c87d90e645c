"""aiokproto.lifecycle.StartStop: ``async with`` over ``start()`` and ``stop()``."""

from __future__ import annotations

import asyncio

import pytest

from aiokproto import Consumer, Producer, ShareConsumer
from aiokproto.lifecycle import StartStop


class _Client(StartStop):
    def __init__(self) -> None:
        self.calls: list[str] = []

    async def start(self) -> None:
        self.calls.append("start")

    async def stop(self) -> None:
        self.calls.append("stop")


async def test_the_block_runs_between_start_and_stop_even_when_it_raises() -> None:
    client = _Client()
    async with client as entered:
        assert entered is client and client.calls == ["start"]
    assert client.calls == ["start", "stop"]
    client = _Client()
    with pytest.raises(ValueError):
        async with client:
            raise ValueError("in the block")
    assert client.calls == ["start", "stop"]
    client = _Client()
    task = asyncio.ensure_future(_enter_and_wait(client))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert client.calls == ["start", "stop"]


async def _enter_and_wait(client: _Client) -> None:
    async with client:
        await asyncio.Event().wait()


def test_the_clients_share_it_and_keep_their_layout() -> None:
    for cls in (Producer, Consumer, ShareConsumer):
        assert issubclass(cls, StartStop)
        assert "__aenter__" not in vars(cls)
    assert StartStop.__slots__ == ()
