"""ShareConsumer against the real 4.4.0 broker (share groups, KIP-932)."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import pytest

from aiokproto.errors import IllegalStateError, KafkaConfigError
from aiokproto.producer import Producer
from aiokproto.share import ShareConsumer, ShareRecord
from aiokproto.structs import TopicPartition
from tests.consumer.conftest import create_topic
from tests.share.conftest import configure_share_group


async def fill(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    # 16 KB batches (Java's default): a share fetch acquires whole batches, so with the
    # producer's 1 MB default a partition's 5,000-record batches went to whichever member
    # fetched first, and these tests would not see records spread over their members
    async with Producer(bootstrap_servers=bootstrap, linger_ms=5, batch_size=16_384) as p:
        for part in range(partitions):
            for start in range(0, per_partition, 5000):
                end = min(per_partition, start + 5000)
                await p.send_batch(
                    topic, [b"%d-%d" % (part, i) for i in range(start, end)], partition=part
                )
        await p.flush()


def share(kafka: Any, group: str, *topics: str, **options: Any) -> ShareConsumer:
    return ShareConsumer(
        *topics, bootstrap_servers=kafka.bootstrap_servers, group_id=group, **options
    )


async def setup(kafka: Any, topic: str, partitions: int, per_partition: int, **group: Any) -> str:
    await create_topic(kafka.bootstrap_servers, topic, partitions=partitions)
    await fill(kafka.bootstrap_servers, topic, partitions, per_partition)
    name = f"s-{topic}"
    await configure_share_group(kafka.bootstrap_servers, name, **group)
    return name


async def test_three_members_share_two_partitions_and_accept_each_record_once(
    kafka: Any, topic_name: str
) -> None:
    group = await setup(kafka, topic_name, 2, 15_000)
    got: dict[str, list[tuple[int, int]]] = {"a": [], "b": [], "c": []}
    done = asyncio.Event()

    async def work(name: str, c: ShareConsumer) -> None:
        while not done.is_set():
            batch = await c.getmany(timeout_ms=200, max_records=200)
            for tp, records in batch.items():
                got[name].extend((tp.partition, r.offset) for r in records)
            # the others get a turn: records are acquired in batches of max_poll_records
            await asyncio.sleep(0.01)
            if sum(map(len, got.values())) >= 30_000:
                done.set()

    async with asyncio.timeout(120):
        async with (
            share(kafka, group, topic_name, max_poll_records=200) as a,
            share(kafka, group, topic_name, max_poll_records=200) as b,
            share(kafka, group, topic_name, max_poll_records=200) as c,
        ):
            await asyncio.gather(work("a", a), work("b", b), work("c", c))
    every = [x for records in got.values() for x in records]
    counts = Counter(every)
    assert len(counts) == 30_000
    assert {p for p, _ in counts} == {0, 1}
    twice = [x for x, n in counts.items() if n > 1]
    assert not twice, f"{len(twice)} records were accepted twice, e.g. {twice[:5]}"
    assert all(got.values()), {k: len(v) for k, v in got.items()}


async def test_released_come_back_rejected_never_and_the_limit_archives(
    kafka: Any, topic_name: str
) -> None:
    # 10 records: 0-2 released once (back with delivery_count 2, then accepted), 3-4
    # rejected (never back), 5 released every time (archived at the limit of 3
    # deliveries), the rest accepted.
    group = await setup(kafka, topic_name, 1, 10, delivery_limit=3)
    deliveries: Counter[int] = Counter()
    counts: dict[int, list[int]] = {}
    async with (
        asyncio.timeout(60),
        share(kafka, group, topic_name, acknowledgement_mode="explicit") as c,
    ):
        quiet_since = None
        while True:
            batch = await c.getmany(timeout_ms=300)
            records = [r for rs in batch.values() for r in rs]
            for r in records:
                deliveries[r.offset] += 1
                counts.setdefault(r.offset, []).append(r.delivery_count)
                if r.offset in (3, 4):
                    c.acknowledge(r, "reject")
                elif r.offset == 5 or (r.offset < 3 and r.delivery_count == 1):
                    c.acknowledge(r, "release")
                else:
                    c.acknowledge(r, "accept")
            if records:
                quiet_since = None
                continue
            quiet_since = quiet_since or time.monotonic()
            if time.monotonic() - quiet_since > 2.0:
                break
        results = await c.commit()
    assert results == {} or all(e is None for e in results.values())
    assert {o: counts[o] for o in range(3)} == {0: [1, 2], 1: [1, 2], 2: [1, 2]}
    assert deliveries[3] == deliveries[4] == 1
    assert counts[5] == [1, 2, 3]  # then archived: the limit is 3 deliveries
    assert all(deliveries[o] == 1 for o in range(6, 10))


async def test_explicit_mode_refuses_a_poll_with_unacknowledged_records(
    kafka: Any, topic_name: str
) -> None:
    group = await setup(kafka, topic_name, 1, 5)
    async with (
        asyncio.timeout(60),
        share(kafka, group, topic_name, acknowledgement_mode="explicit") as c,
    ):
        batch: dict[TopicPartition, list[ShareRecord]] = {}
        while not batch:
            batch = await c.getmany(timeout_ms=500)
        records = next(iter(batch.values()))
        with pytest.raises(IllegalStateError, match="not acknowledged"):
            await c.getmany(timeout_ms=10)
        with pytest.raises(KafkaConfigError):
            c.acknowledge(records[0], "maybe")
        for r in records:
            c.acknowledge(r, "accept")
        with pytest.raises(IllegalStateError):
            c.acknowledge(records[0], "accept")  # twice
        results = await c.commit()
        assert set(results) == {TopicPartition(topic_name, 0)}
        assert all(e is None for e in results.values())


async def test_stop_releases_what_it_holds_at_once(kafka: Any, topic_name: str) -> None:
    # a holds 20 records unacknowledged and stops: they go back at once (not after the
    # 30 s lock) and b gets them with delivery_count 2
    group = await setup(kafka, topic_name, 1, 20)
    async with asyncio.timeout(60):
        a = share(kafka, group, topic_name, acknowledgement_mode="explicit")
        await a.start()
        held: list[ShareRecord] = []
        while len(held) < 20:
            for rs in (await a.getmany(timeout_ms=500)).values():
                held.extend(rs)
        await a.stop()
        began = time.monotonic()
        seen: list[ShareRecord] = []
        async with share(kafka, group, topic_name) as b:
            while len(seen) < 20:
                for rs in (await b.getmany(timeout_ms=500)).values():
                    seen.extend(rs)
        assert time.monotonic() - began < 20
    assert sorted(r.offset for r in seen) == list(range(20))
    assert {r.delivery_count for r in seen} == {2}


async def test_async_for_and_the_commit_callback(kafka: Any, topic_name: str) -> None:
    group = await setup(kafka, topic_name, 1, 30)
    answered: list[tuple[dict[TopicPartition, frozenset[int]], Exception | None]] = []
    offsets = []
    async with asyncio.timeout(60):
        async with share(
            kafka,
            group,
            topic_name,
            acknowledgement_commit_callback=lambda o, e: answered.append((dict(o), e)),
        ) as c:
            async for record in c:
                offsets.append(record.offset)
                assert record.delivery_count >= 1
                if len(offsets) == 30:
                    break
            await c.commit()
    assert offsets == list(range(30))
    acked = set().union(*(o.get(TopicPartition(topic_name, 0), set()) for o, _ in answered))
    assert acked == set(range(30))
    assert all(e is None for _, e in answered)


async def test_rejected_and_exhausted_records_go_to_the_dead_letter_queue(
    kafka: Any, topic_name: str
) -> None:
    """Kafka 4.4 (share.version 2, KIP-1191): the broker copies records a share
    consumer rejects, and records that run out of deliveries, to the group's
    dead-letter topic; the consumer's side is its usual reject and release."""
    from aiokproto.admin import Admin, AlterConfigOp, ConfigResource, ConfigResourceType
    from aiokproto.consumer import Consumer

    async with Admin(bootstrap_servers=kafka.bootstrap_servers) as admin:
        features = await admin.describe_features()
    share_version = features.finalized_features.get("share.version")
    if share_version is None or share_version.max_version_level < 2:
        pytest.skip("the share-group dead-letter queue needs share.version 2 (Kafka 4.4)")
    group = await setup(kafka, topic_name, 1, 4, delivery_limit=2)
    dlq = f"dlq.{topic_name}"
    await create_topic(
        kafka.bootstrap_servers, dlq, configs={"errors.deadletterqueue.group.enable": "true"}
    )
    async with Admin(bootstrap_servers=kafka.bootstrap_servers) as admin:
        await admin.incremental_alter_configs(
            {
                ConfigResource(ConfigResourceType.GROUP, group): [
                    AlterConfigOp("errors.deadletterqueue.topic.name", dlq),
                    AlterConfigOp("errors.deadletterqueue.copy.record.enable", "true"),
                ]
            }
        )
    # offset 0 rejected, 1 released until the limit (2 deliveries), 2-3 accepted
    seen: list[tuple[int, int]] = []
    async with (
        asyncio.timeout(60),
        share(kafka, group, topic_name, acknowledgement_mode="explicit") as c,
    ):
        while len(seen) < 5:
            batch = await c.getmany(timeout_ms=300)
            for r in (r for rs in batch.values() for r in rs):
                seen.append((r.offset, r.delivery_count))
                c.acknowledge(r, {0: "reject", 1: "release"}.get(r.offset, "accept"))
        assert await c.commit() in ({}, {TopicPartition(topic_name, 0): None})
    assert sorted(seen) == [(0, 1), (1, 1), (1, 2), (2, 1), (3, 1)]
    async with Consumer(
        dlq, bootstrap_servers=kafka.bootstrap_servers, auto_offset_reset="earliest"
    ) as reader:
        got: list[Any] = []
        async with asyncio.timeout(30):
            while len(got) < 2:
                batch = await reader.getmany(timeout_ms=500)
                got += [r for rs in batch.values() for r in rs]
    # the original records (copy.record.enable), and why each one is there
    assert sorted(r.value for r in got) == [b"0-0", b"0-1"]
    why = {dict(r.headers)["__dlq.errors.offset"]: dict(r.headers) for r in got}
    assert why[b"0"]["__dlq.errors.message"] == b"Offset rejected by client."
    assert why[b"1"]["__dlq.errors.delivery.count"] == b"2"
    assert {h["__dlq.errors.group"] for h in why.values()} == {group.encode()}
