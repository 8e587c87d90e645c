"""The replaying fake broker: recorded answers back to the client, one of them mutated.

Each request is answered with the recorded answer to the same request (same API,
version and body, ignoring deadlines and record bytes), re-stamped with the request's
correlation id, after the delay the real broker took. Identical requests get the
recorded answers in recorded order (the last one again when they run out). A request
never recorded gets the recorded answer to the most similar request of its API. Broker
addresses in answers point at the fake; answers recorded at another version than asked
are re-encoded. The server is a plain ``asyncio.Protocol``: it owns no task, so every
task alive after a case belongs to the client.
"""

from __future__ import annotations

import asyncio
import random
import struct
import traceback
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from tests.faults.fuzz.corpus import Corpus, Exchange
from tests.faults.fuzz.mutations import MUTATIONS, Step, Target, framed
from tests.faults.fuzz.plans import NO_MUTATION, Plan
from tests.faults.fuzz.wire import (
    ADDRESS_APIS,
    move_addresses,
    reencode_response,
    request_body,
    request_head,
    request_signature,
    response_body,
    response_frame,
)

_I = struct.Struct(">i")
_MAX_REQUEST = 16 * 1024 * 1024
LOG_LIMIT = 1000
HOST = "127.0.0.1"


def _common_prefix(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class AnswerBook:
    """A scenario's recorded exchanges, indexed for answering (built once per process)."""

    def __init__(self, corpus: Corpus, scenario: str, port: int) -> None:
        self.port = port
        own = corpus.of(scenario)
        self._signed = [(e, self._sig(e)) for e in corpus.exchanges]
        self._by_sig: dict[tuple[int, int, bytes], list[Exchange]] = defaultdict(list)
        self._by_api: dict[int, list[tuple[Exchange, bytes]]] = defaultdict(list)
        for e, sig in self._signed:
            if e.scenario == scenario:
                self._by_sig[(e.api_key, e.version, sig)].append(e)
        # similar requests: the scenario's own, or any scenario's for an API it lacks
        own_apis = {e.api_key for e in own}
        for e, sig in self._signed:
            if e.scenario == scenario or e.api_key not in own_apis:
                self._by_api[e.api_key].append((e, sig))
        self._bodies: dict[tuple[int, int], bytes | None] = {}
        self._sigs: dict[tuple[int, int, bytes], bytes] = {}  # most requests recur as is

    @staticmethod
    def _sig(e: Exchange) -> bytes:
        return request_signature(e.api_key, e.version, request_body(e.request))

    def choose(
        self, api_key: int, version: int, body: bytes, used: dict[tuple[int, int, bytes], int]
    ) -> tuple[Exchange | None, bool]:
        """The recorded exchange to answer with, and whether its request was identical."""
        raw = (api_key, version, body)
        sig = self._sigs.get(raw)
        if sig is None:
            if len(self._sigs) > 20_000:  # record bytes make some requests unique
                self._sigs.clear()
            sig = self._sigs[raw] = request_signature(api_key, version, body)
        key = (api_key, version, sig)
        pool = self._by_sig.get(key)
        if pool:
            n = used[key]
            used[key] = n + 1
            return pool[min(n, len(pool) - 1)], True
        candidates = self._by_api.get(api_key)
        if not candidates:
            return None, False
        best = max(
            candidates, key=lambda c: (c[0].version == version, _common_prefix(sig, c[1]))
        )
        return best[0], False

    def body(self, e: Exchange, version: int) -> bytes | None:
        """The answer's body at ``version``, addresses moved; None if it cannot be."""
        key = (id(e), version)
        if key not in self._bodies:
            body = response_body(e.api_key, e.version, e.response)
            try:
                if e.version != version:
                    body = reencode_response(e.api_key, body, e.version, version)
                if e.api_key in ADDRESS_APIS:
                    body = move_addresses(e.api_key, version, body, HOST, self.port)
                self._bodies[key] = body
            except Exception:
                self._bodies[key] = None
        return self._bodies[key]


@dataclass
class Answered:
    """One request the fake saw, for the verbose replay of a case."""

    connection: int
    api_key: int
    version: int
    recorded: bool  # an identical request was recorded (else: the most similar one)
    mutated: str = ""


class _Conn(asyncio.Protocol):
    def __init__(self, server: ReplayServer) -> None:
        self.server = server
        self.session: ReplaySession | None = None
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.previous: bytes | None = None
        self.ready_at = 0.0  # answers leave in request order
        self.stalled = False
        self.number = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        session = self.server.session
        if session is None:
            transport.abort()
            return
        self.session = session
        session.conns.append(self)
        self.number = len(session.conns)

    def data_received(self, data: bytes) -> None:
        buf = self.buffer
        buf += data
        while len(buf) >= 4:
            (size,) = _I.unpack_from(buf, 0)
            if not 0 < size <= _MAX_REQUEST:
                self.close()
                return
            if len(buf) < 4 + size:
                return
            frame = bytes(buf[4 : 4 + size])
            del buf[: 4 + size]
            if self.session is not None and not self.stalled:
                self.session.on_request(self, frame)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def perform(self, step: Step) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        if step.action == "write":
            self.transport.write(step.data)
        elif step.action == "close":
            self.transport.close()


class ReplaySession:
    """One case's view of the fake broker."""

    def __init__(self, book: AnswerBook, plan: Plan) -> None:
        self.book = book
        self.plan = plan
        self.loop = asyncio.get_running_loop()
        self.rng = random.Random(f"mutate:{plan.seed}:{plan.index}")
        self.used: dict[tuple[int, int, bytes], int] = defaultdict(int)
        self.seen: dict[int, int] = defaultdict(int)
        self.conns: list[_Conn] = []
        self.timers: list[asyncio.TimerHandle] = []  # answers not sent yet
        self.applied = ""  # what the mutation did, once it was applied
        self.harness_error = ""  # a mutation that raised (a bug in the fuzzer)
        self.log: list[Answered] = []  # the first LOG_LIMIT requests
        self.counts: Counter[int] = Counter()  # requests by API key

    def on_request(self, conn: _Conn, frame: bytes) -> None:
        try:
            api_key, version, corr = request_head(frame)
            body = request_body(frame)
        except Exception:
            conn.close()
            return
        exchange, identical = self.book.choose(api_key, version, body, self.used)
        occurrence = self.seen[api_key]
        self.seen[api_key] = occurrence + 1
        answer = None if exchange is None else self.book.body(exchange, version)
        entry = Answered(conn.number, api_key, version, identical)
        self.counts[api_key] += 1
        if len(self.log) < LOG_LIMIT:  # a client in a loop sends hundreds of thousands
            self.log.append(entry)
        if exchange is None or answer is None:
            self._schedule(conn, [Step("close")], 0.0)
            return
        out = response_frame(api_key, version, corr, answer)
        steps = [Step("write", framed(out))]
        plan = self.plan
        if (
            not self.applied
            and plan.mutation != NO_MUTATION
            and api_key == plan.api_key
            and occurrence == plan.occurrence
        ):
            target = Target(api_key, version, out, conn.previous, self.rng)
            try:
                steps = MUTATIONS[plan.mutation](target)
            except Exception:  # the fuzzer's own bug: must not pass for the client's
                self.harness_error = traceback.format_exc()
            self.applied = entry.mutated = f"{plan.mutation}: {target.detail}"
        conn.previous = out
        self._schedule(conn, steps, exchange.delay_ms / 1000)

    def _schedule(self, conn: _Conn, steps: list[Step], delay: float) -> None:
        at = max(self.loop.time() + delay, conn.ready_at)
        for step in steps:
            at += step.delay_s
            if step.action == "stall":
                conn.stalled = True
                continue
            if len(self.timers) > 256:
                now = self.loop.time()
                self.timers = [t for t in self.timers if t.when() > now]
            self.timers.append(self.loop.call_at(at, conn.perform, step))
        conn.ready_at = at

    def close(self) -> None:
        for timer in self.timers:
            timer.cancel()
        for conn in self.conns:
            if conn.transport is not None:
                conn.transport.abort()


@dataclass
class ReplayServer:
    """One listening socket per process; connections join the current session."""

    corpus: Corpus
    port: int = 0
    session: ReplaySession | None = None
    _server: asyncio.Server | None = None
    _books: dict[str, AnswerBook] = field(default_factory=dict)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _Conn(self), HOST, 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    def book(self, scenario: str) -> AnswerBook:
        if scenario not in self._books:
            self._books[scenario] = AnswerBook(self.corpus, scenario, self.port)
        return self._books[scenario]

    def begin(self, plan: Plan) -> ReplaySession:
        self.session = ReplaySession(self.book(plan.scenario), plan)
        return self.session

    def end(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None
