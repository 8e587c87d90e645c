"""Per-partition order of an idempotent producer across a leader change, forced with two
fake brokers that check sequence numbers the way a real broker does.

A real broker accepts any first sequence from a producer it has no state for (a new
leader that never saw it), so order on the wire is the only thing that keeps a
partition's batches in order when the leader moves: a batch must never reach a broker
while an earlier batch of its partition is still pending elsewhere.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import Any

from aiokproto.producer import Producer
from aiokproto.protocol.messages.init_producer_id import InitProducerIdResponse
from aiokproto.protocol.messages.metadata import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from aiokproto.protocol.messages.produce import (
    ProduceResponse,
    ProduceResponsePartitionProduceResponse,
    ProduceResponseTopicProduceResponse,
)
from aiokproto.records import read_batches
from tests.fake_broker import FakeBroker, Received, Reply

TOPIC = "t"
TOPIC_ID = uuid.UUID(int=0x5678)
NOT_LEADER = 6
OUT_OF_ORDER = 45
DUPLICATE = 46


@dataclass
class SequenceLog:
    """One broker's log of t[0], with a broker's idempotence checks."""

    node_id: int
    records: list[bytes] = field(default_factory=list)
    # producer id -> (epoch, last sequence written)
    producers: dict[int, tuple[int, int]] = field(default_factory=dict)
    batches: set[tuple[int, int, int]] = field(default_factory=set)  # (epoch, seq, count)

    def append(self, rec: Received) -> tuple[int, int]:
        """(error code, base offset) for a Produce of one batch."""
        data = rec.request.topic_data[0].partition_data[0].records
        (batch,) = list(read_batches(bytes(data)))
        state = self.producers.get(batch.producer_id)
        first, count = batch.base_sequence, batch.record_count
        key = (batch.producer_epoch, first, count)
        if key in self.batches:
            return DUPLICATE, -1  # the same batch again (a broker remembers the last 5)
        if state is not None:
            epoch, last = state
            expected = 0 if batch.producer_epoch != epoch else last + 1
            if first != expected:
                return OUT_OF_ORDER, -1
        # no state for this producer: any first sequence is accepted, as a broker does
        base = len(self.records)
        self.records.extend(bytes(r.value or b"") for r in batch)
        self.producers[batch.producer_id] = (batch.producer_epoch, first + count - 1)
        self.batches.add(key)
        return 0, base


class MovingLeader:
    """Two brokers; t[0] moves from node 1 to node 2 when node 1 gets its first Produce,
    and node 1 holds that request until node 2 has written something (or ``hold_s``)."""

    def __init__(self, hold_s: float) -> None:
        self.hold_s = hold_s
        self.leader = 1
        self.epoch = 0
        self.logs = {1: SequenceLog(1), 2: SequenceLog(2)}
        self.written = asyncio.Event()
        self.inits = 0
        self.produces: list[tuple[int, Received]] = []
        self.first_produce = asyncio.Event()
        self.brokers = {n: FakeBroker(self._script(n), node_id=n) for n in (1, 2)}

    async def __aenter__(self) -> MovingLeader:
        for broker in self.brokers.values():
            await broker.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        for broker in self.brokers.values():
            await broker.__aexit__(*exc)

    @property
    def bootstrap(self) -> str:
        return self.brokers[1].bootstrap

    def metadata(self) -> MetadataResponse:
        return MetadataResponse(
            brokers=[
                MetadataResponseBroker(node_id=n, host=b.host, port=b.port)
                for n, b in self.brokers.items()
            ],
            cluster_id="fake",
            controller_id=1,
            topics=[
                MetadataResponseTopic(
                    name=TOPIC,
                    topic_id=TOPIC_ID,
                    partitions=[
                        MetadataResponsePartition(
                            partition_index=0,
                            leader_id=self.leader,
                            leader_epoch=self.epoch,
                            replica_nodes=[1, 2],
                            isr_nodes=[1, 2],
                        )
                    ],
                )
            ],
        )

    def _answer(self, rec: Received, code: int, base: int) -> Reply:
        return Reply(
            response=ProduceResponse(
                responses=[
                    ProduceResponseTopicProduceResponse(
                        name=TOPIC,
                        topic_id=TOPIC_ID,
                        partition_responses=[
                            ProduceResponsePartitionProduceResponse(
                                index=0, error_code=code, base_offset=base
                            )
                        ],
                    )
                ]
            )
        )

    def _script(self, node: int) -> Any:
        async def script(rec: Received) -> Reply | None:
            if rec.api_key == 3:
                return Reply(response=self.metadata())
            if rec.api_key == 22:
                self.inits += 1
                return Reply(
                    response=InitProducerIdResponse(producer_id=9, producer_epoch=self.inits - 1)
                )
            if rec.api_key != 0:
                return None
            self.produces.append((node, rec))
            self.first_produce.set()
            if node != self.leader:
                return self._answer(rec, NOT_LEADER, -1)
            if node == 1:
                # the leader moves away while this request is pending here
                self.leader, self.epoch = 2, 1
                try:
                    async with asyncio.timeout(self.hold_s):
                        await self.written.wait()
                except TimeoutError:
                    pass
                return self._answer(rec, NOT_LEADER, -1)
            code, base = self.logs[node].append(rec)
            if code == 0:
                self.written.set()
            return self._answer(rec, code, base)

        return script


async def test_a_batch_never_overtakes_one_still_pending_at_the_old_leader() -> None:
    async with MovingLeader(hold_s=1.5) as fake:
        async with Producer(
            bootstrap_servers=fake.bootstrap,
            linger_ms=0,
            batch_size=200,  # a few records per batch: many batches in a row
            retry_backoff_ms=20,
            retry_backoff_max_ms=100,
            reconnect_backoff_ms=20,
            request_timeout_ms=5000,
            default_api_timeout_ms=5000,
        ) as p:
            handles = [await p.send(TOPIC, b"%04d" % 0 * 10)]
            async with asyncio.timeout(5):
                await fake.first_produce.wait()  # the first batch is pending at node 1 ...
            assert p._client is not None
            await p._client.metadata.refresh()  # ... when the client learns of node 2
            for i in range(1, 40):
                handles.append(await p.send(TOPIC, b"%04d" % i * 10))
                await asyncio.sleep(0.005)
            metas = [await h for h in handles]
    written = [r[:4] for r in fake.logs[2].records]
    assert written == [b"%04d" % i for i in range(40)], "a partition's records were reordered"
    assert [m.offset for m in metas] == list(range(40))
    assert fake.logs[1].records == []
    assert fake.inits == 1  # in order on the wire: no epoch bump was needed
