"""One connection to one broker, for one purpose (``BrokerConnection``): pipelined
requests, the ApiVersions and SASL handshakes, re-authentication; connect errors
classified and logged at DEBUG, TLS/plaintext mismatches raised as ``KafkaConfigError``.

Requests are pipelined: each gets a correlation id and a future, up to
``max_in_flight_requests_per_connection`` at once; responses are matched by id and
must arrive in the order the requests were sent (Kafka answers in order on a
connection). Any fault on the connection (a response nobody asked for, an
undecodable frame, a request timeout, the socket closing) kills the whole connection
and fails every request in flight on it with a retriable ``KafkaConnectionError``: the
caller's layer decides whether to retry. A connection owns no task: the event loop's
protocol callbacks and one watchdog timer drive it.

``send_now()`` is the same write without a coroutine, for a caller whose request need
not wait (``ready_now()``): it writes in the caller's step and calls the caller back
from the read path with the answer, so a request costs no task and no loop pass of its
own (the producer sends each Produce request this way).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import socket
import ssl
import struct
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal

from aiokproto.errors import (
    KafkaAuthenticationError,
    KafkaConfigError,
    KafkaConnectionError,
    KafkaError,
    KafkaProtocolError,
    KafkaTimeoutError,
    UnsupportedVersionError,
    for_code,
)
from aiokproto.net.connection_config import ConnectionConfig
from aiokproto.net.framing import FrameAssembler, foreign_protocol
from aiokproto.net.security import SecurityConfig
from aiokproto.protocol.base import Request, Response
from aiokproto.protocol.headers import (
    decode_response_header,
    encode_request,
    response_header_version,
)
from aiokproto.protocol.messages import API_NAMES
from aiokproto.protocol.messages.api_versions import ApiVersionsRequest
from aiokproto.soonest import SoonestTimer

if TYPE_CHECKING:
    from aiokproto.metrics.connections import NodeMetrics

log = logging.getLogger(__name__)

Purpose = Literal["default", "produce", "fetch", "group"]
CloseListener = Callable[["BrokerConnection", BaseException | None], None]

_INT32 = struct.Struct(">i")
_SOFTWARE_NAME = "aiokproto"
_SOFTWARE_VERSION = "0.1.0"
# OpenSSL's verify codes for a certificate that does not name the host or IP
_X509_HOSTNAME_MISMATCH = 62
_X509_IP_ADDRESS_MISMATCH = 64
# OpenSSL reasons for a handshake answered by something that is not TLS
_NOT_TLS_REASONS = frozenset(
    {
        "WRONG_VERSION_NUMBER",
        "HTTP_REQUEST",
        "PACKET_LENGTH_TOO_LONG",
        "RECORD_LAYER_FAILURE",
        "UNEXPECTED_EOF_WHILE_READING",
        "UNKNOWN_PROTOCOL",
        "EOF",
    }
)
# bound of the plaintext probe after a TLS handshake that got no TLS answer
_PROBE_TIMEOUT_MS = 2_000


def _text(exc: BaseException) -> str:
    """An exception as text, never empty (``ConnectionResetError()`` prints nothing)."""
    return str(exc) or type(exc).__name__


def api_name(api_key: int) -> str:
    return API_NAMES.get(api_key, f"API {api_key}")


AnswerCallback = Callable[[Any, "KafkaError | None"], None]


class _Slots(asyncio.Semaphore):
    """The in-flight slots; ``try_acquire()`` takes one without a coroutine."""

    def try_acquire(self) -> bool:
        """Take a slot if one is free and nobody waits for one (as ``acquire()`` would
        without suspending)."""
        if self.locked():
            return False
        self._value -= 1  # asyncio.Semaphore's count (3.11-3.14): acquire() does this
        return True


class _Callback:
    """Stands for a request's future in ``_Pending`` for ``send_now()``: the answer (or
    the error) goes to ``on_answer`` at once, from the read path or from ``_kill``, and
    frees the request's slot first; the first outcome is the only one."""

    __slots__ = ("_done", "_on_answer", "_slots")

    def __init__(self, on_answer: AnswerCallback, slots: asyncio.Semaphore) -> None:
        self._on_answer = on_answer
        self._slots = slots
        self._done = False

    def done(self) -> bool:
        return self._done

    def set_result(self, result: Any) -> None:
        self._settle(result, None)

    def set_exception(self, error: BaseException) -> None:
        assert isinstance(error, KafkaError)
        self._settle(None, error)

    def drop(self) -> None:
        """Free the slot without an answer (the write itself failed)."""
        if not self._done:
            self._done = True
            self._slots.release()

    def _settle(self, result: Any, error: KafkaError | None) -> None:
        if self._done:
            return
        self._done = True
        self._slots.release()
        try:
            self._on_answer(result, error)
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException:
            # the caller's bug (CancelledError too: a BaseException) must not escape
            # into the read path, which would kill the connection and every request
            # on it, nor into _kill, which would leave the other callbacks untold;
            # asyncio's own callbacks are run the same way
            log.exception("a request's answer callback failed")


class _Pending:
    __slots__ = (
        "api_key",
        "future",
        "kill_at",
        "response_cls",
        "sent_at",
        "tell_at",
        "version",
        "waited",
    )

    def __init__(
        self,
        future: asyncio.Future[Any] | _Callback,
        response_cls: type[Response],
        api_key: int,
        version: int,
        sent_at: float,
        tell_at: float | None,
        kill_at: float,
        waited: float,
    ) -> None:
        self.future = future
        self.response_cls = response_cls
        self.api_key = api_key
        self.version = version
        self.sent_at = sent_at
        #: loop time to tell the caller its own timeout ran out while the answer is
        #: still awaited (None: the caller's deadline is ``kill_at``)
        self.tell_at = tell_at
        #: loop time the connection is declared dead if the answer has not come
        self.kill_at = kill_at
        #: seconds the broker had to answer by ``kill_at`` (for the error message)
        self.waited = waited

    def due(self) -> float:
        return self.kill_at if self.tell_at is None else self.tell_at


class _Protocol(asyncio.BufferedProtocol):
    """Event-loop glue: bytes in, frames to the connection; write back-pressure."""

    def __init__(self, conn: BrokerConnection) -> None:
        self._conn = conn
        self._frames = FrameAssembler(conn.config.max_response_size)
        # the first read's buffer: its first bytes may say the peer is no Kafka
        # listener (TLS or HTTP where Kafka was expected)
        self._first: memoryview | None = None
        self._checked = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def get_buffer(self, sizehint: int) -> memoryview:
        buf = self._frames.get_buffer()
        if not self._checked:
            self._first = buf
        return buf

    def buffer_updated(self, nbytes: int) -> None:
        if not self._checked:
            self._checked = True
            first, self._first = self._first, None
            if first is not None and self._conn._foreign_peer(bytes(first[: min(nbytes, 64)])):
                return
        try:
            frames = self._frames.buffer_updated(nbytes)
        except KafkaProtocolError as exc:
            self._conn._kill(exc)
            return
        for frame in frames:
            self._conn._on_frame(frame)

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._conn._kill(
            KafkaConnectionError(f"{self._conn} was closed by the peer")
            if exc is None
            else KafkaConnectionError(f"{self._conn} failed: {exc}")
        )

    def pause_writing(self) -> None:
        self._conn._writable.clear()

    def resume_writing(self) -> None:
        self._conn._writable.set()


class BrokerConnection:
    """A pipelined connection to one broker; open with ``await open()`` or ``async with``."""

    def __init__(
        self,
        host: str,
        port: int,
        config: ConnectionConfig,
        *,
        node_id: int = -1,
        purpose: Purpose = "default",
        metrics: NodeMetrics | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.config = config
        self.node_id = node_id
        self.purpose: Purpose = purpose
        self.api_versions: dict[int, tuple[int, int]] = {}
        #: cluster-wide finalized feature levels from ApiVersions (e.g.
        #: "transaction.version"); empty when the broker reports none
        self.finalized_features: dict[str, int] = {}
        self._transport: asyncio.Transport | None = None
        self._error: KafkaError | None = None
        self._in_flight: dict[int, _Pending] = {}
        self._slots = _Slots(config.max_in_flight_requests_per_connection)
        self._gate = asyncio.Lock()  # FIFO: requests are written in call order
        # send() calls that have not written yet (holding the gate or waiting for it,
        # for a slot, a throttle or the socket): send_now() may not overtake them
        self._writers = 0
        self._writable = asyncio.Event()
        self._writable.set()
        self._next_id = 0
        self._listeners: list[CloseListener] = []
        self._reauth_at: float | None = None
        self._last_used = 0.0
        self._idle_timer: asyncio.TimerHandle | None = None
        # One timer for every request's timeouts, at the earliest due; an answer
        # leaves it armed, and when it fires early it re-arms for what is still due.
        self._watchdog = SoonestTimer(self._watch)
        self._throttled_until = 0.0  # loop time; KIP-219 client-side throttling
        self.closed_by_client = False
        self._metrics = metrics
        self._counted_open = False  # counted in connection-count, so uncount on close
        #: the address answered (TCP up), whether or not the connection then opened;
        #: ``on_reached()`` is called when it does (before the connection is ready)
        self.reached = False
        self.on_reached: Callable[[], None] | None = None
        # set when the peer's first bytes were TLS or HTTP: open() raises it
        self._mismatch: KafkaConfigError | None = None

    def __repr__(self) -> str:
        return f"<BrokerConnection node={self.node_id} {self.host}:{self.port} {self.purpose}>"

    # -- lifecycle -------------------------------------------------------------

    async def __aenter__(self) -> BrokerConnection:
        await self.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def connected(self) -> bool:
        return self._transport is not None and self._error is None

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    def add_close_listener(self, listener: CloseListener) -> None:
        """Call ``listener(conn, error)`` once when the connection closes or dies."""
        self._listeners.append(listener)

    async def open(self) -> None:
        """Connect, negotiate API versions, authenticate. Raises a typed error on failure.

        Each attempt and its outcome is logged at DEBUG. A port that speaks TLS to a
        plaintext client, or plaintext to a TLS client, raises ``KafkaConfigError``
        naming the ``security_protocol`` to set (not retriable: it cannot change).
        Afterwards ``reached`` says whether the address answered at all."""
        loop = asyncio.get_running_loop()
        security = self.config.security
        ssl_ctx = security.build_ssl_context()
        began = loop.time()
        log.debug(
            "connecting to %s:%d (%s, node %d, %s)",
            self.host,
            self.port,
            security.security_protocol,
            self.node_id,
            self.purpose,
        )
        try:
            transport = await self._connect(ssl_ctx)
        except BaseException as exc:
            self._log_failure(exc, began)
            raise
        self._mark_reached()
        # Only the transport's behaviour is relied on (write/abort/get_extra_info):
        # uvloop's transports are not subclasses of asyncio.Transport.
        self._transport = transport
        self._last_used = loop.time()
        if self._metrics is not None:
            self._metrics.opened()
            self._counted_open = True
        try:
            await self._negotiate_versions()
            if security.uses_sasl:
                await self._authenticate()
        except BaseException as exc:
            self._kill(exc if isinstance(exc, KafkaError) else KafkaConnectionError(str(exc)))
            mismatch = self._mismatch
            self._log_failure(mismatch or exc, began)
            if mismatch is not None and not isinstance(exc, asyncio.CancelledError):
                raise mismatch from None
            raise
        self._arm_idle_timer()
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "connected to %s:%d (%s, node %d, %s) in %.0f ms",
                self.host,
                self.port,
                security.security_protocol,
                self.node_id,
                self.purpose,
                (loop.time() - began) * 1000,
            )

    async def _connect(self, ssl_ctx: ssl.SSLContext | None) -> Any:
        """The transport (TCP, and TLS with ``ssl_ctx``), or a typed error saying why not."""
        loop = asyncio.get_running_loop()
        setup_ms = self.config.socket_connection_setup_timeout_ms
        address = f"{self.host}:{self.port}"
        try:
            async with asyncio.timeout(setup_ms / 1000):
                transport, _ = await loop.create_connection(
                    lambda: _Protocol(self),
                    self.host,
                    self.port,
                    ssl=ssl_ctx,
                    server_hostname=self.host if ssl_ctx is not None else None,
                )
        except TimeoutError:
            raise KafkaConnectionError(
                f"connecting to {address} took longer than "
                f"socket_connection_setup_timeout_ms={setup_ms}"
            ) from None
        except ssl.SSLError as exc:
            self._mark_reached()
            raise await self._tls_failed(exc) from exc
        except (ConnectionResetError, ConnectionAbortedError, BrokenPipeError) as exc:
            if ssl_ctx is None:
                raise KafkaConnectionError(f"cannot connect to {address}: {_text(exc)}") from exc
            self._mark_reached()  # TCP was up: the TLS handshake was cut off
            raise await self._tls_failed(exc) from exc
        except socket.gaierror as exc:
            raise KafkaConnectionError(
                f"cannot connect to {address}: the host name does not resolve: "
                f"{exc.strerror or exc}"
            ) from exc
        except ConnectionRefusedError as exc:
            raise KafkaConnectionError(
                f"cannot connect to {address}: connection refused, nothing listens there"
            ) from exc
        except (OSError, ValueError, OverflowError) as exc:
            # ValueError (UnicodeError among them): a host a broker named that cannot be
            # encoded (a NUL byte, a label IDNA rejects); OverflowError: a bad port
            raise KafkaConnectionError(f"cannot connect to {address}: {_text(exc)}") from exc
        return transport

    def _mark_reached(self) -> None:
        if not self.reached:
            self.reached = True
            if self.on_reached is not None:
                self.on_reached()

    async def _tls_failed(self, exc: OSError) -> KafkaError:
        """The error for a failed TLS handshake, naming what to change."""
        address = f"{self.host}:{self.port}"
        if isinstance(exc, ssl.SSLCertVerificationError):
            if exc.verify_code in (_X509_HOSTNAME_MISMATCH, _X509_IP_ADDRESS_MISMATCH):
                hint = (
                    f"the broker's certificate is not valid for {self.host!r}: connect "
                    "with a host name the certificate lists, or (test certificates only) "
                    "set ssl_check_hostname=False"
                )
            else:
                hint = (
                    "the broker's certificate is not trusted: set ssl_cafile to the CA "
                    "certificate that signed it (or pass an ssl_context that trusts it)"
                )
            return KafkaAuthenticationError(
                f"TLS handshake with {address} failed: {exc.verify_message.rstrip('.')}; {hint}"
            )
        not_tls = (
            not isinstance(exc, ssl.SSLError)
            or isinstance(exc, ssl.SSLEOFError)
            or exc.reason in _NOT_TLS_REASONS
        )
        if not_tls and await self._answers_plaintext():
            protocol = self.config.security.security_protocol
            plain = "SASL_PLAINTEXT" if protocol == "SASL_SSL" else "PLAINTEXT"
            also = ""
            if plain == "PLAINTEXT":
                also = ' (or "SASL_PLAINTEXT" if the listener uses SASL)'
            return KafkaConfigError(
                f"{address} is a plaintext listener, not TLS: the TLS handshake failed "
                f"({_text(exc)}) and the port answers Kafka without TLS; security_protocol "
                f'is "{protocol}": set security_protocol="{plain}"{also}, or use the '
                "brokers' TLS port"
            )
        if isinstance(exc, ssl.SSLError):
            return KafkaAuthenticationError(f"TLS handshake with {address} failed: {exc}")
        return KafkaConnectionError(f"TLS handshake with {address} failed: {_text(exc)}")

    async def _answers_plaintext(self) -> bool:
        """Whether the port answers ApiVersions without TLS (after a handshake that got
        no TLS answer): if so the listener is plaintext, for certain."""
        plain = dataclasses.replace(self.config, security=SecurityConfig())
        probe = BrokerConnection(self.host, self.port, plain, node_id=self.node_id)
        limit = min(_PROBE_TIMEOUT_MS, self.config.socket_connection_setup_timeout_ms)
        try:
            async with asyncio.timeout(limit / 1000):
                await probe.open()
        except (KafkaError, TimeoutError):
            return False
        finally:
            probe.close()
        return True

    def _foreign_peer(self, head: bytes) -> bool:
        """Fail the connection if its first bytes are TLS or HTTP; True if they were."""
        kind = foreign_protocol(head)
        if kind is None:
            return False
        address = f"{self.host}:{self.port}"
        protocol = self.config.security.security_protocol
        if kind == "TLS":
            tls = "SASL_SSL" if protocol == "SASL_PLAINTEXT" else "SSL"
            also = ' (or "SASL_SSL" if the listener uses SASL)' if tls == "SSL" else ""
            text = (
                f"{address} speaks TLS (it answered with a TLS record, bytes "
                f'{head[:5].hex(" ")}), but security_protocol is "{protocol}": set '
                f'security_protocol="{tls}"{also}, with ssl_cafile for the brokers\' CA'
            )
        else:
            line = head.split(b"\r\n", 1)[0].decode("ascii", "replace")
            text = (
                f"{address} is an HTTP server (it answered {line!r}), not a Kafka "
                "listener: check the port (bootstrap_servers, or the brokers' "
                "advertised.listeners)"
            )
        self._mismatch = KafkaConfigError(text)
        self._kill(KafkaConnectionError(f"{self} failed: {text}"))
        return True

    def _log_failure(self, exc: BaseException, began: float) -> None:
        if log.isEnabledFor(logging.DEBUG):
            took = (asyncio.get_running_loop().time() - began) * 1000
            outcome = "cancelled" if isinstance(exc, asyncio.CancelledError) else _text(exc)
            outcome = outcome.removeprefix(f"cannot connect to {self.host}:{self.port}: ")
            log.debug(
                "connecting to %s:%d (%s, node %d, %s) failed after %.0f ms: %s",
                self.host,
                self.port,
                self.config.security.security_protocol,
                self.node_id,
                self.purpose,
                took,
                outcome,
            )

    def close(self) -> None:
        """Close now; requests still in flight fail with ``KafkaConnectionError``."""
        if self._error is None:
            self.closed_by_client = True
        self._kill(KafkaConnectionError(f"{self} was closed by the client"))

    # -- requests --------------------------------------------------------------

    def version_for(self, request_cls: type[Request], min_version: int = 0) -> int:
        """The highest version of the API both sides support (at least ``min_version``)."""
        key = request_cls.API_KEY
        low = max(request_cls.MIN_VERSION, min_version)
        high = request_cls.MAX_STABLE_VERSION
        broker = self.api_versions.get(key)
        if broker is None:
            raise UnsupportedVersionError(
                f"{self.host}:{self.port} does not support {api_name(key)} at all "
                f"(client supports v{low}-v{high})"
            )
        best = min(high, broker[1])
        if best < max(low, broker[0]):
            raise UnsupportedVersionError(
                f"no common version of {api_name(key)}: client supports v{low}-v{high}, "
                f"broker {self.host}:{self.port} supports v{broker[0]}-v{broker[1]}"
            )
        return best

    async def send(
        self,
        request: Request,
        version: int | None = None,
        *,
        expect_response: bool = True,
        timeout_ms: int | None = None,
    ) -> Any:
        """Send ``request`` and return its decoded response (None without a response).

        The call is bounded by ``timeout_ms`` (default ``request_timeout_ms``), waiting
        for earlier requests to be written, for a free in-flight slot or for the socket
        to drain included, plus a broker's throttle (KIP-219, at most
        ``request_timeout_ms``): ``KafkaTimeoutError`` when it runs out. Requests are
        written in the order ``send()`` was called; a due re-authentication (KIP-368)
        happens in that same order, before the next request is written.
        ``expect_response=False`` is for acks=0 produce, which the broker never answers.
        """
        loop = asyncio.get_running_loop()
        timeout = (timeout_ms or self.config.request_timeout_ms) / 1000
        deadline = loop.time() + timeout
        if version is None:
            version = self.version_for(type(request))
        gate = self._gate
        # One gate, FIFO: whatever may suspend before the write happens inside it, so
        # a throttle, a full socket or a re-authentication can never let a later
        # request overtake an earlier one (the producer's partition order depends on it).
        self._writers += 1
        try:
            if gate.locked():
                await self._wait_until(deadline, request, gate.acquire)
            else:
                await gate.acquire()  # free: returns without suspending
            try:
                if self._reauth_at is not None and loop.time() >= self._reauth_at:
                    await self._reauthenticate()
                future = await self._queue_write(
                    request, version, expect_response, deadline, timeout
                )
            finally:
                gate.release()
        finally:
            self._writers -= 1
        if future is None:
            return None
        try:
            return await future
        finally:
            self._slots.release()

    def ready_now(self, expect_response: bool = True) -> bool:
        """Whether ``send_now()`` may write at once: the connection is open, no
        ``send()`` is waiting to write, a slot is free, the socket drains, no throttle
        or re-authentication is due (``send()`` would not suspend either)."""
        if self._error is not None or self._transport is None or self._writers:
            return False
        if expect_response and self._slots.locked():
            return False
        if not self._writable.is_set():
            return False
        now = asyncio.get_running_loop().time()
        if self._throttled_until > now:
            return False
        return self._reauth_at is None or now < self._reauth_at

    def send_now(
        self,
        request: Request,
        version: int,
        on_answer: AnswerCallback | None,
        *,
        timeout_ms: int | None = None,
    ) -> None:
        """Write ``request`` now, in the caller's step, when ``ready_now()`` says so
        (``RuntimeError`` otherwise: nothing is written). ``on_answer(response, None)``
        or ``on_answer(None, error)`` is then called once, synchronously, when the
        answer is read, the caller's timeout (``timeout_ms``, as for ``send()``) runs
        out or the connection dies; None: no answer is expected (acks=0 produce).
        Nothing suspends, so the frame is written whole or not at all."""
        expect_response = on_answer is not None
        if not self.ready_now(expect_response):
            raise RuntimeError(f"{self} cannot write now: use send()")
        timeout = (timeout_ms or self.config.request_timeout_ms) / 1000
        deadline = asyncio.get_running_loop().time() + timeout
        callback = None
        if on_answer is not None:
            self._slots.try_acquire()  # free (ready_now)
            callback = _Callback(on_answer, self._slots)
        response_cls = type(request).RESPONSE if expect_response else None
        try:
            self._write(request, version, response_cls, deadline, timeout, callback)
        except BaseException:
            if callback is not None:
                callback.drop()  # the caller has the error: no answer follows
            raise

    async def _roundtrip(self, request: Request, version: int | None = None) -> Any:
        """Write and await one request without the gate (the caller holds it, or no one
        else can be sending: the handshake while opening)."""
        loop = asyncio.get_running_loop()
        timeout = self.config.request_timeout_ms / 1000
        if version is None:
            version = self.version_for(type(request))
        future = await self._queue_write(request, version, True, loop.time() + timeout, timeout)
        assert future is not None
        try:
            return await future
        finally:
            self._slots.release()

    async def _queue_write(
        self,
        request: Request,
        version: int,
        expect_response: bool,
        deadline: float,
        budget: float,
    ) -> asyncio.Future[Any] | None:
        """Take a slot, wait out a throttle and a full socket, write. The slot is the
        caller's to release once the answer is in (None: no answer expected).
        ``budget``: the caller's whole timeout in seconds (``deadline`` is when it ends)."""
        loop = asyncio.get_running_loop()
        response_cls = type(request).RESPONSE if expect_response else None
        if response_cls is not None:
            if self._slots.locked():
                await self._wait_until(deadline, request, self._slots.acquire)
            else:
                await self._slots.acquire()  # free: returns without suspending
        try:
            throttled = self._throttled_until - loop.time()
            if throttled > 0:
                # The broker answered a quota violation at once and left the wait to
                # us (capped when noted); the request's own time starts after it.
                await asyncio.sleep(throttled)
                deadline += throttled
            if not self._writable.is_set() and self._error is None:
                try:
                    await self._wait_until(deadline, request, self._writable.wait)
                except KafkaTimeoutError as exc:
                    # A socket that does not drain for a whole timeout is dead; and
                    # nothing queued behind this request may be written without it.
                    self._kill(exc)
                    raise
            return self._write(request, version, response_cls, deadline, budget)
        except BaseException:
            if response_cls is not None:
                self._slots.release()
            raise

    async def _wait_until(
        self, deadline: float, request: Request, wait: Callable[[], Awaitable[Any]]
    ) -> None:
        """Run ``wait()`` until ``deadline``; nothing was written if it runs out."""
        try:
            async with asyncio.timeout_at(deadline):
                await wait()
        except TimeoutError:
            if self._error is not None:
                raise KafkaConnectionError(f"{self} is not open") from self._error
            raise KafkaTimeoutError(
                f"{api_name(request.API_KEY)} to {self} could not be sent before its "
                f"timeout ({self._why_waiting()})"
            ) from None

    def _why_waiting(self) -> str:
        if not self._writable.is_set():
            return "the socket does not drain"
        if self._slots.locked():
            return f"{self.in_flight} request(s) in flight fill every slot"
        return "earlier requests on this connection are still being written"

    def _write(
        self,
        request: Request,
        version: int,
        response_cls: type[Response] | None,
        deadline: float,
        timeout: float,
        callback: _Callback | None = None,
    ) -> asyncio.Future[Any] | None:
        """Encode and write; the answer goes to the future returned (None when no answer
        is expected, or when ``callback`` takes it)."""
        transport = self._transport
        if self._error is not None or transport is None:
            raise KafkaConnectionError(f"{self} is not open") from self._error
        api_key = request.API_KEY
        corr = self._next_id
        self._next_id = (corr + 1) & 0x7FFFFFFF
        buf = encode_request(request, version, corr, self.config.client_id)
        loop = asyncio.get_running_loop()
        now = self._last_used = loop.time()
        future: asyncio.Future[Any] | None = None
        if response_cls is not None:
            waiter: asyncio.Future[Any] | _Callback
            if callback is None:
                waiter = future = loop.create_future()
            else:
                waiter = callback
            # The caller's own deadline may be near when its request is finally written
            # (it queued): it is told at its deadline, but the connection is declared
            # dead only when the broker has had a whole request timeout to answer.
            request_timeout = self.config.request_timeout_ms / 1000
            kill_at = now + max(timeout, request_timeout)
            if deadline < kill_at - 0.001:
                tell_at: float | None = deadline
                waited = request_timeout
            else:
                tell_at, waited = None, kill_at - now
            pending = _Pending(
                waiter, response_cls, api_key, version, now, tell_at, kill_at, waited
            )
            self._in_flight[corr] = pending
            self._watchdog.arm_by(pending.due())
        transport.write(buf)
        if self._metrics is not None:
            self._metrics.sent(len(buf), now)
        return future

    def _on_frame(self, frame: bytes | bytearray) -> None:
        if self._error is not None:
            return
        if len(frame) < 4:
            self._kill(KafkaProtocolError(f"{self} sent a {len(frame)}-byte frame"))
            return
        (corr,) = _INT32.unpack_from(frame, 0)
        oldest = next(iter(self._in_flight), None)
        if corr != oldest:
            self._kill(
                KafkaProtocolError(
                    f"{self} answered correlation id {corr} but {oldest} was next in line"
                )
            )
            return
        pending = self._in_flight[corr]
        try:
            response = self._decode(pending, frame)
        except KafkaError as exc:
            self._kill(exc)  # fails this request too, as a retriable connection error
            return
        except Exception as exc:  # a codec bug must not crash the event loop
            self._kill(KafkaProtocolError(f"cannot decode {api_name(pending.api_key)}: {exc!r}"))
            return
        del self._in_flight[corr]
        if self._metrics is not None:
            now = asyncio.get_running_loop().time()
            self._metrics.received(len(frame) + 4, now - pending.sent_at, now)
        throttle_from = pending.response_cls.CLIENT_THROTTLE_FROM
        if throttle_from is not None and pending.version >= throttle_from:
            self._note_throttle(response)
        if not pending.future.done():
            pending.future.set_result(response)

    def _note_throttle(self, response: Response) -> None:
        throttle_ms: int = getattr(response, "throttle_time_ms", 0)
        if throttle_ms > 0:
            # A broker's throttle never exceeds its quota window; a bigger one is
            # garbage (one flipped bit), so hold at most one request timeout.
            throttle_ms = min(throttle_ms, self.config.request_timeout_ms)
            until = asyncio.get_running_loop().time() + throttle_ms / 1000
            self._throttled_until = max(self._throttled_until, until)
            log.debug("%s: throttled by the broker for %d ms", self, throttle_ms)

    @property
    def throttled_for(self) -> float:
        """Seconds until this connection may send again after a quota violation (KIP-219)."""
        return max(0.0, self._throttled_until - asyncio.get_running_loop().time())

    def _decode(self, pending: _Pending, frame: bytes | bytearray) -> Response:
        view = memoryview(frame)
        header_version = response_header_version(pending.api_key, pending.version)
        _, offset = decode_response_header(view, header_version)
        body = view[offset:]
        try:
            return pending.response_cls.decode(body, pending.version)
        except KafkaProtocolError:
            if pending.api_key != ApiVersionsRequest.API_KEY or pending.version == 0:
                raise
            # A broker that does not know our ApiVersions version answers in v0 form.
            return pending.response_cls.decode(body, 0)

    def _watch(self) -> None:
        """Tell each caller whose own timeout ran out (its answer is still awaited, and
        dropped, until the broker's request timeout has passed); kill the connection
        when a request has had its whole request timeout without an answer."""
        # a timer runs when its time is within the clock's resolution of now
        now = asyncio.get_running_loop().time() + 1e-6
        soonest: float | None = None
        for corr, pending in list(self._in_flight.items()):
            if pending.kill_at <= now:
                self._timed_out(corr, pending)
                return
            if pending.tell_at is not None and pending.tell_at <= now:
                pending.tell_at = None
                if not pending.future.done():
                    pending.future.set_exception(
                        KafkaTimeoutError(
                            f"{api_name(pending.api_key)} v{pending.version} to {self} got "
                            "no response before the caller's timeout"
                        )
                    )
            due = pending.due()
            if soonest is None or due < soonest:
                soonest = due
        if soonest is not None:
            self._watchdog.arm_by(soonest)

    def _timed_out(self, corr: int, pending: _Pending) -> None:
        del self._in_flight[corr]
        error = KafkaTimeoutError(
            f"{api_name(pending.api_key)} v{pending.version} to {self} got no response "
            f"within {pending.waited * 1000:.0f} ms (request_timeout_ms)"
        )
        if not pending.future.done():
            pending.future.set_exception(error)
        self._kill(error)

    def _kill(self, cause: BaseException) -> None:
        """Close the socket and fail everything in flight; idempotent."""
        if self._error is not None:
            return
        error = (
            cause
            if isinstance(cause, KafkaConnectionError)
            else KafkaConnectionError(f"{self} failed: {cause}")
        )
        if error is not cause:
            error.__cause__ = cause
        self._error = error
        if self._transport is not None:
            self._transport.abort()
        if self._counted_open and self._metrics is not None:
            self._counted_open = False
            self._metrics.closed()
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        self._watchdog.cancel()
        pending, self._in_flight = self._in_flight, {}
        for item in pending.values():
            if not item.future.done():
                item.future.set_exception(error)
        self._writable.set()  # wake writers so they see the error
        listeners, self._listeners = self._listeners, []
        for listener in listeners:
            listener(self, error)

    # -- idle close --------------------------------------------------------------

    def _arm_idle_timer(self) -> None:
        idle = self.config.connections_max_idle_ms / 1000
        self._idle_timer = asyncio.get_running_loop().call_at(
            self._last_used + idle, self._check_idle
        )

    def _check_idle(self) -> None:
        if self._error is not None:
            return
        idle = self.config.connections_max_idle_ms / 1000
        if not self._in_flight and asyncio.get_running_loop().time() - self._last_used >= idle:
            log.debug("closing %s: idle for %.0f s", self, idle)
            self._kill(KafkaConnectionError(f"{self} was closed after being idle"))
        else:
            self._arm_idle_timer()

    # -- handshake ---------------------------------------------------------------

    async def _negotiate_versions(self) -> None:
        key = ApiVersionsRequest.API_KEY
        version = ApiVersionsRequest.MAX_STABLE_VERSION
        for _ in range(2):
            self.api_versions = {key: (0, version)}
            request = ApiVersionsRequest(
                client_software_name=_SOFTWARE_NAME,
                client_software_version=_SOFTWARE_VERSION,
            )
            response = await self._roundtrip(request, version)
            ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
            if response.error_code == 0:
                self.api_versions = ranges
                if response.finalized_features_epoch >= 0:
                    self.finalized_features = {
                        f.name: f.max_version_level for f in response.finalized_features
                    }
                return
            if response.error_code != UnsupportedVersionError.errno or key not in ranges:
                raise for_code(response.error_code)(f"ApiVersions to {self.host}:{self.port}")
            # UNSUPPORTED_VERSION: the broker listed what it supports; retry with that.
            version = min(version, ranges[key][1])
        raise UnsupportedVersionError(f"{self.host}:{self.port} rejected every ApiVersions version")

    async def _authenticate(self) -> None:
        security = self.config.security
        # an OAUTHBEARER token provider is user code that may hang (an identity
        # provider that never answers): bounded like a request, and named
        limit_ms = self.config.request_timeout_ms
        try:
            async with asyncio.timeout(limit_ms / 1000) as limit:
                mechanism = await security.new_mechanism(self.host)
        except TimeoutError:
            if not limit.expired():
                raise
            waited_for = (
                "the Kerberos KDC did not answer"
                if security.sasl_mechanism == "GSSAPI"
                else "sasl_oauth_token_provider did not return a token"
            )
            raise KafkaTimeoutError(
                f"{security.sasl_mechanism} for {self.host}:{self.port}: "
                f"{waited_for} within {limit_ms} ms (request_timeout_ms)"
            ) from None
        # the SASL codecs load with the first SASL connection, not with every client
        from aiokproto.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
        from aiokproto.protocol.messages.sasl_handshake import SaslHandshakeRequest

        handshake = await self._roundtrip(SaslHandshakeRequest(mechanism=mechanism.name))
        if handshake.error_code:
            raise for_code(handshake.error_code)(
                f"{mechanism.name} on {self.host}:{self.port}; the broker enables "
                f"{', '.join(handshake.mechanisms) or 'none'}"
            )
        message: bytes | None = mechanism.first_message()
        lifetime_ms = 0
        while message is not None:
            response = await self._roundtrip(SaslAuthenticateRequest(auth_bytes=message))
            if response.error_code:
                raise for_code(response.error_code)(
                    f"{mechanism.name} authentication to {self.host}:{self.port} failed: "
                    f"{response.error_message or 'no reason given'}"
                    + (f"; {hint}" if (hint := getattr(mechanism, "hint", "")) else "")
                )
            lifetime_ms = getattr(response, "session_lifetime_ms", 0)
            message = mechanism.respond(bytes(response.auth_bytes))
        if lifetime_ms > 0:
            # KIP-368: re-authenticate before the broker's session expires, at a
            # random 85-95% of its lifetime so many connections do not align.
            now = asyncio.get_running_loop().time()
            self._reauth_at = now + lifetime_ms / 1000 * random.uniform(0.85, 0.95)
        else:
            self._reauth_at = None

    async def _reauthenticate(self) -> None:
        """Re-run SASL; the caller holds the gate, so nothing is written meanwhile."""
        self._reauth_at = None
        try:
            await self._authenticate()
        except KafkaError as exc:
            self._kill(exc)
            raise
        except asyncio.CancelledError:
            # cancelled mid-exchange: the session state is unknown; start over
            self._kill(KafkaConnectionError(f"{self}: re-authentication was interrupted"))
            raise
