"""A scriptable fake cluster for producer attacks: N brokers, one topic with P
partitions whose leaders can move, brokers that check idempotent sequences the way a
real broker does, and per-request hooks (delay, error, silence)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiokproto.protocol.messages.init_producer_id import InitProducerIdResponse
from aiokproto.protocol.messages.metadata import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from aiokproto.protocol.messages.produce import (
    ProduceResponse,
    ProduceResponseLeaderIdAndEpoch,
    ProduceResponsePartitionProduceResponse,
    ProduceResponseTopicProduceResponse,
)
from aiokproto.records import read_batches
from tests.fake_broker import FakeBroker, Received, Reply

TOPIC = "t"
TOPIC_ID = uuid.UUID(int=0xABCD)
NOT_LEADER = 6
OUT_OF_ORDER = 45
DUPLICATE = 46

#: (node, partition, batch) -> None (write it) | error code | "silent" ; may be async
ProduceHook = Callable[[int, int, Any], Awaitable[Any] | Any]


@dataclass
class PartitionLog:
    """One broker's copy of one partition, with a broker's idempotence checks."""

    records: list[bytes] = field(default_factory=list)
    producers: dict[int, tuple[int, int]] = field(default_factory=dict)
    seen: dict[tuple[int, int, int], int] = field(default_factory=dict)

    def append(self, batch: Any) -> tuple[int, int]:
        first, count = batch.base_sequence, batch.record_count
        key = (batch.producer_epoch, first, count)
        if key in self.seen:
            return DUPLICATE, self.seen[key]
        state = self.producers.get(batch.producer_id)
        if state is not None:
            epoch, last = state
            expected = 0 if batch.producer_epoch != epoch else (last + 1) & 0x7FFFFFFF
            if batch.producer_epoch < epoch or first != expected:
                return OUT_OF_ORDER, -1
        base = len(self.records)
        self.records.extend(bytes(r.value or b"") for r in batch)
        self.producers[batch.producer_id] = (batch.producer_epoch, first + count - 1)
        self.seen[key] = base
        return 0, base


class FakeCluster:
    def __init__(
        self,
        nodes: int = 2,
        partitions: int = 1,
        hook: ProduceHook | None = None,
        metadata_delay: Callable[[], float] | None = None,
        replicated: bool = False,
        stall: Callable[[int], bool] | None = None,
    ) -> None:
        # stall(node) -> True: this Produce and everything after it on its connection
        # is never processed nor answered (a hung broker thread), until the client
        # gives up on the connection
        self.stall = stall
        self.stalled: set[tuple[int, int]] = set()
        # replicated: a partition has one log (and producer state) that every leader
        # shares, as the ISR does; else each broker keeps its own
        self.replicated = replicated
        self.partitions = partitions
        self.leader = {p: 1 for p in range(partitions)}
        self.epoch = {p: 0 for p in range(partitions)}
        self.hook = hook
        self.metadata_delay = metadata_delay
        self.logs: dict[tuple[int, int], PartitionLog] = {}
        self.inits = 0
        self.produces: list[tuple[int, Received]] = []
        #: every record written anywhere, in write order: (partition, value)
        self.writes: list[tuple[int, bytes]] = []
        self.brokers = {n: FakeBroker(self._script(n), node_id=n) for n in range(1, nodes + 1)}

    async def __aenter__(self) -> FakeCluster:
        for broker in self.brokers.values():
            await broker.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        for broker in self.brokers.values():
            await broker.__aexit__(*exc)

    @property
    def bootstrap(self) -> str:
        return self.brokers[1].bootstrap

    def move(self, partition: int, node: int) -> None:
        self.leader[partition] = node
        self.epoch[partition] += 1

    def log(self, node: int, partition: int) -> PartitionLog:
        return self.logs.setdefault((0 if self.replicated else node, partition), PartitionLog())

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
                            partition_index=p,
                            leader_id=self.leader[p],
                            leader_epoch=self.epoch[p],
                            replica_nodes=list(self.brokers),
                            isr_nodes=list(self.brokers),
                        )
                        for p in range(self.partitions)
                    ],
                )
            ],
        )

    def _script(self, node: int) -> Any:
        async def script(rec: Received) -> Reply | None:
            if rec.api_key == 3:
                if self.metadata_delay is not None:
                    await asyncio.sleep(self.metadata_delay())
                return Reply(response=self.metadata())
            if rec.api_key == 22:
                self.inits += 1
                return Reply(
                    response=InitProducerIdResponse(producer_id=9, producer_epoch=self.inits - 1)
                )
            if rec.api_key != 0:
                return None
            self.produces.append((node, rec))
            if (node, rec.connection) in self.stalled:
                return Reply("silent")  # a stalled connection processes nothing more
            if self.stall is not None and self.stall(node):
                self.stalled.add((node, rec.connection))
                return Reply("silent")
            parts = []
            silent = False
            for pd in rec.request.topic_data[0].partition_data:
                (batch,) = list(read_batches(bytes(pd.records)))
                part = pd.index
                verdict = None
                if self.hook is not None:
                    verdict = self.hook(node, part, batch)
                    if asyncio.iscoroutine(verdict):
                        verdict = await verdict
                if verdict == "silent":
                    silent = True
                    continue
                if verdict is None and self.leader[part] != node:
                    verdict = NOT_LEADER
                if verdict is None:
                    log = self.log(node, part)
                    before = len(log.records)
                    code, base = log.append(batch)
                    self.writes.extend((part, v) for v in log.records[before:])
                else:
                    code, base = verdict, -1
                leader = ProduceResponseLeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)
                parts.append(
                    ProduceResponsePartitionProduceResponse(
                        index=part, error_code=code, base_offset=base, current_leader=leader
                    )
                )
            if silent:
                return Reply("silent")
            return Reply(
                response=ProduceResponse(
                    responses=[
                        ProduceResponseTopicProduceResponse(
                            name=TOPIC, topic_id=TOPIC_ID, partition_responses=parts
                        )
                    ]
                )
            )

        return script


FAST: dict[str, Any] = {
    "retry_backoff_ms": 20,
    "retry_backoff_max_ms": 100,
    "reconnect_backoff_ms": 20,
    "default_api_timeout_ms": 5000,
    "request_timeout_ms": 5000,
}
