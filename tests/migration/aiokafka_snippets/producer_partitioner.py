"""aiokafka's custom partitioner: a callable (key_bytes, all_partitions, available)."""

from aiokafka import AIOKafkaProducer


def last_partition(key_bytes: bytes | None, all_partitions: list[int], available: list[int]) -> int:
    return all_partitions[-1]


async def main(bootstrap_servers: str, topic: str) -> None:
    async with AIOKafkaProducer(
        bootstrap_servers=bootstrap_servers, partitioner=last_partition
    ) as producer:
        for i in range(5):
            meta = await producer.send_and_wait(topic, b"v", key=b"k%d" % i)
            assert meta.partition == 1
