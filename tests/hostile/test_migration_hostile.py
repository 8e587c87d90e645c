"""Hostile review of the aiokafka-compatibility layer, as a user migrating from aiokafka.

Each test asserts the behaviour the README ("Migrating from aiokafka") and the code's
own docstrings promise, or what aiokafka code needs after the mechanical rename. A test
that fails shows a defect; its docstring says what happens today and why.
"""

from __future__ import annotations

import asyncio
import copy
import gc
import pickle
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from aiokproto import Consumer, Producer, TopicPartition
from aiokproto.consumer.errors import (
    OffsetOutOfRangeConsumerError,
)
from aiokproto.errors import (
    IllegalStateError,
    KafkaAuthenticationError,
    KafkaConfigError,
    KafkaError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
)
from aiokproto.helpers import create_ssl_context
from tests.consumer.conftest import create_topic

B = "localhost:1"  # never contacted: construction-only tests


# ---------------------------------------------------------------------------------------
# options (split_options)
# ---------------------------------------------------------------------------------------


def test_held_max_batch_size_with_batch_size_and_none_values() -> None:
    with pytest.raises(KafkaConfigError, match="max_batch_size"):
        Producer(bootstrap_servers=B, max_batch_size=100, batch_size=200)
    with pytest.raises(KafkaConfigError, match="batch_size"):
        Producer(bootstrap_servers=B, max_batch_size=None)
    for name in ("acks", "linger_ms", "request_timeout_ms", "metadata_max_age_ms"):
        with pytest.raises(KafkaConfigError, match=name):
            Producer(bootstrap_servers=B, **{name: None})
    # None means "the default" where the README says so
    Producer(bootstrap_servers=B, client_id=None, compression_type=None)
    Consumer(bootstrap_servers=B, max_poll_records=None, connections_max_idle_ms=None)
    with pytest.raises(KafkaConfigError, match="did you mean max_batch_size"):
        Producer(bootstrap_servers=B, max_batch_sise=5)


def test_held_api_version_is_ignored_with_a_warning() -> None:
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        Producer(bootstrap_servers=B, api_version="0.10.2")
        Consumer(bootstrap_servers=B, api_version=(0, 10, 2), consumer_timeout_ms=200)


# ---------------------------------------------------------------------------------------
# names: imports and except clauses after the rename
# ---------------------------------------------------------------------------------------


def test_held_offset_out_of_range_error_copies_pickles_and_is_caught() -> None:
    tp = TopicPartition("t", 0)
    e = OffsetOutOfRangeConsumerError({tp: 5})
    for clone in (pickle.loads(pickle.dumps(e)), copy.copy(e), copy.deepcopy(e)):
        assert type(clone) is OffsetOutOfRangeConsumerError
        assert clone.args[0] == {tp: 5} and clone.offsets == {tp: 5}
        assert str(clone) == str(e) and clone.partitions == frozenset({tp})
    for cls in (OffsetOutOfRangeError, NoOffsetForPartitionError, KafkaError):
        with pytest.raises(cls):
            raise e


# ---------------------------------------------------------------------------------------
# create_ssl_context
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"cafile": "/nonexistent/ca.pem"},
        {"cafile": "GARBAGE"},
        {"cadata": "garbage"},
        {"certfile": "GARBAGE"},
        {"certfile": "/nonexistent/c.pem"},
        {"keyfile": "/nonexistent/k.pem"},
        {"crlfile": "GARBAGE"},
        {"cafile": 5},
    ],
)
def test_held_create_ssl_context_bad_files(kwargs: dict[str, Any], tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate")
    kwargs = {k: str(garbage) if v == "GARBAGE" else v for k, v in kwargs.items()}
    with pytest.raises(KafkaConfigError):
        create_ssl_context(**kwargs)


# ---------------------------------------------------------------------------------------
# producer: create_batch / send_batch(batch, topic, partition=)
# ---------------------------------------------------------------------------------------


async def test_held_batch_shapes_and_lifecycle(kafka: Any, topic_name: str) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=2)
    bs = kafka.bootstrap_servers
    async with asyncio.timeout(30):
        async with Producer(bootstrap_servers=bs) as p, Producer(
            bootstrap_servers=bs, batch_size=500_000
        ) as other:
            b = p.create_batch()
            assert b.append(key=None, value=b"a", timestamp=None) is not None
            fut = await p.send_batch(b, topic_name, partition=0)
            assert b.append(key=None, value=b"late", timestamp=None) is None  # closed
            assert (await fut).offset == 0
            for part in ("0", -1, True, 1.0):
                b = p.create_batch()
                b.append(key=None, value=b"v", timestamp=None)
                with pytest.raises(KafkaConfigError):
                    await p.send_batch(b, topic_name, partition=part)
            with pytest.raises(KafkaConfigError):
                await p.send_batch(p.create_batch(), topic_name, partition=0)  # empty
            with pytest.raises(KafkaError):
                await p.send_batch(b, topic_name, partition=7)  # no such partition
            # a batch built by another producer (bigger batch_size) is delivered
            big = other.create_batch()
            while big.append(key=None, value=b"x" * 10_000, timestamp=None) is not None:
                pass
            assert big.record_count() > 10
            await (await p.send_batch(big, topic_name, partition=1))
        b = p.create_batch()  # after stop: sending it says why
        b.append(key=None, value=b"v", timestamp=None)
        with pytest.raises(IllegalStateError):
            await p.send_batch(b, topic_name, partition=0)


async def test_a_sent_batch_sent_again_is_refused(kafka: Any, topic_name: str) -> None:
    """Observed: the second send_batch() of the same builder is accepted and the
    records are written twice (offsets 0 and 1), with idempotence on. The builder is
    closed by the first send but keeps its records. Expected: IllegalStateError (a
    batch that raised or was cancelled may still be retried: nothing was buffered).
    Fix: mark the builder sent in Producer._send_built after the records are buffered
    and refuse a sent one."""
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=1)
    async with asyncio.timeout(20):
        async with Producer(bootstrap_servers=kafka.bootstrap_servers) as p:
            b = p.create_batch()
            b.append(key=None, value=b"once", timestamp=None)
            await (await p.send_batch(b, topic_name, partition=0))
            with pytest.raises(KafkaError):
                await p.send_batch(b, topic_name, partition=0)
            await p.flush()
        async with Consumer(bootstrap_servers=kafka.bootstrap_servers) as c:
            tp = TopicPartition(topic_name, 0)
            assert (await c.end_offsets([tp]))[tp] == 1


@pytest.mark.parametrize("timestamp", [1e20, -5.0], ids=["year-3e12", "negative"])
async def test_a_bad_append_timestamp_fails_at_append_not_other_callers(
    kafka: Any, topic_name: str, timestamp: float
) -> None:
    """Observed: BatchBuilder.append(timestamp=1e20) is accepted (timestamp
    1e23 ms, beyond int64); after send_batch, the partition's whole record batch fails
    to encode, so a record another task sent with send() to that partition fails too
    with KafkaError "cannot build the record batch ... int too large". A negative
    timestamp (-5 s) is accepted as well, while send() refuses anything below -1 ms.
    Expected: append raises KafkaConfigError/ValueError; nobody else's record fails.
    Fix: run producer._check_timestamp on the computed ms in built.BatchBuilder.append
    (require 0 <= ms < 2**63)."""
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=1)
    async with asyncio.timeout(20), Producer(
        bootstrap_servers=kafka.bootstrap_servers, linger_ms=50
    ) as p:
        good = await p.send(topic_name, b"someone else's record", partition=0)
        b = p.create_batch()
        with pytest.raises((KafkaConfigError, ValueError)):
            b.append(key=None, value=b"v", timestamp=timestamp)
            b.append(key=None, value=b"w", timestamp=None)
            await (await p.send_batch(b, topic_name, partition=0))
        assert (await good).offset == 0


# ---------------------------------------------------------------------------------------
# OAUTHBEARER token providers (aiokafka's AbstractTokenProvider)
# ---------------------------------------------------------------------------------------


def _oauth_producer(kafka: Any, provider: Any, **more: Any) -> Producer:
    return Producer(
        bootstrap_servers=kafka.bootstrap_servers,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=provider,
        **more,
    )


class _RaisingProvider:
    async def token(self) -> str:
        raise RuntimeError("identity provider down")


class _HangingProvider:
    async def token(self) -> str:
        await asyncio.sleep(3600)
        return "never"


class _BadExtensionsProvider:
    async def token(self) -> str:
        return "tok"

    def extensions(self) -> dict[str, str]:
        raise RuntimeError("extensions failed")


async def test_a_raising_token_provider_gives_a_typed_error(kafka: Any) -> None:
    """Observed: start() raises the provider's bare RuntimeError (and the same code
    path wraps a bad token or bad extensions() result in KafkaAuthenticationError).
    Expected: KafkaAuthenticationError with the provider's exception as __cause__, as
    for every other authentication failure, so `except KafkaError` code sees it. Fix:
    wrap exceptions from token()/extensions() in security._oauth_mechanism."""
    p = _oauth_producer(kafka, _RaisingProvider(), default_api_timeout_ms=3000)
    async with asyncio.timeout(15):
        try:
            with pytest.raises(KafkaAuthenticationError) as info:
                await p.start()
            assert isinstance(info.value.__cause__, RuntimeError)
        finally:
            await p.stop()


async def test_raising_extensions_leaves_no_unawaited_token_coroutine(kafka: Any) -> None:
    """Observed: `RuntimeWarning: coroutine '..token' was never awaited`:
    _oauth_mechanism calls token() (creating the coroutine), then extensions(), which
    raises before the coroutine is awaited. Fix: await token() before calling
    extensions() (or close the coroutine on error)."""
    p = _oauth_producer(kafka, _BadExtensionsProvider(), default_api_timeout_ms=3000)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        async with asyncio.timeout(15):
            try:
                with pytest.raises(Exception):  # noqa: B017 - which type: the test above
                    await p.start()
            finally:
                await p.stop()
        gc.collect()
    never = [w for w in caught if "never awaited" in str(w.message)]
    assert not never, never[0].message


async def test_a_hanging_token_provider_is_named_in_the_error(kafka: Any) -> None:
    """Observed: start() waits the whole default_api_timeout_ms and raises
    BootstrapError "no bootstrap server answered ...; tried host:port" with no reason
    (no last error, no __cause__): nothing points at the token provider. The token
    wait is not bounded by socket_connection_setup_timeout_ms or request_timeout_ms.
    Expected: the failure names the token provider (bounded by a connection-level
    timeout). Fix: bound new_mechanism() in Connection._authenticate with the setup /
    request timeout and raise KafkaAuthenticationError("sasl_oauth_token_provider
    .token() did not return within ...")."""
    p = _oauth_producer(
        kafka,
        _HangingProvider(),
        default_api_timeout_ms=4000,
        socket_connection_setup_timeout_ms=1000,
        request_timeout_ms=1000,
    )
    began = time.monotonic()
    async with asyncio.timeout(15):
        try:
            with pytest.raises(KafkaError) as info:
                await p.start()
        finally:
            await p.stop()
    text = f"{info.value} {info.value.__cause__}"
    assert "token" in text, f"after {time.monotonic() - began:.1f} s: {text}"
