"""The producer's defaults against a real broker, tried as a user without tuning would:
the default batch (1,000,000 bytes) on a topic whose limit is lower is split and
delivered in order, idempotent and in a transaction, with no new producer id; records
just under and just over max_request_size; buffer_memory below the batch size."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from aiokproto.errors import RecordTooLargeError
from aiokproto.net.connection import BrokerConnection
from aiokproto.producer import Producer
from aiokproto.producer.delivery import wait_delivered
from aiokproto.producer.options import DEFAULT_BATCH_SIZE
from aiokproto.protocol.messages.init_producer_id import InitProducerIdRequest
from tests.producer.helpers import FAST, consume, create_topic
from tests.producer.test_transactions_broker import read

LIMIT = {"max.message.bytes": "100000"}  # a tenth of the default batch
COUNT = 20_000


def value(i: int) -> bytes:
    return b"%08d" % i + b"." * 1016  # 1 KB


@pytest.fixture
def init_producer_ids(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every InitProducerId request written, as it goes out (a start may retry its
    own, on a broker still loading)."""
    sent: list[int] = []
    write = BrokerConnection._write

    def counting(self: BrokerConnection, request: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(request, InitProducerIdRequest):
            sent.append(1)
        return write(self, request, *args, **kwargs)

    monkeypatch.setattr(BrokerConnection, "_write", counting)
    return sent


async def test_the_default_batch_on_a_small_topic_limit_is_split_in_order(
    kafka: Any, topic_name: str, init_producer_ids: list[int]
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, configs=LIMIT)
    async with Producer(bootstrap_servers=kafka.bootstrap_servers, **FAST) as producer:
        assert producer.options.batch_size == DEFAULT_BATCH_SIZE
        identity, started = producer._acc.identity, len(init_producer_ids)
        handles = [await producer.send(topic_name, value(i)) for i in range(COUNT)]
        await wait_delivered(handles)
        assert producer._acc.identity == identity  # split, never a new epoch
        assert producer._acc.used == 0
        assert len(init_producer_ids) == started  # none for the splits
    assert [h.result().offset for h in handles] == list(range(COUNT))
    got = consume(kafka.bootstrap_servers, topic_name, COUNT)
    assert [m.value() for m in got] == [value(i) for i in range(COUNT)]


async def test_the_default_batch_on_a_small_topic_limit_in_a_transaction(
    kafka: Any, topic_name: str, init_producer_ids: list[int]
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, configs=LIMIT)
    async with Producer(
        bootstrap_servers=kafka.bootstrap_servers,
        transactional_id=f"defaults-{uuid.uuid4().hex[:8]}",
        **FAST,
    ) as producer:
        identity, started = producer._acc.identity, len(init_producer_ids)
        await producer.begin_transaction()
        handles = [await producer.send(topic_name, value(i)) for i in range(COUNT)]
        await wait_delivered(handles)
        assert producer._acc.identity == identity  # split, never a new epoch
        await producer.commit_transaction()  # (transactions v2 bump the epoch here)
        assert [h.result().offset for h in handles] == list(range(COUNT))
        assert producer._acc.identity.producer_id == identity.producer_id
        assert len(init_producer_ids) == started
    got = await read(kafka, topic_name, 1, "read_committed", COUNT)
    assert got == [value(i) for i in range(COUNT)]


async def test_records_just_under_and_just_over_max_request_size(
    kafka: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    async with Producer(bootstrap_servers=kafka.bootstrap_servers, **FAST) as producer:
        limit = producer.options.max_request_size
        # the largest value whose batch fits a request at the worst-case framing (a
        # batch header of 61 bytes, 36 of record varints, 15 of charge): delivered,
        # under the broker's default message.max.bytes (1,048,588) too
        under = b"u" * (limit - 112)
        meta = await (await producer.send(topic_name, under))
        over = await producer.send(topic_name, b"o" * (limit - 111))
        with pytest.raises(RecordTooLargeError, match=f"{limit + 1} bytes") as refused:
            await over  # failed at once, alone
        assert "max_request_size (1048576)" in str(refused.value)
        after = await (await producer.send(topic_name, b"after"))  # the producer goes on
    assert (meta.offset, after.offset) == (0, 1)
    got = consume(kafka.bootstrap_servers, topic_name, 2)
    assert [len(m.value()) for m in got] == [limit - 112, 5]


async def test_buffer_memory_below_the_batch_size_delivers_everything(
    kafka: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    async with Producer(
        bootstrap_servers=kafka.bootstrap_servers, buffer_memory=64 * 1024, **FAST
    ) as producer:
        assert producer.options.batch_size > producer.options.buffer_memory
        # batches are cut by what the buffer holds, not by batch_size: no send waits
        # for a batch that can never fill
        handles = [await producer.send(topic_name, value(i)) for i in range(2_000)]
        await asyncio.wait_for(wait_delivered(handles), 60)
        with pytest.raises(RecordTooLargeError, match="buffer_memory"):
            await (await producer.send(topic_name, b"x" * (64 * 1024)))
    assert [h.result().offset for h in handles] == list(range(2_000))
