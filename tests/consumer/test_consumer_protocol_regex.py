"""Regex subscriptions with group_protocol="consumer" (KIP-848): the regex goes to the
broker as SubscribedTopicRegex (RE2/J syntax), the broker matches it against its topics
(topics created later included) and assigns what matched; the member resolves the topic
ids through metadata of every topic."""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from typing import Any

import pytest

from aiokproto.consumer.subscription import SubscriptionState
from aiokproto.errors import InvalidRegularExpressionError, KafkaConfigError
from aiokproto.producer import Producer
from aiokproto.structs import TopicPartition
from tests.consumer.conftest import create_topic
from tests.consumer.test_consumer_protocol_broker import member

# -- pure: what is sent -------------------------------------------------------------------


def test_a_regex_is_kept_as_text_for_the_broker() -> None:
    s = SubscriptionState()
    # RE2/J syntax Python's re would refuse: kept as written, the broker judges it
    s.subscribe(pattern=r"orders\p{L}+", broker_regex=True)
    assert s.kind == "pattern"
    assert s.regex == r"orders\p{L}+"
    assert s.pattern is None
    assert s.topics == frozenset()


def test_python_flags_become_inline_flags_and_others_are_refused() -> None:
    s = SubscriptionState()
    s.subscribe(pattern=re.compile("Orders.*", re.IGNORECASE | re.DOTALL), broker_regex=True)
    assert s.regex == "(?is)Orders.*"
    with pytest.raises(KafkaConfigError, match="RE2/J"):
        s.subscribe(pattern=re.compile("a b", re.VERBOSE), broker_regex=True)
    with pytest.raises(KafkaConfigError, match="empty"):
        s.subscribe(pattern="", broker_regex=True)
    with pytest.raises(KafkaConfigError):
        s.subscribe(pattern=42, broker_regex=True)  # type: ignore[arg-type]
    assert s.regex == "(?is)Orders.*"  # a refused call changed nothing


def test_switching_between_regex_and_names_clears_the_other() -> None:
    s = SubscriptionState()
    s.subscribe(pattern="a.*", broker_regex=True)
    version = s.version
    s.subscribe(pattern="a.*", broker_regex=True)
    assert s.version == version  # the same regex again is no change
    s.subscribe(["t"])
    assert (s.kind, s.regex, s.topics) == ("topics", None, frozenset({"t"}))
    s.subscribe(pattern="b.*", broker_regex=True)
    assert (s.regex, s.topics) == ("b.*", frozenset())
    s.unsubscribe()
    assert s.regex is None


# -- against the broker ---------------------------------------------------------------------


def prefix() -> str:
    return "rx" + uuid.uuid4().hex[:10]


async def produce(bootstrap: str, topic: str, n: int) -> None:
    async with Producer(bootstrap_servers=bootstrap) as p:
        await p.send_batch(topic, [b"%d" % i for i in range(n)], partition=0)
        await p.flush()


async def test_regex_picks_up_a_topic_created_later(kafka: Any) -> None:
    pre = prefix()
    first, later, other = f"{pre}-a", f"{pre}-b", f"{pre}x-c"
    bootstrap = kafka.bootstrap_servers
    for t in (first, other):
        await create_topic(bootstrap, t, partitions=2)
        await produce(bootstrap, t, 10)
    seen: set[tuple[str, int, int]] = set()
    async with asyncio.timeout(120):
        async with member(kafka, f"g-{pre}") as c:
            c.subscribe(pattern=f"{pre}-.*")
            while len(seen) < 10:
                for tp, records in (await c.getmany(timeout_ms=500)).items():
                    seen.update((tp.topic, tp.partition, r.offset) for r in records)
            assert c.assignment() == {TopicPartition(first, p) for p in range(2)}
            assert c.subscription() == {first}
            await create_topic(bootstrap, later, partitions=1)
            await produce(bootstrap, later, 5)
            created = time.monotonic()
            while not any(t == later for t, _, _ in seen):
                for tp, records in (await c.getmany(timeout_ms=500)).items():
                    seen.update((tp.topic, tp.partition, r.offset) for r in records)
            picked_up_s = time.monotonic() - created
            assert c.assignment() == {
                TopicPartition(first, 0),
                TopicPartition(first, 1),
                TopicPartition(later, 0),
            }
            assert c.subscription() == {first, later}
    # nothing of the topic the regex does not match (a full match, as in Java)
    assert {t for t, _, _ in seen} == {first, later}
    assert len(seen) == 15
    print(f"topic created later consumed after {picked_up_s:.1f} s")


async def test_two_members_share_a_regex_subscription(kafka: Any) -> None:
    pre = prefix()
    bootstrap = kafka.bootstrap_servers
    topics = [f"{pre}-{i}" for i in range(3)]
    for t in topics:
        await create_topic(bootstrap, t, partitions=2)
    every = {TopicPartition(t, p) for t in topics for p in range(2)}
    async with asyncio.timeout(90):
        async with member(kafka, f"g-{pre}") as a, member(kafka, f"g-{pre}") as b:
            a.subscribe(pattern=f"{pre}-[0-9]+")
            b.subscribe(pattern=f"{pre}-[0-9]+")

            async def poll() -> bool:
                await asyncio.gather(a.getmany(timeout_ms=200), b.getmany(timeout_ms=200))
                ours = a.assignment(), b.assignment()
                return all(ours) and ours[0] | ours[1] == every and not ours[0] & ours[1]

            while not await poll():
                pass


async def test_a_regex_the_broker_cannot_parse_fails_every_poll_until_resubscribed(
    kafka: Any,
) -> None:
    # a lookahead: valid for Python's re, not for RE2/J
    pre = prefix()
    await create_topic(kafka.bootstrap_servers, f"{pre}-a", partitions=1)
    async with asyncio.timeout(60):
        async with member(kafka, f"g-{pre}") as c:
            c.subscribe(pattern="(?=x)x.*")
            with pytest.raises(InvalidRegularExpressionError):
                for _ in range(200):
                    await c.getmany(timeout_ms=200)
            # not a one-off: the member is out of the group, and every poll says so
            for _ in range(2):
                with pytest.raises(InvalidRegularExpressionError):
                    await c.getmany(timeout_ms=100)
            # a new subscription joins afresh
            c.subscribe(pattern=f"{pre}-.*")
            while c.assignment() != {TopicPartition(f"{pre}-a", 0)}:
                await c.getmany(timeout_ms=200)


async def test_from_a_regex_to_topic_names(kafka: Any) -> None:
    pre = prefix()
    bootstrap = kafka.bootstrap_servers
    a, b = f"{pre}-a", f"{pre}-b"
    for t in (a, b):
        await create_topic(bootstrap, t, partitions=1)
    async with asyncio.timeout(90):
        async with member(kafka, f"g-{pre}") as c:
            c.subscribe(pattern=f"{pre}-.*")
            both = {TopicPartition(a, 0), TopicPartition(b, 0)}
            while c.assignment() != both:
                await c.getmany(timeout_ms=200)
            c.subscribe([b])
            # the broker dropped the regex: only the named topic stays assigned
            while c.assignment() != {TopicPartition(b, 0)}:
                await c.getmany(timeout_ms=200)
