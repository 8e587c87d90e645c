"""Batches split after a MESSAGE_TOO_LARGE refusal (KIP-126) through the fault proxy:
answers to the pieces are cut after the broker wrote them, so the producer sends them
again; the log still holds every record once, in order."""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from aiokproto.producer import Producer
from aiokproto.producer.delivery import wait_delivered
from tests.faults.proxy import PRODUCE, FaultProxy
from tests.producer.helpers import FAST, consume, create_topic


@pytest.fixture
async def proxy(kafka: Any, request: pytest.FixtureRequest) -> AsyncIterator[FaultProxy]:
    async with FaultProxy(
        kafka.bootstrap_servers, seed=zlib.crc32(request.node.nodeid.encode())
    ) as p:
        yield p
    p.check()


async def test_answers_dropped_mid_split_lose_duplicate_and_reorder_nothing(
    proxy: FaultProxy, kafka: Any, topic_name: str
) -> None:
    await create_topic(
        kafka.bootstrap_servers, topic_name, configs={"max.message.bytes": "100000"}
    )
    count = 10_000
    values = [b"%08d" % i + b"." * 1016 for i in range(count)]
    lst = proxy.listeners[0]
    # from the third Produce answer on (the first ones refuse the 1 MB batches), every
    # 4th is cut 12 bytes in: the piece was written, its answer never arrives
    lst.reset_after(12, "response", every=4, skip=2, limit=8, apis=[PRODUCE])
    async with Producer(
        bootstrap_servers=proxy.bootstrap_servers,
        batch_size=1_000_000,
        linger_ms=20,
        request_timeout_ms=5_000,
        **FAST,
    ) as producer:
        handles = [await producer.send(topic_name, v) for v in values]
        await wait_delivered(handles)
        offsets = [h.result().offset for h in handles]
    assert lst.stats.resets >= 4, lst.stats
    assert offsets == list(range(count))
    got = consume(kafka.bootstrap_servers, topic_name, count + 1, within=5)
    assert [m.value() for m in got] == values
