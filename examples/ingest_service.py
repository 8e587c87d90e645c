"""An HTTP ingest microservice: JSON events in, Kafka records out (ASGI, run by uvicorn).

    POST /events    a JSON object or a list of them -> one record each, keyed by the
                    event's "user" field (so one user's events stay in order);
                    200 {"accepted": n} once Kafka has them, 400 on bad JSON,
                    503 (Retry-After) when the producer's buffer stays full for
                    max_block_ms (back-pressure), 502 if delivery failed
    GET  /health    200

    python examples/ingest_service.py                 # serve on :8080
    python examples/ingest_service.py --load 20000    # serve, post 20,000 events
                                                      # concurrently, print throughput, exit

Starts a local single-node Kafka unless KAFKA_BOOTSTRAP_SERVERS names a cluster.
Needs ``uvicorn`` (pip install uvicorn); the ASGI app itself uses nothing else.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from aiokproto.admin import Admin, NewTopic, OffsetSpec, TopicPartition
from aiokproto.errors import KafkaError, KafkaTimeoutError
from aiokproto.producer import Producer

TOPIC = "ingest-events"
PARTITIONS = 6
MAX_BODY = 4 * 1024 * 1024

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class IngestApp:
    """The ASGI application; owns one Producer for its lifetime (ASGI lifespan)."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.producer: Producer | None = None
        self.accepted = 0
        self.rejected = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            await self._http(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    self.producer = Producer(
                        bootstrap_servers=self.bootstrap,
                        linger_ms=5,
                        compression_type="lz4",
                        max_block_ms=1000,  # a full buffer turns into 503 within 1 s
                        client_id="ingest-service",
                    )
                    await self.producer.start()
                except KafkaError as exc:
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self.producer is not None:
                    await self.producer.stop(timeout_ms=10_000)
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        method, path = scope["method"], scope["path"]
        if path == "/health" and method == "GET":
            await _respond(send, 200, {"status": "ok", "accepted": self.accepted})
            return
        if path != "/events":
            await _respond(send, 404, {"error": "not found"})
            return
        if method != "POST":
            await _respond(send, 405, {"error": "use POST"})
            return
        body = await _read_body(receive)
        if body is None:
            await _respond(send, 413, {"error": f"body larger than {MAX_BODY} bytes"})
            return
        try:
            events = json.loads(body)
        except ValueError as exc:
            await _respond(send, 400, {"error": f"invalid JSON: {exc}"})
            return
        if isinstance(events, dict):
            events = [events]
        if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
            await _respond(send, 400, {"error": "send a JSON object or a list of objects"})
            return
        await self._ingest(events, send)

    async def _ingest(self, events: list[dict[str, Any]], send: Send) -> None:
        producer = self.producer
        assert producer is not None
        values = [json.dumps(e, separators=(",", ":")).encode() for e in events]
        keys = [None if e.get("user") is None else str(e["user"]).encode() for e in events]
        try:
            delivery = await producer.send_batch(TOPIC, values, keys=keys)
        except KafkaTimeoutError:
            self.rejected += len(events)
            await _respond(
                send, 503, {"error": "Kafka is not keeping up; retry later"},
                extra_headers=[(b"retry-after", b"1")],
            )
            return
        try:
            await delivery  # answer only once Kafka has every event
        except KafkaError as exc:
            await _respond(send, 502, {"error": f"delivery failed: {exc}"})
            return
        self.accepted += len(events)
        await _respond(send, 200, {"accepted": len(events)})


async def _read_body(receive: Receive) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY:
            return None
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


async def _respond(
    send: Send,
    status: int,
    payload: dict[str, Any],
    extra_headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    body = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status,
                "headers": headers + (extra_headers or [])})
    await send({"type": "http.response.body", "body": body})


# -- load generator ----------------------------------------------------------------------


async def _post(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, body: bytes
) -> int:
    """One HTTP/1.1 keep-alive POST; returns the status code."""
    writer.write(
        b"POST /events HTTP/1.1\r\nhost: ingest\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n\r\n%s" % (len(body), body)
    )
    status_line = await reader.readline()
    status = int(status_line.split()[1])
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    await reader.readexactly(length)
    return status


async def load(port: int, total: int, per_request: int, connections: int) -> dict[int, int]:
    """Post ``total`` events, ``per_request`` per POST, over ``connections`` clients."""
    statuses: dict[int, int] = {}
    next_event = 0

    async def client(worker: int) -> None:
        nonlocal next_event
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while next_event < total:
                start = next_event
                next_event = end = min(total, start + per_request)
                events = [
                    {"user": f"user-{i % 1000}", "seq": i, "action": "click", "worker": worker}
                    for i in range(start, end)
                ]
                status = await _post(reader, writer, json.dumps(events).encode())
                statuses[status] = statuses.get(status, 0) + end - start
                if status == 503:
                    await asyncio.sleep(0.1)  # back off as Retry-After asks
        finally:
            writer.close()

    await asyncio.gather(*(client(w) for w in range(connections)))
    return statuses


async def _ensure_topic(bootstrap: str) -> None:
    async with Admin(bootstrap_servers=bootstrap) as admin:
        if TOPIC not in await admin.list_topics():
            await admin.create_topics(
                [NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)]
            )


async def _end_offsets(bootstrap: str) -> int:
    async with Admin(bootstrap_servers=bootstrap) as admin:
        tps = {TopicPartition(TOPIC, p): OffsetSpec.latest() for p in range(PARTITIONS)}
        ends = await admin.list_offsets(tps)
        return sum(info.offset for info in ends.values())


async def run(bootstrap: str, port: int, load_events: int, per_request: int,
              connections: int) -> None:
    import uvicorn

    await _ensure_topic(bootstrap)
    app = IngestApp(bootstrap)
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    if not load_events:
        print(f"ingest service on http://127.0.0.1:{port}/events -> topic {TOPIC}")
        await server.serve()
        return
    serving = asyncio.ensure_future(server.serve())
    try:
        async with asyncio.timeout(30):
            while not server.started:
                if serving.done():
                    serving.result()  # startup failed: raise why
                await asyncio.sleep(0.05)
        before = await _end_offsets(bootstrap)
        began = time.perf_counter()
        statuses = await load(port, load_events, per_request, connections)
        elapsed = time.perf_counter() - began
    finally:
        server.should_exit = True
        with contextlib.suppress(Exception):
            await serving
    written = await _end_offsets(bootstrap) - before
    ok = statuses.get(200, 0)
    print(f"posted {load_events} events in {load_events // per_request} requests over "
          f"{connections} connections in {elapsed:.2f} s: {load_events / elapsed:,.0f} events/s")
    print(f"responses (events per status): {dict(sorted(statuses.items()))}")
    print(f"records written to {TOPIC}: {written} (accepted {ok})")
    if written != ok:
        raise SystemExit(f"mismatch: {ok} events accepted but {written} records written")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=8080)
    ap.add_argument("--load", type=int, default=0, metavar="N",
                    help="post N events with a built-in load generator, then exit")
    ap.add_argument("--per-request", type=int, default=100, help="events per POST (--load)")
    ap.add_argument("--connections", type=int, default=16, help="concurrent clients (--load)")
    args = ap.parse_args()
    external = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if external:
        asyncio.run(run(external, args.port, args.load, args.per_request, args.connections))
        return
    from aiokproto.testing import PLAINTEXT_ONLY, LocalKafka

    with LocalKafka(security=PLAINTEXT_ONLY) as kafka:
        print(f"started Kafka {kafka.version} at {kafka.bootstrap_servers}")
        asyncio.run(
            run(kafka.bootstrap_servers, args.port, args.load, args.per_request, args.connections)
        )
    print("broker stopped")


if __name__ == "__main__":
    main()
