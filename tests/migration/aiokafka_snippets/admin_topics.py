"""aiokafka's admin client: create, list and delete topics; grow partitions."""

import asyncio

from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic


async def main(bootstrap_servers: str, topic: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap_servers, client_id="migration-admin")
    await admin.start()
    try:
        name = topic + "-admin"
        await admin.create_topics(
            [
                NewTopic(
                    name,
                    num_partitions=1,
                    replication_factor=1,
                    topic_configs={"retention.ms": "3600000"},
                )
            ]
        )
        # the answering broker may apply the controller's record a moment later
        for _ in range(50):
            if name in await admin.list_topics():
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError(f"{name} was created but is not listed")
        await admin.create_partitions({name: NewPartitions(total_count=3)})
        await admin.delete_topics([name])
    finally:
        await admin.close()
