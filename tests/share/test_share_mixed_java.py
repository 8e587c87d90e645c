"""A share group of aiokproto members and Kafka's own Java share consumer (4.3.1).

The Java member is ConsoleShareConsumer from the broker's jars (implicit
acknowledgement: a record is accepted by its next poll or its close). Every record
value is unique, so what each member printed or handed out can be counted.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from aiokproto.admin import Admin
from aiokproto.producer import Producer
from aiokproto.share import ShareConsumer
from tests.consumer.conftest import create_topic
from tests.share.conftest import configure_share_group
from tests.share.java import java_share_consumer

BEFORE = 4_000  # in the topic before any member starts
DURING = 12_000  # produced while all three members consume
PARTITIONS = 2


async def _until(check: Callable[[], bool], within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {within:.0f} s")
        await asyncio.sleep(0.05)


async def _produce(bootstrap: str, topic: str, first: int, last: int, chunk: int) -> None:
    """Values ``r<i>`` for first <= i < last, spread over the partitions, ``chunk`` at a
    time with a pause between (a stream the members share, not one burst)."""
    async with Producer(bootstrap_servers=bootstrap, linger_ms=5) as p:
        for start in range(first, last, chunk):
            stop = min(last, start + chunk)
            for part in range(PARTITIONS):
                values = [b"r%d" % i for i in range(start, stop) if i % PARTITIONS == part]
                await p.send_batch(topic, values, partition=part)
            await p.flush()
            await asyncio.sleep(0.05)


async def test_aiokproto_and_java_members_share_the_work_and_accept_each_record_once(
    kafka: Any, topic_name: str
) -> None:
    if kafka.version.startswith("3."):
        pytest.skip("share groups need Kafka 4.x")
    bootstrap = kafka.bootstrap_servers
    await create_topic(bootstrap, topic_name, partitions=PARTITIONS)
    group = f"s-{topic_name}"
    await configure_share_group(bootstrap, group)
    await _produce(bootstrap, topic_name, 0, BEFORE, BEFORE)
    total = BEFORE + DURING
    got: dict[str, list[str]] = {"a": [], "b": []}
    stop = asyncio.Event()

    async def member(name: str) -> None:
        async with ShareConsumer(
            topic_name, bootstrap_servers=bootstrap, group_id=group, max_poll_records=100
        ) as c:
            while not stop.is_set():
                batch = await c.getmany(timeout_ms=200)
                got[name].extend(r.value.decode() for rs in batch.values() for r in rs)
                # a pause per batch, so that the Java member keeps a share of the work
                await asyncio.sleep(0.02)

    async with asyncio.timeout(180), java_share_consumer(kafka, topic_name, group) as java:
        # the Java member joined and is consuming before the aiokproto members start
        await _until(lambda: len(java.lines) > 0, 90, "a first record printed by Java")
        members = [asyncio.create_task(member(name)) for name in got]
        try:
            # all three hold an assignment before the stream starts (a new member gets
            # its partitions at a heartbeat: without this wait Java could take it all)
            async with Admin(bootstrap_servers=bootstrap) as admin:
                deadline = time.monotonic() + 60
                while True:
                    described = (await admin.describe_share_groups([group]))[group]
                    if sum(1 for m in described.members if m.assignment) >= 3:
                        break
                    assert time.monotonic() < deadline, f"not all members assigned: {described}"
                    await asyncio.sleep(0.1)
            await _produce(bootstrap, topic_name, BEFORE, total, 400)

            def seen() -> int:
                return len(java.lines) + sum(map(len, got.values()))

            await _until(lambda: seen() >= total, 90, f"{total} records handed out")
            # a record redelivered late would show up now as a duplicate
            await asyncio.sleep(1.0)
        finally:
            stop.set()
            await asyncio.gather(*members)
        # the aiokproto members have accepted theirs and left; Java stops on exit (a
        # SIGTERM, on which it closes and accepts what it printed)

    java_values = [line.rsplit("\t", 1)[-1] for line in java.lines]
    counts = Counter(java_values + got["a"] + got["b"])
    expected = {f"r{i}" for i in range(total)}
    assert set(counts) == expected, f"missing {sorted(expected - set(counts))[:5]}"
    twice = [v for v, n in counts.items() if n > 1]
    assert not twice, f"{len(twice)} records handed out twice, e.g. {twice[:5]}"
    shares = {"java": len(java_values), **{k: len(v) for k, v in got.items()}}
    print(f"records per member: {shares}")
    # the work is split between the Java member and aiokproto's (how it splits among the
    # aiokproto members is the broker's acquisition timing: one may get none)
    assert shares["java"] and shares["a"] + shares["b"], shares

    # every record is acknowledged in the group: nothing left to deliver on any partition
    async with Admin(bootstrap_servers=bootstrap) as admin:
        lags: dict[Any, int] = {}
        deadline = time.monotonic() + 30
        while True:
            offsets = (await admin.describe_share_group_offsets({group: None}))[group]
            lags = {tp: o.lag for tp, o in offsets.items()}
            if len(lags) == PARTITIONS and not any(lags.values()):
                break
            assert time.monotonic() < deadline, f"lag left in the share group: {lags}"
            await asyncio.sleep(0.2)
