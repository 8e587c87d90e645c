"""A topic the brokers say does not exist (auto-creation off): a send() that waits for
it says so at once, once per wait, and until when; a consumer subscribed to it warns
once per topic instead of just being "assigned nothing". A topic being auto-created
(the default) is not warned about: a KRaft broker answers UNKNOWN_TOPIC_OR_PARTITION
for it too, for about 0.1 s."""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Any

import pytest

from aiokproto import Consumer, Producer, ShareConsumer
from aiokproto.cluster import metadata
from aiokproto.errors import KafkaTimeoutError
from aiokproto.protocol.messages.metadata import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponseTopic,
)
from tests.clients import client_for
from tests.fake_broker import FakeBroker, Received, Reply

WHY = "is not in metadata; auto-creation is disabled or the topic does not exist"


class Warned(logging.Handler):
    """Sets ``event`` at the first WARNING about ``topic`` under aiokproto's loggers."""

    def __init__(self, topic: str) -> None:
        super().__init__(logging.WARNING)
        self.topic = topic
        self.event = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if repr(self.topic) in record.getMessage():
            self.event.set()

    def __enter__(self) -> asyncio.Event:
        logging.getLogger("aiokproto").addHandler(self)
        return self.event

    def __exit__(self, *exc_info: object) -> None:
        logging.getLogger("aiokproto").removeHandler(self)


def warnings_about(caplog: pytest.LogCaptureFixture, topic: str) -> list[logging.LogRecord]:
    return [
        r for r in caplog.records if r.levelno == logging.WARNING and repr(topic) in r.getMessage()
    ]


async def test_a_send_to_a_missing_topic_warns_once_at_once(
    kafka: Any, topic_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    async with Producer(
        bootstrap_servers=kafka.bootstrap_servers, allow_auto_create_topics=False, max_block_ms=1000
    ) as producer:
        with Warned(topic_name) as warned:
            sends = [
                asyncio.ensure_future(producer.send_and_wait(topic_name, b"v")) for _ in range(20)
            ]
            # at once, long before max_block_ms runs out
            await asyncio.wait_for(warned.wait(), 0.9)
        outcomes = await asyncio.gather(*sends, return_exceptions=True)
        assert all(isinstance(o, KafkaTimeoutError) for o in outcomes), outcomes
        # the setting at fault is this client's, not the brokers'
        assert "allow_auto_create_topics=True" in str(outcomes[0])
        [record] = warnings_about(caplog, topic_name)  # one for 20 records
        assert record.name == "aiokproto.producer.producer"
        text = record.getMessage()
        assert f"topic {topic_name!r} {WHY}" in text
        assert re.search(r"waiting for it until \d\d:\d\d:\d\d \(max_block_ms=1000\)", text)
        # a later wait (the first one is over) says it again
        with pytest.raises(KafkaTimeoutError):
            await producer.send_and_wait(topic_name, b"again")
        assert len(warnings_about(caplog, topic_name)) == 2


@pytest.mark.parametrize("group", [True, False], ids=["group", "no-group"])
async def test_a_consumer_warns_once_per_missing_subscribed_topic(
    kafka: Any, topic_name: str, caplog: pytest.LogCaptureFixture, group: bool
) -> None:
    caplog.set_level(logging.INFO)
    missing = [f"{topic_name}-a", f"{topic_name}-b"]
    options: dict[str, Any] = {"group_id": f"g-{topic_name}"} if group else {}
    async with Consumer(
        *missing,
        bootstrap_servers=kafka.bootstrap_servers,
        allow_auto_create_topics=False,
        **options,
    ) as consumer:
        # the metadata of a missing topic is asked for again and again meanwhile
        assert await consumer.getmany(timeout_ms=1500) == {}
    for topic in missing:
        [record] = warnings_about(caplog, topic)
        assert record.name == "aiokproto.consumer.consumer"
        owner = f"group 'g-{topic_name}'" if group else "consumer"
        assert record.getMessage().startswith(f"{owner}: subscribed topic {topic!r} {WHY}")


async def test_a_share_consumer_warns_once_per_missing_topic(
    kafka: Any, topic_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    async with ShareConsumer(
        topic_name,
        bootstrap_servers=kafka.bootstrap_servers,
        group_id=f"g-{topic_name}",
        allow_auto_create_topics=False,
    ):
        with Warned(topic_name) as warned:
            await asyncio.wait_for(warned.wait(), 5)
        await asyncio.sleep(1)  # more refreshes: still one warning
    [record] = warnings_about(caplog, topic_name)
    assert record.getMessage().startswith(f"share group 'g-{topic_name}': subscribed topic")


async def test_a_topic_being_auto_created_is_not_warned_about(
    kafka: Any, topic_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Every first send() to a new topic, and every new group subscribed to one, logged
    # "auto-creation is disabled or the topic does not exist" while it was being created.
    caplog.set_level(logging.WARNING)
    async with Producer(bootstrap_servers=kafka.bootstrap_servers) as producer:
        meta = await producer.send_and_wait(topic_name, b"v")
    assert meta.topic == topic_name
    subscribed = f"{topic_name}-sub"
    async with Consumer(
        subscribed, bootstrap_servers=kafka.bootstrap_servers, group_id=f"g-{topic_name}"
    ) as consumer:
        while not consumer.assignment():
            await consumer.getmany(timeout_ms=200)
    assert warnings_about(caplog, topic_name) == []
    assert warnings_about(caplog, subscribed) == []


@pytest.mark.parametrize("auto_create", [True, False])
async def test_an_unknown_topic_is_warned_about_after_the_auto_create_grace(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, auto_create: bool
) -> None:
    # brokers that do not auto-create: with auto-creation asked for, the warning comes
    # once the topic stayed unknown for AUTO_CREATE_GRACE_S; without, at once
    monkeypatch.setattr(metadata, "AUTO_CREATE_GRACE_S", 0.3)
    caplog.set_level(logging.WARNING)
    logger = logging.getLogger("aiokproto.test")
    async with FakeBroker() as fake:

        def unknown(rec: Received) -> Reply | None:
            if rec.api_key != 3:
                return None
            return Reply(
                response=MetadataResponse(
                    brokers=[MetadataResponseBroker(node_id=1, host=fake.host, port=fake.port)],
                    cluster_id="fake",
                    controller_id=1,
                    topics=[MetadataResponseTopic(name="missing", error_code=3)],
                )
            )

        fake.script = unknown
        async with client_for(fake.bootstrap, allow_auto_create_topics=auto_create) as client:
            client.metadata.track(["missing"])
            await client.metadata.refresh()
            assert client.metadata.unknown("missing")
            client.metadata.warn_missing("missing", logger, "topic 'missing' is gone")
            assert len(warnings_about(caplog, "missing")) == (0 if auto_create else 1)
            await asyncio.sleep(0.35)
            client.metadata.warn_missing("missing", logger, "topic 'missing' is gone")
            assert len(warnings_about(caplog, "missing")) == 1
