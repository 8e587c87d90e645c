"""aiokafka docs, "Topic subscription by pattern": a topic created after subscribing
is picked up."""

import re

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic


async def main(bootstrap_servers: str, topic: str) -> None:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap_servers,
        group_id=topic + "-pattern",
        auto_offset_reset="earliest",
        metadata_max_age_ms=1000,
    )
    await consumer.start()
    try:
        consumer.subscribe(pattern="^" + re.escape(topic) + r"-\d+$")
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap_servers)
        await admin.start()
        try:
            await admin.create_topics(
                [NewTopic(topic + "-1", num_partitions=1, replication_factor=1)]
            )
        finally:
            await admin.close()
        async with AIOKafkaProducer(bootstrap_servers=bootstrap_servers) as producer:
            await producer.send_and_wait(topic + "-1", b"found")
        msg = await consumer.getone()
        assert msg.topic == topic + "-1" and msg.value == b"found"
        assert consumer.subscription() == {topic + "-1"}
    finally:
        await consumer.stop()
