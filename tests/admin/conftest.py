"""Admin test fixtures: an Admin on the session broker, an authorizer broker for ACLs."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import pytest
from confluent_kafka import Producer

from aiokproto.admin import Admin, NewTopic
from aiokproto.testing import LocalKafka
from aiokproto.testing.broker_config import PLAINTEXT_ONLY
from aiokproto.testing.discovery import KafkaService, external_bootstrap, local_jars_possible

# Quick failure in tests instead of a minute of retries when something is wrong.
FAST = {"default_api_timeout_ms": 20_000, "retry_backoff_ms": 50, "retry_backoff_max_ms": 500}


@pytest.fixture
async def admin(kafka: KafkaService) -> AsyncIterator[Admin]:
    async with Admin(bootstrap_servers=kafka.bootstrap_servers, **FAST) as client:
        yield client


async def _wait_for_topics(admin: Admin, *names: str, within: float = 10.0) -> None:
    """Wait until Metadata shows the topics: the controller commits a creation before
    the brokers' metadata caches catch up."""
    async with asyncio.timeout(within):
        while not set(names) <= set(await admin.list_topics()):  # noqa: ASYNC110 - polling
            await asyncio.sleep(0.05)


async def _create(admin: Admin, *topics: NewTopic) -> None:
    await admin.create_topics(topics)
    await _wait_for_topics(admin, *(t.name for t in topics))


@pytest.fixture
async def topic(admin: Admin, topic_name: str) -> str:
    """A fresh 3-partition topic, visible in metadata."""
    await _create(admin, NewTopic(topic_name, num_partitions=3, replication_factor=1))
    return topic_name


def _produce(bootstrap: str, topic: str, partition: int, timestamps: list[int]) -> None:
    """Write one record per timestamp with an independent client (librdkafka)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for ts in timestamps:
        producer.produce(topic, b"v", partition=partition, timestamp=ts)
    assert producer.flush(30) == 0


@pytest.fixture(scope="module")
def acl_kafka(kafka_version: str) -> Iterator[LocalKafka]:
    """A single node with KRaft's StandardAuthorizer; ANONYMOUS (PLAINTEXT) is super user,
    so the controller and our client may do everything."""
    if external_bootstrap() is not None or not local_jars_possible(kafka_version):
        pytest.skip("the authorizer broker is started locally only")
    began = time.monotonic()
    broker = LocalKafka(
        version=kafka_version,
        security=PLAINTEXT_ONLY,
        overrides={
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS",
        },
    ).start()
    print(f"authorizer broker started in {time.monotonic() - began:.1f} s")
    try:
        yield broker
    finally:
        broker.stop()


# Helpers handed to tests as fixtures (test directories here are not packages).
@pytest.fixture
def produce() -> Callable[[str, str, int, list[int]], None]:
    return _produce


@pytest.fixture
def create() -> Callable[..., Awaitable[None]]:
    return _create


@pytest.fixture
def wait_for_topics() -> Callable[..., Awaitable[None]]:
    return _wait_for_topics
