"""aiokafka's assignor classes passed as partition_assignment_strategy; two members
of one group share the partitions."""

import asyncio

from aiokafka import AIOKafkaConsumer
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor


async def main(bootstrap_servers: str, topic: str) -> None:
    def member() -> AIOKafkaConsumer:
        return AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap_servers,
            group_id=topic + "-assignor",
            partition_assignment_strategy=(RoundRobinPartitionAssignor,),
            session_timeout_ms=10000,
            heartbeat_interval_ms=500,
        )

    a, b = member(), member()
    await a.start()
    await b.start()
    try:
        for _ in range(200):
            if len(a.assignment()) == 1 and len(b.assignment()) == 1:
                break
            await asyncio.sleep(0.1)
        assert len(a.assignment()) == len(b.assignment()) == 1
        assert a.assignment() | b.assignment() == {p for p in a.assignment() | b.assignment()}
        assert {tp.partition for tp in a.assignment() | b.assignment()} == {0, 1}
    finally:
        await b.stop()
        await a.stop()
