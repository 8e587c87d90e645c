"""The transactional producer when EndTxn is lost on the way (request or answer), and
when callers race or cancel commit: the outcome is always known, never a silent
"maybe", and each committed record is visible exactly once."""

from __future__ import annotations

import asyncio
import uuid
import zlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from aiokproto import Consumer, Producer
from aiokproto.errors import KafkaTimeoutError
from aiokproto.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from aiokproto.protocol.messages.end_txn import EndTxnRequest
from aiokproto.structs import TopicPartition
from tests.faults.proxy import FaultProxy
from tests.producer.helpers import create_topic

FAST: dict[str, Any] = {
    "default_api_timeout_ms": 10_000,
    "request_timeout_ms": 1_500,
    "retry_backoff_ms": 50,
    "retry_backoff_max_ms": 300,
    "max_block_ms": 4_000,
    "linger_ms": 2,
}


@pytest.fixture
async def proxy(kafka: Any, request: pytest.FixtureRequest) -> AsyncIterator[FaultProxy]:
    async with FaultProxy(
        kafka.bootstrap_servers, seed=zlib.crc32(request.node.nodeid.encode())
    ) as p:
        yield p
    p.check()


async def committed_values(kafka: Any, topic: str) -> list[bytes]:
    async with Consumer(
        bootstrap_servers=kafka.bootstrap_servers, isolation_level="read_committed"
    ) as c:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        await c.seek_to_beginning(tp)
        (end,) = (await c.end_offsets([tp])).values()
        got: list[bytes] = []
        async with asyncio.timeout(20):
            while await c.position(tp) < end:
                for recs in (await c.getmany(timeout_ms=500)).values():
                    got.extend(r.value for r in recs)
        return got


@pytest.mark.parametrize("lost", ["request", "response"])
async def test_a_lost_end_txn_times_out_and_a_second_commit_finishes_it(
    proxy: FaultProxy, kafka: Any, topic_name: str, lost: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    txn_id = f"lost-{uuid.uuid4().hex[:8]}"
    async with Producer(
        bootstrap_servers=proxy.bootstrap_servers, transactional_id=txn_id, **FAST
    ) as p:
        async with p.transaction():
            await p.send(topic_name, b"before")
        await p.begin_transaction()
        await p.send_and_wait(topic_name, b"in-doubt")
        for listener in proxy.listeners:
            listener.blackhole(lost, apis=[EndTxnRequest.API_KEY])  # type: ignore[arg-type]
        with pytest.raises(KafkaTimeoutError, match="EndTxn"):
            await asyncio.wait_for(p.commit_transaction(), 15)
        # not committed as far as the caller knows, not aborted: still committing
        with pytest.raises(Exception, match="commit"):
            await p.send(topic_name, b"refused")
        for listener in proxy.listeners:
            await listener.heal()
        await asyncio.wait_for(p.commit_transaction(), 15)  # the same EndTxn, again
        async with p.transaction():
            await p.send(topic_name, b"after")
    assert await committed_values(kafka, topic_name) == [b"before", b"in-doubt", b"after"]


async def test_concurrent_and_cancelled_commits_end_the_transaction_once(
    proxy: FaultProxy, kafka: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    async with Producer(
        bootstrap_servers=proxy.bootstrap_servers,
        transactional_id=f"race-{uuid.uuid4().hex[:8]}",
        **FAST,
    ) as p:
        # two commits at once: one EndTxn, both return
        await p.begin_transaction()
        await p.send(topic_name, b"a")
        await asyncio.wait_for(asyncio.gather(p.commit_transaction(), p.commit_transaction()), 15)
        # a commit cancelled while its EndTxn is slow: a second call finishes it
        await p.begin_transaction()
        await p.send_and_wait(topic_name, b"b")
        for listener in proxy.listeners:
            listener.latency(800, which="response", apis=[EndTxnRequest.API_KEY])
        first = asyncio.ensure_future(p.commit_transaction())
        await asyncio.sleep(0.3)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        await asyncio.wait_for(p.commit_transaction(), 15)
        for listener in proxy.listeners:
            await listener.heal()
        # concurrent aborts: one EndTxn (and one epoch bump on v1), both return
        await p.begin_transaction()
        await p.send_and_wait(topic_name, b"aborted")
        await asyncio.wait_for(asyncio.gather(p.abort_transaction(), p.abort_transaction()), 15)
        async with p.transaction():
            await p.send(topic_name, b"c")
    assert await committed_values(kafka, topic_name) == [b"a", b"b", b"c"]


async def test_stop_during_a_commit_lets_the_end_txn_finish(
    proxy: FaultProxy, kafka: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    p = Producer(
        bootstrap_servers=proxy.bootstrap_servers,
        transactional_id=f"stop-{uuid.uuid4().hex[:8]}",
        **FAST,
    )
    await p.start()
    await p.begin_transaction()
    await p.send_and_wait(topic_name, b"committed-while-stopping")
    for listener in proxy.listeners:
        listener.latency(800, which="response", apis=[EndTxnRequest.API_KEY])
    committing = asyncio.ensure_future(p.commit_transaction())
    await asyncio.sleep(0.2)
    await asyncio.wait_for(p.stop(), 15)
    await asyncio.wait_for(committing, 5)  # returned normally: the commit is known
    for listener in proxy.listeners:
        await listener.heal()
    assert await committed_values(kafka, topic_name) == [b"committed-while-stopping"]


@pytest.fixture
async def proxy39(kafka39: Any, request: pytest.FixtureRequest) -> AsyncIterator[FaultProxy]:
    async with FaultProxy(
        kafka39.bootstrap_servers, seed=zlib.crc32(request.node.nodeid.encode())
    ) as p:
        yield p
    p.check()


async def test_v1_an_unanswered_add_partitions_still_gets_its_end_txn(
    proxy39: FaultProxy, kafka39: Any, topic_name: str
) -> None:
    # Transactions v1 (Kafka 3.9): the coordinator added the partition but the answer
    # was lost. The transaction may be open there, so the abort must end it (else the
    # coordinator times it out later and fences this producer); an abort it finds
    # nothing open for has nothing to do.
    await create_topic(kafka39.bootstrap_servers, topic_name)
    add_partitions, end_txn = AddPartitionsToTxnRequest.API_KEY, EndTxnRequest.API_KEY
    async with Producer(
        bootstrap_servers=proxy39.bootstrap_servers,
        transactional_id=f"v1-lost-{uuid.uuid4().hex[:8]}",
        **{**FAST, "max_block_ms": 3_000},
    ) as p:
        assert p._txn is not None and not p._txn.v2
        for listener in proxy39.listeners:
            listener.blackhole("response", apis=[add_partitions])
        await p.begin_transaction()
        handle = await p.send(topic_name, b"never")
        with pytest.raises(KafkaTimeoutError):
            await asyncio.wait_for(p.commit_transaction(), 15)
        with pytest.raises(Exception):  # noqa: B017 - the batch failed, typed or aborted
            await handle
        for listener in proxy39.listeners:
            await listener.heal()
        ends_before = sum(lst.stats.count("request", end_txn) for lst in proxy39.listeners)
        await asyncio.wait_for(p.abort_transaction(), 15)
        ends = sum(lst.stats.count("request", end_txn) for lst in proxy39.listeners)
        assert ends > ends_before, "the abort sent no EndTxn"
        async with p.transaction():
            await p.send(topic_name, b"next")
    got = await committed_values(kafka39, topic_name)
    assert got == [b"next"]
