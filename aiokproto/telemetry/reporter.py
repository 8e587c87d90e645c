"""KIP-714: push the client's metrics to the broker when it subscribes to them.

``TelemetryReporter`` is an actor owning one task. The task asks a broker for the
client's subscription (GetTelemetrySubscriptions), and while the subscription requests
metrics it pushes them (PushTelemetry) every push interval, OTLP-encoded and compressed
as the broker accepts. Both requests go to the same broker until a request fails on the
wire; then the next subscription request goes to another one. What happens on every
answer is ``TelemetryMachine``'s table (``state.py``).

The reporter can never hurt its client: a broker without the telemetry APIs is skipped
silently (asked again after the default interval), and an unexpected error ends the
task with one warning. ``close()`` makes one terminating push if a subscription is in
use, bounded by a short timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self
from uuid import UUID

from aiokproto.cluster.client import ClusterClient
from aiokproto.config import ClientConfig
from aiokproto.errors import KafkaError, UnsupportedVersionError
from aiokproto.metrics.registry import MetricsRegistry
from aiokproto.net.connection import BrokerConnection
from aiokproto.protocol.base import Request
from aiokproto.protocol.messages.get_telemetry_subscriptions import (
    GetTelemetrySubscriptionsRequest,
)
from aiokproto.protocol.messages.push_telemetry import PushTelemetryRequest
from aiokproto.protocol.primitives import ZERO_UUID
from aiokproto.telemetry.state import Input, State, Subscription, TelemetryMachine

if TYPE_CHECKING:
    from aiokproto.telemetry.payload import TelemetryCollector

# the logger name docs/guides/logging.md documents, kept when the module left
# aiokproto/metrics/ (issue 32), so logging configurations keep working
log = logging.getLogger("aiokproto.metrics.telemetry")

#: how long close() may spend on the terminating push
CLOSE_TIMEOUT_S = 2.0
_SCOPE = ("aiokproto", "0.1.0")


class TelemetryReporter:
    """Pushes ``registry``'s metrics for one client (``kind``: producer, consumer,
    share-consumer, admin) over ``client``; does nothing when
    ``config.enable_metrics_push`` is False.

    ``resource`` holds the KIP-714 resource attributes the client knows (e.g.
    ``transactional_id``, ``group_id``, ``group_instance_id``, ``client_rack``).
    """

    def __init__(
        self,
        client: ClusterClient,
        registry: MetricsRegistry,
        kind: str,
        config: ClientConfig,
        *,
        resource: Mapping[str, str | None] | None = None,
        close_timeout_s: float = CLOSE_TIMEOUT_S,
    ) -> None:
        self._client = client
        self._registry = registry
        self.kind = kind
        self._enabled = config.enable_metrics_push
        self._request_timeout_ms = config.request_timeout_ms
        self._resource = tuple((k, str(v)) for k, v in (resource or {}).items() if v is not None)
        self._close_timeout = close_timeout_s
        self.machine = TelemetryMachine(retry_s=config.retry_backoff_max_ms / 1000)
        self._start_ns = time.time_ns()  # the start of every cumulative sum
        self._collector: TelemetryCollector | None = None  # made by the first push
        self._task: asyncio.Task[None] | None = None
        self._closing = asyncio.Event()
        self._node: int | None = None  # the broker in use; None: pick one
        self._failed_node: int | None = None  # avoided by the next pick
        #: what was pushed: (terminating, compression id, bytes) of the last push
        self.last_push: tuple[bool, int, int] | None = None
        self.pushes = 0

    def __repr__(self) -> str:
        return f"<TelemetryReporter {self.kind} {self.machine.state.name}>"

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def client_instance_id(self) -> UUID | None:
        """The id the broker assigned this client (None until a subscription arrived)."""
        sub = self.machine.subscription
        return None if sub is None else sub.client_instance_id

    async def start(self) -> None:
        if self._task is None and self._enabled and not self._closing.is_set():
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"aiokproto-telemetry-{self.kind}"
            )

    async def close(self) -> None:
        """One terminating push if a subscription is in use (at most
        ``close_timeout_s``), then stop. Without one (still asking, or the broker has no
        telemetry), the task is cancelled at once: a connection attempt to a dead broker
        must not delay the client's close."""
        self._closing.set()
        task = self._task
        if task is not None and not task.done():
            if self.machine.state in _NOTHING_TO_PUSH:
                task.cancel()
            else:
                done, _ = await asyncio.wait([task], timeout=self._close_timeout)
                if not done:
                    task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task  # never raises otherwise: _run logs its own failures
        self.machine.state = State.TERMINATED  # whatever was in flight: the actor is done

    # -- the task ----------------------------------------------------------------------

    async def _run(self) -> None:
        machine = self.machine
        try:
            while not machine.terminated:
                if self._closing.is_set() and machine.state not in _CLOSING:
                    machine.feed(Input.CLOSE, _now())
                    continue
                delay = machine.delay(_now())
                if delay > 0:
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(delay):
                            await self._closing.wait()
                    continue
                if machine.state is State.SUBSCRIPTION_NEEDED:
                    await self._subscribe()
                elif machine.state in (State.PUSH_NEEDED, State.TERMINATING_PUSH_NEEDED):
                    await self._push()
                else:  # an in-progress state between requests cannot happen
                    raise AssertionError(f"telemetry in {machine.state.name} between requests")
        except asyncio.CancelledError:
            raise
        except Exception:
            log.warning("%s: metrics push stopped by an unexpected error", self, exc_info=True)
            machine.state = State.TERMINATED

    async def _connection(self) -> BrokerConnection:
        if self._node is None:
            exclude = set() if self._failed_node is None else {self._failed_node}
            self._node = self._client.least_loaded_node(exclude=exclude)
        return await self._client.connection(self._node)

    async def _request(self, build: type[Request], request: Request) -> Any:
        """Send on the broker in use: the response, or the ``Input`` for a failure."""
        try:
            conn = await self._connection()
            keys = conn.api_versions
            if (
                GetTelemetrySubscriptionsRequest.API_KEY not in keys
                or PushTelemetryRequest.API_KEY not in keys
            ):
                log.debug("%s: broker %s has no telemetry APIs", self, conn)
                self._drop_node()
                return Input.UNSUPPORTED
            version = conn.version_for(build)
            self.machine.feed(Input.SEND, _now())
            return await conn.send(request, version, timeout_ms=self._request_timeout_ms)
        except UnsupportedVersionError:
            self._drop_node()
            return Input.UNSUPPORTED
        except KafkaError as exc:  # connection failures and timeouts: try another broker
            log.debug("%s: telemetry request failed: %s", self, exc)
            self._drop_node(failed=True)
            return Input.CONNECTION_ERROR

    def _drop_node(self, *, failed: bool = False) -> None:
        self._failed_node = self._node if failed else None
        self._node = None

    def _failed(self, outcome: Input) -> None:
        if self.machine.state not in (
            State.SUBSCRIPTION_IN_PROGRESS,
            State.PUSH_IN_PROGRESS,
            State.TERMINATING_PUSH_IN_PROGRESS,
        ):
            self.machine.feed(Input.SEND, _now())  # failed before it went out
        self.machine.feed(outcome, _now())

    async def _subscribe(self) -> None:
        machine = self.machine
        sub = machine.subscription
        request = GetTelemetrySubscriptionsRequest(
            client_instance_id=sub.client_instance_id if sub else ZERO_UUID
        )
        response = await self._request(GetTelemetrySubscriptionsRequest, request)
        if isinstance(response, Input):
            self._failed(response)
            return
        code = response.error_code
        if code:
            log.debug("%s: GetTelemetrySubscriptions error %d", self, code)
            machine.error(code, _now())
            return
        instance = response.client_instance_id
        if instance == ZERO_UUID:
            instance = sub.client_instance_id if sub else ZERO_UUID
        if instance == ZERO_UUID:  # a broker bug: Java gives up as well
            log.warning("%s: the broker assigned no client instance id", self)
            machine.feed(Input.FATAL, _now())
            return
        new = Subscription(
            client_instance_id=instance,
            subscription_id=response.subscription_id,
            push_interval_ms=response.push_interval_ms,
            accepted_compression_types=tuple(response.accepted_compression_types),
            telemetry_max_bytes=response.telemetry_max_bytes,
            delta_temporality=response.delta_temporality,
            requested_metrics=tuple(response.requested_metrics),
        )
        if sub is None or sub.client_instance_id != new.client_instance_id:
            log.info("%s: client instance id %s", self, new.client_instance_id)
        machine.subscribed(new, _now())

    async def _push(self) -> None:
        machine = self.machine
        sub = machine.subscription
        assert sub is not None  # PUSH_NEEDED comes only from a subscription
        terminating = machine.state is State.TERMINATING_PUSH_NEEDED
        # imported here: the OTLP encoder is needed only once a broker asks for metrics
        # (most have no client-metrics subscription), not by every client's import
        from aiokproto.telemetry.payload import TelemetryCollector, build_payload

        if self._collector is None:
            self._collector = TelemetryCollector(self._start_ns)
        collected = self._collector.collect(
            self._registry.snapshot(), sub.selector, sub.delta_temporality, time.time_ns()
        )
        codec, data, raw_size = build_payload(
            collected.metrics, self._resource, _SCOPE, sub.accepted_compression_types
        )
        if max(raw_size, len(data)) > sub.telemetry_max_bytes:
            log.warning(
                "%s: %d bytes of metrics exceed the broker's telemetry_max_bytes %d; "
                "not pushed (narrow the client-metrics subscription)",
                self,
                raw_size,
                sub.telemetry_max_bytes,
            )
            machine.feed(Input.SEND, _now())
            machine.feed(Input.BACK_OFF, _now())
            return
        request = PushTelemetryRequest(
            client_instance_id=sub.client_instance_id,
            subscription_id=sub.subscription_id,
            terminating=terminating,
            compression_type=codec,
            metrics=data,
        )
        response = await self._request(PushTelemetryRequest, request)
        if isinstance(response, Input):
            self._failed(response)
            return
        code = response.error_code
        if code:
            log.debug("%s: PushTelemetry error %d", self, code)
            machine.error(code, _now())
            return
        self._collector.commit(collected)
        self.last_push = (terminating, codec, len(data))
        self.pushes += 1
        machine.feed(Input.PUSHED, _now())


_NOTHING_TO_PUSH = frozenset({State.SUBSCRIPTION_NEEDED, State.SUBSCRIPTION_IN_PROGRESS})
_CLOSING = frozenset(
    {State.TERMINATING_PUSH_NEEDED, State.TERMINATING_PUSH_IN_PROGRESS, State.TERMINATED}
)


def _now() -> float:
    return time.monotonic()
