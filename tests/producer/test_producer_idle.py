"""Idle topics leave the producer's metadata, but never under a send that waits."""

from __future__ import annotations

import asyncio
import math
import uuid

from aiokproto.producer import Producer
from aiokproto.protocol.messages.init_producer_id import InitProducerIdResponse
from aiokproto.protocol.messages.produce import (
    ProduceResponse,
    ProduceResponsePartitionProduceResponse,
    ProduceResponseTopicProduceResponse,
)
from tests.fake_broker import FakeBroker, Received, Reply, metadata_naming

_IDS = {"a": uuid.UUID(int=1), "b": uuid.UUID(int=2)}
_NAMES = {v: k for k, v in _IDS.items()}


async def test_the_idle_sweep_leaves_a_topic_a_waiting_send_looked_up() -> None:
    # Found in review: a send() that looked its topic up and then waited for buffer
    # space buffered its record for a topic the sweep had dropped meanwhile, so no
    # refresh asked for it again and a leader move was never learned.
    hold_b = asyncio.Event()

    async def script(rec: Received) -> Reply | None:
        if rec.api_key == 3:
            asked = rec.request.topics
            names = list(_IDS) if asked is None else [t.name for t in asked if t.name in _IDS]
            return Reply(response=metadata_naming(fake, {n: _IDS[n] for n in names}))
        if rec.api_key == 22:
            return Reply(response=InitProducerIdResponse(producer_id=7, producer_epoch=0))
        if rec.api_key == 0:
            data = rec.request.topic_data[0]
            if (data.name or _NAMES[data.topic_id]) == "b":
                await hold_b.wait()  # b's batches keep the buffer full
            return Reply(
                response=ProduceResponse(
                    responses=[
                        ProduceResponseTopicProduceResponse(
                            name=data.name,
                            topic_id=data.topic_id,
                            partition_responses=[
                                ProduceResponsePartitionProduceResponse(index=0, base_offset=0)
                            ],
                        )
                    ]
                )
            )
        return None

    fake = FakeBroker(script)
    async with fake:
        async with Producer(
            bootstrap_servers=fake.bootstrap,
            buffer_memory=20_000,
            batch_size=4096,
            linger_ms=0,
            acks=1,
            enable_idempotence=False,
        ) as p:
            assert p._client is not None and p._acc is not None
            meta, acc = p._client.metadata, p._acc
            await (await p.send("a", b"first"))
            await p.partitions_for("b")  # known: b's records are buffered at once
            while acc.used + 1200 < acc.limit:
                await p.send("b", b"x" * 1000)
            send_a = asyncio.ensure_future(p.send("a", b"y" * 1000))
            await asyncio.sleep(0.1)
            assert not send_a.done()  # waiting for buffer space
            # "a" looks idle to the sweep now
            p._kept["a"] = -math.inf
            for pq in acc.queues["a"].values():
                pq.last_batch = -math.inf
            p._expire_idle_topics()
            assert "a" not in meta.tracked
            hold_b.set()
            handle = await send_a
            assert "a" in meta.tracked  # held again by the send that waited
            await handle
