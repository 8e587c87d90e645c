"""Coordinator lookup (FindCoordinator) with its own cache and batched look-ups; of its
client it needs only ``CoordinatorHost`` (a Protocol of the few calls it makes).

Lookups asked for in the same event-loop turn go out as one batched request
(FindCoordinator v4+ takes many keys); older brokers get one request per key. Callers
invalidate an entry when a coordinator answers NOT_COORDINATOR or
COORDINATOR_NOT_AVAILABLE, and the next lookup asks again.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Protocol

from aiokproto.cluster.snapshot import BrokerInfo
from aiokproto.errors import KafkaConnectionError, KafkaError, for_code

if TYPE_CHECKING:
    from aiokproto.config import ClientConfig
    from aiokproto.net.connection import BrokerConnection

GROUP = 0
TRANSACTION = 1

_Key = tuple[int, str]


class CoordinatorHost(Protocol):
    """The few calls the cache makes on its ``ClusterClient`` (issue 32: it depends on
    these, not on the client, which owns the cache)."""

    @property
    def config(self) -> ClientConfig: ...

    def least_loaded_node(self) -> int: ...

    async def connection(self, node_id: int) -> BrokerConnection: ...

    def learn_address(self, broker: BrokerInfo) -> None: ...


class CoordinatorCache:
    """Which broker coordinates each group or transactional id."""

    def __init__(self, client: CoordinatorHost) -> None:
        self._client = client
        self._known: dict[_Key, BrokerInfo] = {}
        self._pending: dict[_Key, asyncio.Future[BrokerInfo]] = {}
        self._queued: dict[int, list[str]] = {}

    def cached(self, key_type: int, key: str) -> BrokerInfo | None:
        return self._known.get((key_type, key))

    def invalidate(self, key_type: int, key: str) -> None:
        self._known.pop((key_type, key), None)

    async def find(self, key_type: int, key: str) -> BrokerInfo:
        """The coordinator for ``key`` (a group id or transactional id).

        Retriable answers (the coordinator is still loading, the offsets topic is
        being created) are retried with back-off within ``default_api_timeout_ms``.
        """
        config = self._client.config
        loop = asyncio.get_running_loop()
        deadline = loop.time() + config.default_api_timeout_ms / 1000
        delay = config.retry_backoff_ms / 1000
        while True:
            try:
                return await self._find_once(key_type, key)
            except KafkaError as exc:
                if not exc.retriable or loop.time() + delay > deadline:
                    raise
            await asyncio.sleep(delay)
            delay = min(delay * 2, config.retry_backoff_max_ms / 1000)

    async def _find_once(self, key_type: int, key: str) -> BrokerInfo:
        k = (key_type, key)
        known = self._known.get(k)
        if known is not None:
            return known
        pending = self._pending.get(k)
        if pending is None:
            pending = asyncio.get_running_loop().create_future()
            self._pending[k] = pending
            queue = self._queued.setdefault(key_type, [])
            queue.append(key)
            if len(queue) == 1:
                await self._lead_batch(key_type)
        return await asyncio.shield(pending)

    async def _lead_batch(self, key_type: int) -> None:
        keys: list[str] = []
        try:
            await asyncio.sleep(0)  # let lookups from this turn join the batch
            keys = self._queued.pop(key_type, [])
            found = await self._lookup(key_type, keys)
            for key, result in found.items():
                self._settle((key_type, key), result)
        except BaseException as exc:
            keys = keys or self._queued.pop(key_type, [])
            error = (
                exc
                if isinstance(exc, KafkaError)
                else KafkaConnectionError(f"coordinator lookup interrupted: {exc!r}")
            )
            for key in keys:
                self._settle((key_type, key), error)
            if not isinstance(exc, Exception):
                raise

    def _settle(self, k: _Key, result: BrokerInfo | KafkaError) -> None:
        fut = self._pending.pop(k, None)
        if isinstance(result, BrokerInfo):
            self._known[k] = result
        if fut is None or fut.done():
            return
        if isinstance(result, BrokerInfo):
            fut.set_result(result)
        else:
            fut.set_exception(result)
            fut.exception()  # the leader may be the only waiter and already gone

    async def _lookup(self, key_type: int, keys: list[str]) -> dict[str, BrokerInfo | KafkaError]:
        # the codec loads with the first lookup (a group or a transaction), not with
        # every client: a plain producer never asks
        from aiokproto.protocol.messages.find_coordinator import FindCoordinatorRequest

        client = self._client
        node = client.least_loaded_node()
        conn = await client.connection(node)
        version = conn.version_for(FindCoordinatorRequest)
        results: dict[str, BrokerInfo | KafkaError] = {}
        if version >= 4:
            response = await conn.send(
                FindCoordinatorRequest(key_type=key_type, coordinator_keys=keys), version
            )
            for c in response.coordinators:
                results[c.key] = self._entry(c, c.key)
        else:
            for key in keys:
                request = FindCoordinatorRequest(key=key, key_type=key_type)
                response = await conn.send(request, version)
                results[key] = self._entry(response, key)
        for key in keys:
            results.setdefault(key, KafkaConnectionError(f"no coordinator returned for {key!r}"))
        return results

    def _entry(self, answer: Any, key: str) -> BrokerInfo | KafkaError:
        if answer.error_code:
            return for_code(answer.error_code)(
                f"FindCoordinator for {key!r}: {answer.error_message or 'no detail'}"
            )
        info = BrokerInfo(answer.node_id, answer.host, answer.port)
        self._client.learn_address(info)
        return info
