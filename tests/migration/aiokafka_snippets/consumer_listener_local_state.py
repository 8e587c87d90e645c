"""aiokafka docs, "Storing offsets outside Kafka": a rebalance listener saves state on
revoke and seeks to the stored offsets on assign (plain and async methods)."""

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener


class LocalState:
    def __init__(self) -> None:
        self.offsets: dict[TopicPartition, int] = {}

    def load(self, tp: TopicPartition) -> int:
        return self.offsets.get(tp, 3)  # "stored" elsewhere: start at 3


class RebalanceListener(ConsumerRebalanceListener):
    def __init__(self, consumer: AIOKafkaConsumer, state: LocalState) -> None:
        self.consumer = consumer
        self.state = state

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:  # a plain def
        for tp in revoked:
            print("saving state of", tp)

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        for tp in assigned:
            self.consumer.seek(tp, self.state.load(tp))


async def main(bootstrap_servers: str, topic: str) -> None:
    async with AIOKafkaProducer(bootstrap_servers=bootstrap_servers) as producer:
        for i in range(10):
            for p in (0, 1):
                await producer.send(topic, b"%d" % i, partition=p)

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap_servers,
        group_id=topic + "-listener",
        enable_auto_commit=False,
        auto_offset_reset="none",  # positions come from the listener only
    )
    state = LocalState()
    listener = RebalanceListener(consumer, state)
    consumer.subscribe(topics=[topic], listener=listener)
    await consumer.start()
    try:
        msg = await consumer.getone()
        assert msg.offset == 3  # where the listener sought, on either partition
        state.offsets[TopicPartition(topic, msg.partition)] = msg.offset + 1
    finally:
        await consumer.stop()
