"""Produce's input reader: lines as they come, and a stop that keeps what was read."""

from __future__ import annotations

import asyncio
import os

from aiokproto.cli.reader import ChunkReader, read_lines


async def test_reader_lines_and_stop_keeps_what_was_read() -> None:
    r, w = os.pipe()
    try:
        reader = ChunkReader(r, chunk=4)
        os.write(w, b"ab\r\ncd\nlast")
        got: list[bytes] = []
        sizes: list[int] = []

        async def collect() -> None:
            async for line in read_lines(reader, sizes.append):
                got.append(line)

        task = asyncio.create_task(collect())
        async with asyncio.timeout(5):
            while sum(sizes) < len(b"ab\r\ncd\nlast"):  # noqa: ASYNC110 - polling a thread's progress
                await asyncio.sleep(0.01)
        assert got == [b"ab", b"cd"]
        reader.stop()  # the pipe stays open: stop() ends the input at once
        async with asyncio.timeout(5):
            await task
        assert got == [b"ab", b"cd", b"last"] and reader.stopped
    finally:
        os.close(w)  # the reader thread sees the end, then stops, before r is closed
        await asyncio.to_thread(reader._thread.join, 5)
        os.close(r)


async def test_reader_eof() -> None:
    r, w = os.pipe()
    os.write(w, b"x\ny\n")
    os.close(w)
    try:
        reader = ChunkReader(r)
        async with asyncio.timeout(5):
            assert [x async for x in read_lines(reader, lambda n: None)] == [b"x", b"y"]
        assert not reader.stopped and await reader.read() == b""
    finally:
        os.close(r)
