"""A Kafka-aware TCP relay that records every request/response pair it forwards.

The client talks to the relay; the relay talks to one real broker. Answers naming
broker addresses (Metadata, FindCoordinator, DescribeCluster) are rewritten to point
at the relay, so every later connection also goes through it. The recorded answer is
the broker's original frame.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import time
from dataclasses import dataclass, field

from tests.faults.fuzz.corpus import Exchange
from tests.faults.fuzz.wire import (
    ADDRESS_APIS,
    move_addresses,
    request_head,
    response_body,
    response_frame,
    size_prefixed,
)

_I = struct.Struct(">i")


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = _I.unpack(await reader.readexactly(4))
    return await reader.readexactly(size)


@dataclass
class Relay:
    upstream_host: str
    upstream_port: int
    host: str = "127.0.0.1"
    port: int = 0
    scenario: str = "setup"  # the label new exchanges are recorded under
    exchanges: list[Exchange] = field(default_factory=list)
    _server: asyncio.Server | None = None
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)
    _writers: list[asyncio.StreamWriter] = field(default_factory=list)

    async def __aenter__(self) -> Relay:
        self._server = await asyncio.start_server(self._accept, self.host, 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        # Closing every socket ends the relay loops by themselves (no cancellation).
        for writer in self._writers:
            writer.close()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    def of(self, scenario: str) -> list[Exchange]:
        return [e for e in self.exchanges if e.scenario == scenario]

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.append(writer)
        try:
            up_reader, up_writer = await asyncio.open_connection(
                self.upstream_host, self.upstream_port
            )
        except OSError:
            writer.close()
            self._tasks.discard(task)
            return
        self._writers.append(up_writer)
        # correlation id -> (api_key, version, request frame, scenario, time sent)
        pending: dict[int, tuple[int, int, bytes, str, float]] = {}
        back = asyncio.create_task(self._answers(up_reader, writer, pending))
        self._tasks.add(back)
        try:
            while True:
                frame = await _read_frame(reader)
                api_key, version, corr = request_head(frame)
                pending[corr] = (api_key, version, frame, self.scenario, time.monotonic())
                up_writer.write(size_prefixed(frame))
                await up_writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            up_writer.close()
            with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
                await back
            writer.close()
            self._tasks.discard(back)
            self._tasks.discard(task)

    async def _answers(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        pending: dict[int, tuple[int, int, bytes, str, float]],
    ) -> None:
        try:
            while True:
                frame = await _read_frame(reader)
                (corr,) = _I.unpack_from(frame, 0)
                api_key, version, request, scenario, sent = pending.pop(corr)
                delay_ms = round((time.monotonic() - sent) * 1000)
                self.exchanges.append(
                    Exchange(scenario, api_key, version, request, frame, delay_ms)
                )
                out = frame
                if api_key in ADDRESS_APIS:
                    body = move_addresses(
                        api_key, version, response_body(api_key, version, frame), self.host,
                        self.port,
                    )
                    out = response_frame(api_key, version, corr, body)
                writer.write(size_prefixed(out))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()
