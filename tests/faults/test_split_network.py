"""The producer's failure paths through the fault proxy: batches split after a
MESSAGE_TOO_LARGE refusal (KIP-126) whose answers are cut after the broker wrote them
(sent again: the log still holds every record once, in order), and the InitProducerId
requests an idempotent producer sends while many of its batches fail."""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from aiokproto.errors import RecordTooLargeError
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
    got = consume(kafka.bootstrap_servers, topic_name, count + 1, within=2)  # and no more
    assert [m.value() for m in got] == values


INIT_PRODUCER_ID = 22


@pytest.mark.kafka39  # and on Kafka 3.9: both take the epoch the producer bumps itself
async def test_failed_batches_of_an_idempotent_producer_cost_no_producer_id(
    proxy: FaultProxy, kafka: Any, topic_name: str
) -> None:
    """Issue 34, defect 4: 60 batches refused for good (each record alone is over the
    topic's limit), some pipelined: the producer keeps its producer id (no
    InitProducerId after the start's; before, one per failed batch: 18 here), bumping
    its epoch itself where the sequence numbers need it (once per group failing
    together); the good records around them are written once and in order."""
    await create_topic(
        kafka.bootstrap_servers, topic_name, configs={"max.message.bytes": "100000"}
    )
    big = b"B" * 150_000
    good = [b"good-%03d" % i for i in range(40)]
    def init_producer_ids() -> int:
        return sum(lst.stats.count("request", INIT_PRODUCER_ID) for lst in proxy.listeners)

    async with Producer(bootstrap_servers=proxy.bootstrap_servers, linger_ms=0, **FAST) as p:
        # the start's own (a fresh broker may answer it with a retriable error first)
        at_start = init_producer_ids()
        assert at_start >= 1
        handles = []
        for i in range(20):
            handles.append(await p.send(topic_name, good[i]))
            for _ in range(3):  # pipelined behind a good one
                handles.append(await p.send(topic_name, big))
        await asyncio.gather(*handles, return_exceptions=True)
        handles += [await p.send(topic_name, v) for v in good[20:]]
        await p.flush()
        pid = p._acc.identity.producer_id
    refused = [h for h in handles if isinstance(h.exception(), RecordTooLargeError)]
    assert len(refused) == 60
    assert init_producer_ids() == at_start
    got = consume(kafka.bootstrap_servers, topic_name, len(good))
    assert [m.value() for m in got] == good
    assert pid >= 0
