"""A Kafka-aware TCP fault proxy for tests: one listener per real broker.

Clients learn broker addresses from Metadata answers (and FindCoordinator, DescribeCluster,
and the ``node_endpoints`` of Produce/Fetch answers), so a plain byte relay would be
bypassed after bootstrap. The proxy therefore parses every frame with the project's
codecs: request headers tell it the API and version behind each correlation id, and
the answers that carry broker addresses are decoded, pointed at the proxy's listeners
and re-encoded. A broker it has not seen yet gets a listener on first mention.

Faults are set per listener and per direction ("request": client to broker,
"response": broker to client) while traffic flows, and act on whole frames:

- latency: each frame is held ``latency + U(0, jitter)`` seconds (order is kept);
- bandwidth: a byte rate shared by every connection of the listener in that direction;
- reset: cut a frame after N bytes and abort both sockets with a TCP RST;
- black hole: frames are swallowed, sockets stay open, nothing comes back;
- refuse: the listening socket is closed (connects get ECONNREFUSED) until healed.

``apis`` scopes a direction's faults to frames of some API keys. Jitter comes from a
seeded RNG per listener, and resets count frames, so a run is reproducible for a given
traffic. Anything the proxy cannot parse or rewrite is recorded in ``errors`` (and the
connection is dropped, so a client can never slip past it with a real address).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import socket
import struct
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Self

from aiokproto.config import parse_bootstrap_servers
from aiokproto.protocol.headers import (
    decode_request_header,
    decode_response_header,
    encode_request,
    response_header_version,
)
from aiokproto.protocol.messages import response_class
from aiokproto.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from aiokproto.protocol.messages.metadata import MetadataRequest, MetadataResponse

log = logging.getLogger(__name__)

Direction = Literal["request", "response"]
Which = Literal["request", "response", "both"]

PRODUCE, FETCH, METADATA, FIND_COORDINATOR, DESCRIBE_CLUSTER = 0, 1, 3, 10, 60
#: APIs whose answers name brokers, and so are rewritten.
ADDRESS_APIS = frozenset({PRODUCE, FETCH, METADATA, FIND_COORDINATOR, DESCRIBE_CLUSTER})
#: Classic group APIs: JoinGroup, Heartbeat, LeaveGroup, SyncGroup, OffsetCommit/Fetch.
GROUP_APIS = frozenset({11, 12, 13, 14, 8, 9})

_MAX_FRAME = 256 * 1024 * 1024
_QUEUE_FRAMES = 64  # per direction of a connection: back-pressure like a socket buffer
_CONNECT_TIMEOUT_S = 5.0
_SIZE = struct.Struct(">i")


class ProxyError(AssertionError):
    """The proxy itself failed (not a fault it injected)."""


@dataclass
class ResetRule:
    """Cut matching frames after ``after_bytes`` (size prefix included) and reset.

    The cut always leaves the frame incomplete. Matching frames are counted: after
    ``skip`` of them, every ``every``-th one is cut, at most ``limit`` times.
    """

    after_bytes: int = 8
    every: int = 1
    skip: int = 0
    limit: int | None = None
    seen: int = 0
    fired: int = 0

    def fires(self) -> bool:
        self.seen += 1
        n = self.seen - self.skip
        if n <= 0 or (n - 1) % self.every:
            return False
        if self.limit is not None and self.fired >= self.limit:
            return False
        self.fired += 1
        return True


@dataclass
class Faults:
    """What one direction of one listener does to the frames it carries."""

    apis: frozenset[int] | None = None  # scope of every fault below; None: all frames
    latency_s: float = 0.0
    jitter_s: float = 0.0
    bytes_per_s: float | None = None
    blackhole: bool = False
    reset: ResetRule | None = None

    def applies(self, api_key: int | None) -> bool:
        return self.apis is None or api_key in self.apis


@dataclass
class Stats:
    """What a listener saw; tests use it to prove a fault really happened."""

    accepted: int = 0
    resets: int = 0  # connections the proxy reset on purpose
    frames: Counter[tuple[Direction, int]] = field(default_factory=Counter)
    # (api key, version) of every request header: what the client negotiated, as sent
    requests: Counter[tuple[int, int]] = field(default_factory=Counter)
    swallowed: Counter[Direction] = field(default_factory=Counter)

    def count(self, direction: Direction, api_key: int) -> int:
        return self.frames[(direction, api_key)]


def _reset_socket(writer: asyncio.StreamWriter) -> None:
    """Abort with an RST (SO_LINGER 0) rather than a FIN: a reset, not a goodbye."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def _read_frame(reader: asyncio.StreamReader) -> bytes | None:
    """One size-prefixed frame (prefix included); None on a clean EOF between frames."""
    try:
        head = await reader.readexactly(4)
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise
        return None
    (size,) = _SIZE.unpack(head)
    if not 0 < size <= _MAX_FRAME:
        raise ProxyError(f"frame length {size} out of range")
    return head + await reader.readexactly(size)


@dataclass
class _Item:
    frame: bytes
    api_key: int | None
    deliver_at: float


class _Link:
    """One client connection and its connection to the broker."""

    def __init__(
        self, listener: Listener, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter
    ) -> None:
        self.listener = listener
        self.client_r, self.client_w = client_r, client_w
        self.broker_w: asyncio.StreamWriter | None = None
        self.api_of: dict[int, tuple[int, int]] = {}  # correlation id -> (api key, version)
        self.last_at: dict[Direction, float] = {"request": 0.0, "response": 0.0}
        self.tasks: list[asyncio.Task[Any]] = []
        self.done = asyncio.Event()

    async def run(self) -> None:
        lst = self.listener
        try:
            connect = asyncio.create_task(
                asyncio.wait_for(asyncio.open_connection(*lst.upstream), _CONNECT_TIMEOUT_S)
            )
            self.tasks = [connect]  # close() cancels it like any other task of ours
            await asyncio.wait([connect])
            if connect.cancelled():
                return
            if connect.exception() is not None:
                # The broker is down: the client sees what it would see without us.
                _reset_socket(self.client_w)
                return
            broker_r, broker_w = connect.result()
            self.broker_w = broker_w
            requests: asyncio.Queue[_Item | None] = asyncio.Queue(_QUEUE_FRAMES)
            responses: asyncio.Queue[_Item | None] = asyncio.Queue(_QUEUE_FRAMES)
            self.tasks = [
                asyncio.create_task(self._read(self.client_r, requests, "request")),
                asyncio.create_task(self._write(requests, broker_w, "request")),
                asyncio.create_task(self._read(broker_r, responses, "response")),
                asyncio.create_task(self._write(responses, self.client_w, "response")),
            ]
            if self.done.is_set():  # closed while connecting
                return
            await self.done.wait()
        finally:
            self.close(reset=False)
            await asyncio.gather(*self.tasks, return_exceptions=True)

    def close(self, *, reset: bool) -> None:
        for task in self.tasks:
            if task is not asyncio.current_task():
                task.cancel()
        for writer in (self.client_w, self.broker_w):
            if writer is None or writer.transport.is_closing():
                continue
            if reset:
                _reset_socket(writer)
            else:
                writer.transport.abort()
        self.done.set()

    async def _read(
        self, reader: asyncio.StreamReader, queue: asyncio.Queue[_Item | None], d: Direction
    ) -> None:
        lst = self.listener
        loop = asyncio.get_running_loop()
        try:
            while (frame := await _read_frame(reader)) is not None:
                api_key: int | None
                if d == "request":
                    header, _ = decode_request_header(memoryview(frame)[4:])
                    api_key = header.request_api_key
                    self.api_of[header.correlation_id] = (api_key, header.request_api_version)
                    lst.stats.requests[(api_key, header.request_api_version)] += 1
                else:
                    (corr,) = _SIZE.unpack_from(frame, 4)
                    api = self.api_of.pop(corr, None)
                    if api is None:
                        raise ProxyError(f"a response to unknown correlation id {corr}")
                    api_key = api[0]
                    if api_key in ADDRESS_APIS:
                        frame = await lst.proxy.rewrite(api_key, api[1], frame)
                lst.stats.frames[(d, api_key)] += 1
                faults = lst.faults(d)
                delay = 0.0
                if faults.applies(api_key) and (faults.latency_s or faults.jitter_s):
                    delay = faults.latency_s + lst.rng.uniform(0.0, faults.jitter_s)
                # Latency never reorders: a frame leaves no earlier than the one before.
                at = max(loop.time() + delay, self.last_at[d])
                self.last_at[d] = at
                await queue.put(_Item(frame, api_key, at))
            await queue.put(None)
        except (ConnectionError, asyncio.IncompleteReadError):
            self.close(reset=False)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            lst.proxy.fail(f"{lst} {d}: {exc!r}")
            self.close(reset=True)

    async def _write(
        self, queue: asyncio.Queue[_Item | None], writer: asyncio.StreamWriter, d: Direction
    ) -> None:
        lst = self.listener
        loop = asyncio.get_running_loop()
        try:
            while (item := await queue.get()) is not None:
                wait = item.deliver_at - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                faults = lst.faults(d)  # as they are now, not when the frame arrived
                data = item.frame
                cut = False
                if faults.applies(item.api_key):
                    if faults.blackhole:
                        lst.stats.swallowed[d] += 1
                        continue
                    if faults.reset is not None and faults.reset.fires():
                        data = data[: max(0, min(faults.reset.after_bytes, len(data) - 1))]
                        cut = True
                    if faults.bytes_per_s:
                        await lst.paced_write(writer, data, d, faults.bytes_per_s)
                    elif data:
                        writer.write(data)
                        await writer.drain()
                else:
                    writer.write(data)
                    await writer.drain()
                if cut:
                    lst.stats.resets += 1
                    self.close(reset=True)
                    return
            # The other side finished cleanly: finish this one too.
            self.close(reset=False)
        except (ConnectionError, OSError):
            self.close(reset=False)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            lst.proxy.fail(f"{lst} {d} writer: {exc!r}")
            self.close(reset=True)


class Listener:
    """The proxy's stand-in for one broker; faults are switched on it at run time."""

    def __init__(
        self, proxy: FaultProxy, node_id: int, upstream: tuple[str, int], seed: int
    ) -> None:
        self.proxy = proxy
        self.node_id = node_id
        self.upstream = upstream
        self.host = proxy.host
        self.port = 0
        self.stats = Stats()
        self.rng = random.Random(f"{seed}/{node_id}")
        self._faults: dict[Direction, Faults] = {"request": Faults(), "response": Faults()}
        self._server: asyncio.Server | None = None
        self._links: set[_Link] = set()
        self._handlers: set[asyncio.Task[None]] = set()
        self._paced_until: dict[Direction, float] = {"request": 0.0, "response": 0.0}

    def __repr__(self) -> str:
        return (
            f"<Listener node={self.node_id} {self.host}:{self.port} -> "
            f"{self.upstream[0]}:{self.upstream[1]}>"
        )

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def open_connections(self) -> int:
        return len(self._links)

    @property
    def refusing(self) -> bool:
        return self._server is None

    # -- lifecycle --------------------------------------------------------------

    async def listen(self) -> None:
        """Accept connections (on the same port as before, if there was one)."""
        if self._server is not None:
            return
        for attempt in range(50):
            try:
                self._server = await asyncio.start_server(
                    self._accept, self.host, self.port, reuse_address=True
                )
                break
            except OSError:
                if self.port == 0 or attempt == 49:
                    raise
                await asyncio.sleep(0.05)  # the old socket may linger a moment
        assert self._server is not None
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        self._stop_listening()
        self.drop_connections(reset=False)
        # Handlers end on their own once their links are closed; cancelling the
        # server's callback tasks would make asyncio log them as failed.
        await asyncio.gather(*self._handlers, return_exceptions=True)

    def _stop_listening(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.stats.accepted += 1
        link = _Link(self, reader, writer)
        self._links.add(link)
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            await link.run()
        finally:
            self._links.discard(link)
            self._handlers.discard(task)

    # -- faults -----------------------------------------------------------------

    def faults(self, direction: Direction) -> Faults:
        return self._faults[direction]

    def _directions(self, which: Which) -> Iterator[Direction]:
        if which in ("request", "both"):
            yield "request"
        if which in ("response", "both"):
            yield "response"

    def set(self, which: Which = "both", **changes: Any) -> None:
        """Change fields of the ``Faults`` of one or both directions.

        The helpers below set ``apis`` too: a direction has one scope for all its faults.
        """
        for d in self._directions(which):
            self._faults[d] = replace(self._faults[d], **changes)

    def latency(
        self, ms: float, jitter_ms: float = 0.0, which: Which = "both",
        apis: Iterable[int] | None = None,
    ) -> None:
        self.set(which, latency_s=ms / 1000, jitter_s=jitter_ms / 1000, apis=_apis(apis))

    def bandwidth(
        self, bytes_per_s: float, which: Which = "response", apis: Iterable[int] | None = None
    ) -> None:
        self.set(which, bytes_per_s=bytes_per_s, apis=_apis(apis))

    def blackhole(self, which: Which = "both", apis: Iterable[int] | None = None) -> None:
        self.set(which, blackhole=True, apis=_apis(apis))

    def reset_after(
        self,
        after_bytes: int,
        which: Which,
        *,
        every: int = 1,
        skip: int = 0,
        limit: int | None = None,
        apis: Iterable[int] | None = None,
    ) -> None:
        for d in self._directions(which):
            rule = ResetRule(after_bytes, every=every, skip=skip, limit=limit)
            self._faults[d] = replace(self._faults[d], reset=rule, apis=_apis(apis))

    def refuse(self, *, drop_open: bool = True) -> None:
        """Refuse new connections (the port stops listening); reset open ones too."""
        self._stop_listening()
        if drop_open:
            self.drop_connections(reset=True)

    def drop_connections(self, *, reset: bool = True) -> None:
        """Abort every open connection now (with an RST by default)."""
        for link in list(self._links):
            if reset:
                self.stats.resets += 1
            link.close(reset=reset)

    async def heal(self) -> None:
        """No faults any more, and listening again. Open connections are kept."""
        self._faults = {"request": Faults(), "response": Faults()}
        await self.listen()

    async def paced_write(
        self, writer: asyncio.StreamWriter, data: bytes, d: Direction, rate: float
    ) -> None:
        """Write ``data`` no faster than ``rate`` bytes/s for the whole listener."""
        loop = asyncio.get_running_loop()
        chunk = max(256, int(rate / 50))  # ~20 ms slices keep the rate smooth
        for start in range(0, len(data), chunk):
            piece = data[start : start + chunk]
            begin = max(loop.time(), self._paced_until[d])
            self._paced_until[d] = begin + len(piece) / rate
            wait = self._paced_until[d] - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(piece)
            await writer.drain()


def _apis(apis: Iterable[int] | None) -> frozenset[int] | None:
    return None if apis is None else frozenset(apis)


class FaultProxy:
    """``async with FaultProxy("host:port,...", seed=1) as proxy``: clients use
    ``proxy.bootstrap_servers``; ``proxy.node(id)`` is the listener of broker ``id``."""

    def __init__(self, bootstrap_servers: str, *, seed: int = 0, host: str = "127.0.0.1") -> None:
        self.upstream_bootstrap = parse_bootstrap_servers(bootstrap_servers)
        self.seed = seed
        self.host = host
        self.errors: list[str] = []
        self._by_upstream: dict[tuple[str, int], Listener] = {}
        self._lock = asyncio.Lock()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Ask the real cluster for its brokers and open one listener per broker."""
        brokers = await _discover(self.upstream_bootstrap)
        for node_id, host, port in brokers:
            await self._listener_for(node_id, host, port)

    async def close(self) -> None:
        await asyncio.gather(*(lst.close() for lst in self._by_upstream.values()))

    def fail(self, message: str) -> None:
        log.error("fault proxy: %s", message)
        self.errors.append(message)

    def check(self) -> None:
        """Raise if the proxy itself misbehaved (a test result would mean nothing)."""
        if self.errors:
            raise ProxyError("the fault proxy failed: " + "; ".join(self.errors))

    # -- listeners --------------------------------------------------------------

    @property
    def listeners(self) -> list[Listener]:
        return sorted(self._by_upstream.values(), key=lambda lst: lst.node_id)

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(lst.bootstrap for lst in self.listeners)

    def node(self, node_id: int) -> Listener:
        for lst in self._by_upstream.values():
            if lst.node_id == node_id:
                return lst
        raise KeyError(f"no listener for node {node_id}; known: {self.listeners}")

    async def heal_all(self) -> None:
        for lst in self.listeners:
            await lst.heal()

    async def _listener_for(self, node_id: int, host: str, port: int) -> Listener:
        async with self._lock:
            lst = self._by_upstream.get((host, port))
            if lst is None:
                lst = Listener(self, node_id, (host, port), self.seed)
                await lst.listen()
                self._by_upstream[(host, port)] = lst
            return lst

    # -- rewriting --------------------------------------------------------------

    async def rewrite(self, api_key: int, version: int, frame: bytes) -> bytes:
        """``frame`` (size prefix included) with every broker address replaced by ours."""
        view = memoryview(frame)[4:]
        _, offset = decode_response_header(view, response_header_version(api_key, version))
        body = response_class(api_key).decode(view[offset:], version)
        changed = False
        for endpoint, id_field in _endpoints(api_key, body):
            node_id = getattr(endpoint, id_field)
            lst = await self._listener_for(node_id, endpoint.host, endpoint.port)
            if (endpoint.host, endpoint.port) != lst.address:
                endpoint.host, endpoint.port = lst.address
                changed = True
        if not changed:
            return frame
        out = bytearray(4) + view[:offset]
        body.encode_into(out, version)
        _SIZE.pack_into(out, 0, len(out) - 4)
        return bytes(out)


def _endpoints(api_key: int, body: Any) -> Iterator[tuple[Any, str]]:
    """The (struct, node id field) pairs of an answer that carry a broker's host/port."""
    if api_key == METADATA:
        yield from ((b, "node_id") for b in body.brokers)
    elif api_key in (PRODUCE, FETCH):
        yield from ((e, "node_id") for e in body.node_endpoints)
    elif api_key == DESCRIBE_CLUSTER:
        if getattr(body, "endpoint_type", 1) == 1:  # 2 lists controllers: not ours
            yield from ((b, "broker_id") for b in body.brokers)
    elif api_key == FIND_COORDINATOR:
        if body.coordinators:
            yield from ((c, "node_id") for c in body.coordinators if c.error_code == 0)
        elif body.error_code == 0 and body.port > 0:
            yield body, "node_id"


async def _discover(bootstrap: Iterable[tuple[str, int]]) -> list[tuple[int, str, int]]:
    """(node id, host, port) of every broker, from the first bootstrap server that answers."""
    errors = []
    for host, port in bootstrap:
        try:
            return await asyncio.wait_for(_ask_brokers(host, port), 30)
        except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
            errors.append(f"{host}:{port}: {exc!r}")
    raise ProxyError(f"no bootstrap server answered: {errors}")


async def _ask_brokers(host: str, port: int) -> list[tuple[int, str, int]]:
    reader, writer = await asyncio.open_connection(host, port)
    try:

        async def call(request: Any, version: int, corr: int) -> memoryview:
            writer.write(encode_request(request, version, corr, "fault-proxy"))
            await writer.drain()
            frame = await _read_frame(reader)
            if frame is None:
                raise ProxyError(f"{host}:{port} closed the connection")
            view = memoryview(frame)[4:]
            key = request.API_KEY
            got, offset = decode_response_header(view, response_header_version(key, version))
            if got != corr:
                raise ProxyError(f"{host}:{port} answered correlation id {got}, not {corr}")
            return view[offset:]

        versions = ApiVersionsResponse.decode(await call(ApiVersionsRequest(), 0, 1), 0)
        ranges = {k.api_key: k.max_version for k in versions.api_keys}
        version = min(MetadataRequest.MAX_STABLE_VERSION, ranges[MetadataRequest.API_KEY])
        metadata = MetadataResponse.decode(
            await call(MetadataRequest(topics=[]), version, 2), version
        )
        return [(b.node_id, b.host, b.port) for b in metadata.brokers]
    finally:
        writer.close()
