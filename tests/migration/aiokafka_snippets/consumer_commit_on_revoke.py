"""aiokafka docs: commit in on_partitions_revoked, so whoever gets a partition next
starts where its previous owner stopped; unsubscribe() called the aiokafka way (no await)."""

import asyncio
from collections.abc import Callable

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition


class CommitOnRevoke(ConsumerRebalanceListener):
    def __init__(self, consumer: AIOKafkaConsumer) -> None:
        self.consumer = consumer

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        await self.consumer.commit()

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        pass


async def wait_for(condition: Callable[[], bool], seconds: float = 30) -> None:
    for _ in range(int(seconds * 10)):
        if condition():
            return
        await asyncio.sleep(0.1)
    raise AssertionError("condition not reached")


async def main(bootstrap_servers: str, topic: str) -> None:
    async with AIOKafkaProducer(bootstrap_servers=bootstrap_servers) as producer:
        for i in range(10):
            await producer.send(topic, b"%d" % i, partition=0)

    def member() -> AIOKafkaConsumer:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap_servers,
            group_id=topic + "-revoke",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        consumer.subscribe([topic], listener=CommitOnRevoke(consumer))
        return consumer

    tp0 = TopicPartition(topic, 0)
    first = member()
    await first.start()
    second = member()
    try:
        for expected in range(4):
            msg = await first.getone(tp0)
            assert msg.offset == expected
        await second.start()  # a rebalance: first commits what it consumed
        await wait_for(lambda: len(first.assignment()) == len(second.assignment()) == 1)
        assert await second.committed(tp0) == 4
        owner = first if tp0 in first.assignment() else second
        assert (await owner.getone(tp0)).offset == 4

        first.unsubscribe()  # leaves the group; second gets everything
        await wait_for(lambda: len(second.assignment()) == 2)
        assert first.assignment() == set()
    finally:
        await second.stop()
        await first.stop()
