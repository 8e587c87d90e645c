"""aiokafka's admin client: list consumer groups and their committed offsets."""

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient


async def main(bootstrap_servers: str, topic: str) -> None:
    tp = TopicPartition(topic, 0)
    async with AIOKafkaConsumer(
        bootstrap_servers=bootstrap_servers, group_id=topic + "-admin-group"
    ) as consumer:
        consumer.assign([tp])
        await consumer.commit({tp: 0})

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap_servers)
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(topic + "-admin-group")
        assert offsets[tp].offset == 0
    finally:
        await admin.close()
