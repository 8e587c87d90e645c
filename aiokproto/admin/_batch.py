"""The retry loop every batch Admin call runs.

A call is a set of keys (topics, partitions, groups...). Each attempt sends the keys
still pending and reports, per key, a result or an error. Keys whose error is
retriable go into the next attempt after a back-off (``retry_backoff_ms`` doubling to
``retry_backoff_max_ms``); the others are final at once. When the call's deadline
passes, keys still pending fail with their last error.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Hashable, Iterable, Mapping
from typing import TypeVar

from aiokproto.admin.batch_error import AdminBatchError
from aiokproto.errors import KafkaError, KafkaTimeoutError, NotControllerError

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

Attempt = Callable[[list[K]], Awaitable[Mapping[K, V | KafkaError]]]


class NoResult(KafkaError):
    """The broker's answer did not mention an item the request asked about."""


def no_result(key: object) -> KafkaError:
    return NoResult(f"the broker's answer has no result for {key!r}")


async def run_batch(
    operation: str,
    keys: Iterable[K],
    attempt: Attempt[K, V],
    *,
    timeout_ms: int,
    backoff_ms: int,
    backoff_max_ms: int,
    final: Collection[type[KafkaError]] = (),
    final_after: int = 1,
    on_stale_metadata: Callable[[], Awaitable[object]] | None = None,
) -> dict[K, V]:
    """Run ``attempt`` until every key has a final outcome; raise ``AdminBatchError``
    (carrying the successes) if any key failed.

    ``final``: error classes never retried here even if marked retriable (an unknown
    topic in a delete is an answer, not a glitch), once a key got one ``final_after``
    times in a row (a broker may answer so for a topic created a moment ago).
    ``on_stale_metadata`` runs before a retry when an error says the client's metadata
    is stale.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_ms / 1000
    delay = backoff_ms / 1000
    pending = list(dict.fromkeys(keys))
    results: dict[K, V] = {}
    errors: dict[K, KafkaError] = {}
    last: dict[K, KafkaError] = {}
    final_seen: dict[K, int] = {}
    while pending:
        remaining = deadline - loop.time()
        outcome: Mapping[K, V | KafkaError]
        try:
            if remaining <= 0:
                raise TimeoutError
            async with asyncio.timeout(remaining):
                outcome = await attempt(pending)
        except KafkaError as exc:
            # before TimeoutError: one request's KafkaTimeoutError is retried, only the
            # call's own deadline ends it
            outcome = dict.fromkeys(pending, exc)
        except TimeoutError:
            for key in pending:
                errors[key] = _timed_out(operation, timeout_ms, last.get(key))
            break
        retry: list[K] = []
        stale = False
        for key in pending:
            value = outcome.get(key, no_result(key))
            is_final = isinstance(value, KafkaError) and isinstance(value, tuple(final))
            if is_final:
                final_seen[key] = final_seen.get(key, 0) + 1
                is_final = final_seen[key] >= final_after
            else:
                final_seen.pop(key, None)
            if not isinstance(value, KafkaError):
                results[key] = value
            elif value.retriable and not is_final:
                retry.append(key)
                last[key] = value
                stale |= value.invalid_metadata or isinstance(value, NotControllerError)
            else:
                errors[key] = value
        pending = retry
        if not pending:
            break
        if loop.time() + delay >= deadline:
            for key in pending:
                errors[key] = _timed_out(operation, timeout_ms, last.get(key))
            break
        await asyncio.sleep(delay)
        delay = min(delay * 2, backoff_max_ms / 1000)
        if stale and on_stale_metadata is not None:
            try:
                await on_stale_metadata()
            except KafkaError:
                pass  # the next attempt reports what is still wrong
    if errors:
        raise AdminBatchError(operation, results, errors)
    return results


def _timed_out(operation: str, timeout_ms: int, last: KafkaError | None) -> KafkaError:
    if last is not None:
        # The retriable error says more than "timed out"; keep its type for callers.
        return last
    return KafkaTimeoutError(f"{operation} did not complete within {timeout_ms} ms")
