"""A scriptable fake Kafka broker for fault-injection tests (never instead of a real one).

It speaks real frames with the project's codecs: ApiVersions and Metadata are answered
correctly by default, and a test's ``script`` decides per request what to do instead:
answer normally, stay silent, send raw bytes, answer with the wrong correlation id, or
drop the connection.
"""

from __future__ import annotations

import asyncio
import struct
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiokproto.protocol.base import Response
from aiokproto.protocol.headers import decode_request_header, response_header_version
from aiokproto.protocol.messages import REQUESTS
from aiokproto.protocol.messages.api_versions import (
    ApiVersionsResponse,
    ApiVersionsResponseApiVersion,
)
from aiokproto.protocol.messages.metadata import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)

#: GetTelemetrySubscriptions and PushTelemetry: like a real broker without a telemetry
#: exporter plugin, the fake does not offer them (clients then push no KIP-714 metrics)
TELEMETRY_APIS = frozenset({71, 72})


@dataclass
class Received:
    api_key: int
    version: int
    correlation_id: int
    request: Any
    connection: int


@dataclass
class Reply:
    """What the fake does with one request; the default is a correct answer."""

    kind: str = "answer"  # answer | silent | raw | body | close | wrong_id
    response: Response | None = None
    raw: bytes = b""


Script = Callable[[Received], Awaitable[Reply | None] | Reply | None]


def encode_response(response: Response, api_key: int, version: int, correlation_id: int) -> bytes:
    body = bytearray(struct.pack(">i", correlation_id))
    if response_header_version(api_key, version) >= 1:
        body.append(0)  # no tagged fields
    response.encode_into(body, version)
    return struct.pack(">i", len(body)) + bytes(body)


@dataclass
class FakeBroker:
    script: Script | None = None
    node_id: int = 1
    host: str = "127.0.0.1"
    port: int = 0
    received: list[Received] = field(default_factory=list)
    connections: int = 0
    _server: asyncio.Server | None = None
    _arrived: asyncio.Event = field(default_factory=asyncio.Event)
    _writers: list[asyncio.StreamWriter] = field(default_factory=list)

    async def __aenter__(self) -> FakeBroker:
        self._server = await asyncio.start_server(self._serve, self.host, 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        for w in self._writers:
            w.close()
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def wait_received(self, predicate: Callable[[list[Received]], bool]) -> None:
        """Wait until the requests received so far satisfy ``predicate``."""
        while not predicate(self.received):
            self._arrived.clear()
            await self._arrived.wait()

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def default_response(self, rec: Received) -> Response:
        if rec.api_key == 18:
            return ApiVersionsResponse(
                api_keys=[
                    ApiVersionsResponseApiVersion(
                        api_key=k, min_version=cls.MIN_VERSION, max_version=cls.MAX_STABLE_VERSION
                    )
                    for k, cls in sorted(REQUESTS.items())
                    if k not in TELEMETRY_APIS
                ]
            )
        if rec.api_key == 3:
            return MetadataResponse(
                brokers=[
                    MetadataResponseBroker(node_id=self.node_id, host=self.host, port=self.port)
                ],
                cluster_id="fake",
                controller_id=self.node_id,
            )
        raise AssertionError(f"fake broker has no default for api {rec.api_key}")

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # Requests are read (and recorded) as they arrive, while a responder answers
        # them in order: a test can see how many a client pipelined before any answer.
        self.connections += 1
        conn_no = self.connections
        self._writers.append(writer)
        queue: asyncio.Queue[Received | None] = asyncio.Queue()
        responder = asyncio.create_task(self._respond(queue, writer))
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                frame = await reader.readexactly(size)
                header, offset = decode_request_header(frame)
                api_key, version = header.request_api_key, header.request_api_version
                request = REQUESTS[api_key].decode(memoryview(frame)[offset:], version)
                rec = Received(api_key, version, header.correlation_id, request, conn_no)
                self.received.append(rec)
                self._arrived.set()
                queue.put_nowait(rec)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            queue.put_nowait(None)
            await responder
            writer.close()

    async def _respond(
        self, queue: asyncio.Queue[Received | None], writer: asyncio.StreamWriter
    ) -> None:
        try:
            while (rec := await queue.get()) is not None:
                reply = self.script(rec) if self.script else None
                if asyncio.iscoroutine(reply):
                    reply = await reply
                reply = reply or Reply()
                assert isinstance(reply, Reply)
                if reply.kind == "silent":
                    continue
                if reply.kind == "close":
                    writer.close()
                    return
                if reply.kind == "raw":
                    writer.write(reply.raw)
                    await writer.drain()
                    continue
                if reply.kind == "body":  # a correct header around arbitrary body bytes
                    head = struct.pack(">i", rec.correlation_id)
                    if response_header_version(rec.api_key, rec.version) >= 1:
                        head += b"\x00"
                    writer.write(struct.pack(">i", len(head) + len(reply.raw)) + head + reply.raw)
                    await writer.drain()
                    continue
                corr = rec.correlation_id + (7 if reply.kind == "wrong_id" else 0)
                response = reply.response or self.default_response(rec)
                writer.write(encode_response(response, rec.api_key, rec.version, corr))
                await writer.drain()
        except ConnectionError:
            pass


def metadata_naming(
    fake: FakeBroker,
    topics: Mapping[str, uuid.UUID],
    leader_epoch: int = -1,
    partitions: int = 1,
) -> MetadataResponse:
    """A Metadata answer: ``fake`` is the only broker, controller and the leader (at
    ``leader_epoch``) of partitions 0..``partitions``-1 of each of ``topics`` (name ->
    topic id)."""
    return MetadataResponse(
        brokers=[MetadataResponseBroker(node_id=fake.node_id, host=fake.host, port=fake.port)],
        cluster_id="fake",
        controller_id=fake.node_id,
        topics=[
            MetadataResponseTopic(
                name=name,
                topic_id=topic_id,
                partitions=[
                    MetadataResponsePartition(
                        partition_index=index,
                        leader_id=fake.node_id,
                        leader_epoch=leader_epoch,
                        replica_nodes=[fake.node_id],
                        isr_nodes=[fake.node_id],
                    )
                    for index in range(partitions)
                ],
            )
            for name, topic_id in topics.items()
        ],
    )
