"""The cluster client (``ClusterClient``): connections by (node, purpose), routing,
metadata, coordinators; ``start()`` bounds the bootstrap and names a SASL listener that
a client without SASL reached.

Producer, Consumer and Admin each own one. Connections are opened on first use and
shared by everyone wanting the same node and purpose; concurrent opens coalesce. A
failed connect backs the node off exponentially (with jitter) so a dead broker is not
hammered. Every connection that dies asks the metadata actor for a refresh, since a
dead broker usually means leadership moved.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from typing import Any

from aiokproto import accel
from aiokproto.cluster.backoff import Backoff
from aiokproto.cluster.coordinators import CoordinatorCache
from aiokproto.cluster.metadata import MetadataCache
from aiokproto.cluster.snapshot import BrokerInfo
from aiokproto.config import ClientConfig
from aiokproto.errors import (
    BootstrapError,
    KafkaConfigError,
    KafkaConnectionError,
    KafkaError,
    UnsupportedSaslMechanismError,
)
from aiokproto.metrics.connections import ConnectionMetrics
from aiokproto.net.connection import BrokerConnection, Purpose
from aiokproto.protocol.base import Request

log = logging.getLogger(__name__)

_Key = tuple[int, Purpose]

#: how long start() waits for a bootstrap server to say whether it is a SASL listener
_SASL_PROBE_S = 2.0
#: how long start() gives one connection attempt before it also tries the next server
_STAGGER_S = 0.5

#: what waiters of a connect get when it was cancelled (e.g. by a start() deadline)
CONNECT_CANCELLED = "connect cancelled"


def _reason(error: KafkaError, host: str, port: int) -> str:
    """A server's error without the address the message repeats."""
    return str(error).removeprefix(f"cannot connect to {host}:{port}: ")


class ClusterClient:
    """Connections and metadata for one Kafka cluster; an async context manager."""

    def __init__(self, config: ClientConfig, metrics: ConnectionMetrics | None = None) -> None:
        accel.warn_if_pure_python()  # every client makes one: the first says it, once
        self._metrics = metrics
        self.config = config
        self._conn_config = config.connection
        self.metadata = MetadataCache(
            self._send_metadata,
            max_age_ms=config.metadata_max_age_ms,
            retry_backoff_ms=config.retry_backoff_ms,
            retry_backoff_max_ms=config.retry_backoff_max_ms,
            allow_auto_create_topics=config.allow_auto_create_topics,
        )
        self.coordinators = CoordinatorCache(self)
        self.metadata.add_refresh_listener(self._close_idle_bootstrap)
        self._conns: dict[_Key, BrokerConnection] = {}
        self._opening: dict[_Key, asyncio.Future[BrokerConnection]] = {}
        self._backoff: dict[int, Backoff] = {}
        self._closed = False
        # Bootstrap servers get negative pseudo node ids until metadata names the brokers.
        self._bootstrap = {-(i + 1): addr for i, addr in enumerate(config.bootstrap_servers)}
        # Addresses learned outside Metadata (FindCoordinator answers).
        self._learned: dict[int, tuple[str, int]] = {}
        # some broker address answered (TCP) at least once: the cluster exists
        self._reached = False
        self._on_reached: Callable[[], None] | None = None  # start() extends its deadline

    async def __aenter__(self) -> ClusterClient:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Start the metadata actor and learn the cluster.

        Until a refresh succeeds, each round first opens a connection the way the
        refresh would (least loaded node first, each node once), so that every server's
        own error is known. While no server could be reached at all (refused, a name
        that does not resolve, no answer) the wait is bounded by
        ``bootstrap_timeout_ms``; once one answered, by ``default_api_timeout_ms``. When
        time runs out, ``BootstrapError`` (a connection error and a timeout) names each
        bootstrap server with its last error. An error that retrying cannot cure (TLS
        or SASL refused, the wrong ``security_protocol``) is raised at once; so is a
        client without SASL on a SASL listener, which lets the connection open and then
        closes it at the first request (``_sasl_listener``).
        """
        await self.metadata.start()
        loop = asyncio.get_running_loop()
        began = loop.time()
        config = self.config
        api_timeout = config.default_api_timeout_ms / 1000
        reach_timeout = min(config.bootstrap_timeout_ms / 1000, api_timeout)
        failed: dict[tuple[str, int], KafkaError] = {}  # last error per server
        last: KafkaError | None = None
        last_connection_error: KafkaConnectionError | None = None  # the cause if time runs out
        opened: tuple[str, int] | None = None  # the server the refresh went to
        probed = config.connection.security.uses_sasl  # a SASL client needs no probe

        async def connect_somewhere() -> bool:
            # Each node once, least loaded first; an attempt still open after
            # _STAGGER_S does not hold up the next one (a dropped SYN or a port that
            # accepts and never answers would use up the bootstrap time before a live
            # server was tried): attempts overlap, the first connection opened wins,
            # the rest are cancelled and awaited.
            nonlocal last_connection_error, opened
            tried: set[int] = set()
            attempts: dict[asyncio.Task[BrokerConnection], tuple[str, int]] = {}
            try:
                while True:
                    node = self.least_loaded_node(exclude=tried)
                    if node not in tried:
                        tried.add(node)
                        attempt = asyncio.create_task(
                            self.connection(node), name=f"aiokproto-bootstrap-connect-{node}"
                        )
                        attempts[attempt] = self.address_of(node)
                    elif not attempts:
                        return False
                    more = self.least_loaded_node(exclude=tried) not in tried
                    done, _ = await asyncio.wait(
                        attempts,
                        timeout=_STAGGER_S if more else None,
                        return_when=asyncio.FIRST_COMPLETED,
                    )
                    for attempt in done:
                        address = attempts.pop(attempt)
                        exc = attempt.exception()
                        if exc is None:
                            opened = address
                            return True
                        if not isinstance(exc, KafkaError) or not exc.retriable:
                            raise exc
                        failed[address] = exc
                        if isinstance(exc, KafkaConnectionError):
                            last_connection_error = exc
            finally:
                for attempt in attempts:
                    attempt.cancel()
                if attempts:
                    await asyncio.wait(attempts)
                    for attempt in attempts:  # retrieved: nobody else awaits them
                        if not attempt.cancelled():
                            attempt.exception()

        def extend() -> None:
            # a server answered (TCP): the cluster exists, allow it the full time
            if not deadline.expired():
                deadline.reschedule(began + api_timeout)

        try:
            async with asyncio.timeout(reach_timeout) as deadline:
                self._on_reached = extend
                while True:
                    if self._closed:
                        raise KafkaConnectionError("the client was closed while starting")
                    try:
                        # the refresh goes to the connection just opened (least loaded)
                        if await connect_somewhere():
                            await self.metadata.refresh()
                            return
                    except KafkaError as exc:
                        if not exc.retriable or self._closed:
                            raise
                        last = exc
                        if isinstance(exc, KafkaConnectionError):
                            last_connection_error = exc
                            if not probed and opened is not None:
                                probed = True  # once per start(): it costs a connection
                                mismatch = await self._sasl_listener(*opened)
                                if mismatch is not None:
                                    raise mismatch from None
                    await asyncio.sleep(config.retry_backoff_ms / 1000)
        except TimeoutError:
            await self.close()
            last = last or self.metadata.last_error
            servers = list(config.bootstrap_servers)
            servers += [a for a in failed if a not in servers]  # brokers metadata named
            tried = ", ".join(
                f"{h}:{p} ({_reason(failed[(h, p)], h, p)})" if (h, p) in failed else f"{h}:{p}"
                for h, p in servers
            )
            if not self._reached and reach_timeout < api_timeout:
                within = (
                    f"{reach_timeout:g} s (bootstrap_timeout_ms; raise it to wait longer "
                    "for brokers that are still starting)"
                )
            else:
                within = f"{api_timeout:g} s (default_api_timeout_ms)"
            text = f"no bootstrap server answered within {within}; tried {tried}"
            # a connect our own deadline cancelled is no error of the servers': not named
            said = {str(e) for e in failed.values()} | {CONNECT_CANCELLED}
            if last is not None and str(last) not in said:
                text += f"; last error: {last}"
            trouble = config.connection.security.login_trouble()
            if trouble is not None:  # its retries outlast a short deadline
                text += f"; the OAuth token fetch was still retrying: {trouble}"
            raise BootstrapError(text) from last_connection_error or last
        except BaseException:
            await self.close()
            raise
        finally:
            self._on_reached = None

    async def _sasl_listener(self, host: str, port: int) -> KafkaConfigError | None:
        """The error for a client without SASL on a SASL listener, or None if
        ``host:port`` is not one. Such a listener answers ApiVersions, then closes the
        connection at the first other request: a plain "closed by the peer", retried
        until default_api_timeout_ms ran out. Asked on a fresh connection, it answers
        SaslHandshake with its mechanisms (a listener without SASL: ILLEGAL_SASL_STATE)."""
        # imported here: only a bootstrap that failed asks, not every client's import
        from aiokproto.protocol.messages.sasl_handshake import SaslHandshakeRequest

        probe = BrokerConnection(host, port, self._conn_config, node_id=-1, purpose="default")
        try:
            async with asyncio.timeout(_SASL_PROBE_S):
                await probe.open()
                answer = await probe.send(SaslHandshakeRequest(mechanism="PLAIN"))
        except (KafkaError, TimeoutError):
            return None
        finally:
            probe.close()
        if answer.error_code not in (0, UnsupportedSaslMechanismError.errno):
            return None
        protocol = self._conn_config.security.security_protocol
        sasl = "SASL_SSL" if protocol == "SSL" else "SASL_PLAINTEXT"
        return KafkaConfigError(
            f"{host}:{port} is a SASL listener (mechanisms: "
            f"{', '.join(answer.mechanisms) or 'none named'}): it closed the connection at "
            f'the first request, which was not authenticated; security_protocol is "{protocol}":'
            f' set security_protocol="{sasl}", sasl_mechanism and its credentials '
            "(sasl_plain_username and sasl_plain_password for PLAIN and SCRAM)"
        )

    @property
    def closed(self) -> bool:
        return self._closed

    async def close(self) -> None:
        self._closed = True
        await self.metadata.close()
        for conn in list(self._conns.values()):
            conn.close()
        self._conns.clear()
        for fut in self._opening.values():
            if not fut.done():
                fut.cancel()

    # -- addresses -------------------------------------------------------------

    def address_of(self, node_id: int) -> tuple[str, int]:
        broker = self.metadata.snapshot.brokers.get(node_id)
        if broker is not None:
            return broker.host, broker.port
        if node_id in self._learned:
            return self._learned[node_id]
        if node_id in self._bootstrap:
            return self._bootstrap[node_id]
        raise KafkaConnectionError(f"node {node_id} is not in the cluster metadata")

    def learn_address(self, broker: BrokerInfo) -> None:
        self._learned[broker.node_id] = (broker.host, broker.port)

    def known_nodes(self) -> list[int]:
        brokers = list(self.metadata.snapshot.brokers)
        return brokers or list(self._bootstrap)

    # -- connections -----------------------------------------------------------

    def _close_idle_bootstrap(self) -> None:
        """Once metadata names the brokers, an idle connection to a bootstrap server (a
        pseudo node id) is closed: requests go to brokers by node id, and it stayed open
        beside the same broker's own connection for connections_max_idle_ms (one socket
        more per client). Runs after every refresh, so one opened again for the fallback
        (every broker unreachable) goes too."""
        if not self.metadata.snapshot.brokers:
            return
        for key, conn in list(self._conns.items()):
            if key[0] < 0 and not conn.in_flight:
                del self._conns[key]
                conn.close()

    def open_connection(
        self, node_id: int, purpose: Purpose = "default"
    ) -> BrokerConnection | None:
        """The connection ``connection()`` would return without suspending, or None."""
        conn = self._conns.get((node_id, purpose))
        return conn if conn is not None and conn.connected else None

    async def connection(self, node_id: int, purpose: Purpose = "default") -> BrokerConnection:
        """An open connection to ``node_id`` for ``purpose`` (opened if needed)."""
        key = (node_id, purpose)
        conn = self._conns.get(key)
        if conn is not None and conn.connected:
            return conn
        opening = self._opening.get(key)
        if opening is not None:
            return await asyncio.shield(opening)
        if self._closed:
            raise KafkaConnectionError("the client is closed")
        fut: asyncio.Future[BrokerConnection] = asyncio.get_running_loop().create_future()
        self._opening[key] = fut
        try:
            conn = await self._open(node_id, purpose)
        except BaseException as exc:
            if not fut.done():
                fut.set_exception(
                    exc if isinstance(exc, Exception) else KafkaConnectionError(CONNECT_CANCELLED)
                )
                fut.exception()  # retrieved: waiters may not exist
            raise
        finally:
            self._opening.pop(key, None)
        if self._closed:  # close() ran meanwhile: the connection is not kept
            conn.close()
            error = KafkaConnectionError("the client was closed")
            if not fut.done():
                fut.set_exception(error)
                fut.exception()  # retrieved: waiters may not exist
            raise error
        fut.set_result(conn)
        return conn

    async def _open(self, node_id: int, purpose: Purpose) -> BrokerConnection:
        loop = asyncio.get_running_loop()
        backoff = self._backoff.setdefault(
            node_id,
            Backoff(self.config.reconnect_backoff_ms, self.config.reconnect_backoff_max_ms),
        )
        wait = backoff.not_before - loop.time()
        if wait > 0:
            await asyncio.sleep(wait)
        host, port = self.address_of(node_id)
        conn = BrokerConnection(
            host,
            port,
            self._conn_config,
            node_id=node_id,
            purpose=purpose,
            metrics=None if self._metrics is None else self._metrics.node(node_id),
        )
        conn.on_reached = self._note_reached
        try:
            await conn.open()
        except KafkaError as exc:
            backoff.failed(loop.time())
            if exc.retriable:
                self.metadata.request_refresh()
            raise
        backoff.succeeded()
        self._conns[(node_id, purpose)] = conn
        conn.add_close_listener(self._on_close)
        return conn

    def _note_reached(self) -> None:
        self._reached = True
        if self._on_reached is not None:
            self._on_reached()

    def _on_close(self, conn: BrokerConnection, error: BaseException | None) -> None:
        key = (conn.node_id, conn.purpose)
        if self._conns.get(key) is conn:
            del self._conns[key]
        if not self._closed and not conn.closed_by_client:
            self.metadata.request_refresh()

    def least_loaded_node(self, exclude: set[int] | frozenset[int] = frozenset()) -> int:
        """A node for cluster-wide requests: connected and least busy first.

        Nodes in ``exclude`` are skipped unless nothing else is known.
        """
        nodes = [n for n in self.known_nodes() if n not in exclude] or self.known_nodes()
        loop_time = asyncio.get_running_loop().time()

        def load(node: int) -> tuple[int, int, float]:
            conn = self._conns.get((node, "default"))
            if conn is not None and conn.connected:
                return (0, conn.in_flight, random.random())
            backoff = self._backoff.get(node)
            blocked = backoff is not None and backoff.not_before > loop_time
            return (2 if blocked else 1, 0, random.random())

        return min(nodes, key=load)

    # -- sending ---------------------------------------------------------------

    async def send(
        self,
        node_id: int,
        request: Request,
        *,
        purpose: Purpose = "default",
        version: int | None = None,
        expect_response: bool = True,
        timeout_ms: int | None = None,
    ) -> Any:
        conn = await self.connection(node_id, purpose)
        return await conn.send(
            request, version, expect_response=expect_response, timeout_ms=timeout_ms
        )

    async def send_any(self, request: Request, *, version: int | None = None) -> Any:
        """Send to the least loaded node, trying each other node once if connections fail."""
        tried: set[int] = set()
        while True:
            node = self.least_loaded_node(exclude=tried)
            tried.add(node)
            try:
                return await self.send(node, request, version=version)
            except KafkaConnectionError:
                if tried >= set(self.known_nodes()):
                    raise

    async def _send_metadata(self, request: Request) -> Any:
        try:
            return await self.send_any(request)
        except KafkaConnectionError:
            # Every known broker failed: fall back to the bootstrap list (the
            # cluster may have moved entirely since the last metadata).
            if self.metadata.snapshot.brokers:
                for node in self._bootstrap:
                    try:
                        return await self.send(node, request)
                    except KafkaConnectionError:
                        continue
            raise
