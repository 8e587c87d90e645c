"""The first send to each of many new topics (issue 33). send() to a topic whose
metadata is not known does not wait for it: the record waits in the topic's pending
queue and one Metadata request asks for every topic pending at that moment, naming
the new topics alone (never every topic seen so far: 500 new topics once meant 500
requests answering 125,000 topics). Then the records are partitioned (keyed: murmur2
over the partition count now known) and appended in send order."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest

from aiokproto.admin import Admin, NewTopic
from aiokproto.errors import (
    IllegalStateError,
    KafkaTimeoutError,
    TransactionAbortedError,
    UnknownTopicOrPartitionError,
)
from aiokproto.producer import Producer
from aiokproto.producer.partitioner import partition_for_key
from tests.producer.helpers import FAST

TOPICS = 100
PARTITIONS = 3


async def _create(bootstrap: str, names: list[str], partitions: int = PARTITIONS) -> None:
    async with Admin(bootstrap_servers=bootstrap) as admin:
        await admin.create_topics(
            [NewTopic(t, num_partitions=partitions, replication_factor=1) for t in names]
        )
    # the leaders settle first (a produce just after creation meets
    # NOT_LEADER_OR_FOLLOWER for a while, and those refreshes are not lookups): the
    # producer under test is new to topics that have been there a while
    async with Producer(bootstrap_servers=bootstrap, linger_ms=5, **FAST) as warm:
        futures = [await warm.send(t, b"warm", partition=i)
                   for t in names for i in range(partitions)]
        await asyncio.gather(*futures)


def _spy(p: Producer) -> list[list[str] | None]:
    """The topics each Metadata request of ``p`` names from now on (None: all)."""
    asked: list[list[str] | None] = []
    assert p._client is not None
    meta = p._client.metadata
    send = meta._send

    async def spy(request: Any) -> Any:
        asked.append(None if request.topics is None else [t.name for t in request.topics])
        return await send(request)

    meta._send = spy  # type: ignore[method-assign]
    return asked


@pytest.fixture(scope="module")
def many_topics(kafka: Any) -> list[str]:
    run = uuid.uuid4().hex[:8]
    names = [f"many-{run}-{i}" for i in range(TOPICS)]
    asyncio.run(_create(kafka.bootstrap_servers, names))
    return names


async def test_a_loop_over_new_topics_asks_for_them_in_a_handful_of_requests(
    kafka: Any, many_topics: list[str]
) -> None:
    async with Producer(bootstrap_servers=kafka.bootstrap_servers, **FAST) as p:
        asked = _spy(p)
        sent: list[tuple[str, bytes | None, Any]] = []
        for round_ in range(3):  # three records per topic: order within partitions
            for i, topic in enumerate(many_topics):
                key = None if i % 5 == 0 else f"key-{i}-{round_ % 2}".encode()
                sent.append((topic, key, await p.send(topic, f"{round_}".encode(), key=key)))
            if round_ == 0:
                assert len(p) == TOPICS  # waiting records count as undelivered
        await p.flush()
        assert len(p) == 0
    assert None not in asked  # never every topic of the cluster
    assert len(asked) <= 3, [len(n or ()) for n in asked]
    assert sorted(t for names in asked for t in names or ()) == sorted(many_topics)
    last: dict[tuple[str, int], int] = {}
    for topic, key, handle in sent:
        meta = await handle
        assert meta.topic == topic
        if key is not None:  # where murmur2 says, over the partition count learnt
            assert meta.partition == partition_for_key(key, PARTITIONS)
        # send order is kept per partition
        assert meta.offset > last.get((topic, meta.partition), -1)
        last[(topic, meta.partition)] = meta.offset


async def test_a_handler_that_yields_between_sends_shares_requests_too(
    kafka: Any, many_topics: list[str]
) -> None:
    # each send one loop pass after the other: a short window before the lookup, and
    # no topic asked for again while its answer is on the way (each waiting record
    # asked again at every answer about other topics: 394 topic names for 200). How
    # many requests depends on how long the loop takes (3 on a quiet machine, 17 at
    # load 9): the bound is loose, the names exact.
    async with Producer(bootstrap_servers=kafka.bootstrap_servers, **FAST) as p:
        asked = _spy(p)
        handles = []
        for topic in many_topics:
            handles.append(await p.send(topic, b"v"))
            await asyncio.sleep(0)
        await asyncio.gather(*handles)
    assert len(asked) <= TOPICS // 4, [len(n or ()) for n in asked]
    assert sorted(t for names in asked for t in names or ()) == sorted(many_topics)


async def test_a_missing_topic_fails_typed_while_the_good_ones_in_the_burst_succeed(
    kafka: Any, many_topics: list[str]
) -> None:
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    seen: list[Any] = []
    async with Producer(
        bootstrap_servers=kafka.bootstrap_servers,
        allow_auto_create_topics=False,
        **{**FAST, "max_block_ms": 1500},
    ) as p:
        began = time.monotonic()
        good = [await p.send(t, b"v") for t in many_topics[:20]]
        bad = [
            await p.send(missing, b"v", on_delivery=lambda e, m: seen.append(e))
            for _ in range(5)
        ]
        good.append(await p.send(many_topics[20], b"after the missing one"))
        assert (await good[-1]).offset >= 0
        for handle in good:
            assert (await handle).offset >= 0
        for handle in bad:
            with pytest.raises(KafkaTimeoutError, match=f"{missing}.*max_block_ms"):
                await handle
        assert 1.4 < time.monotonic() - began < 10
        assert len(seen) == 5 and all(isinstance(e, KafkaTimeoutError) for e in seen)
        assert p._reserved == 0  # their buffer memory came back
        # an explicit partition the topic does not have fails that record alone
        new = f"two-{uuid.uuid4().hex[:8]}"
        await _create(kafka.bootstrap_servers, [new], partitions=2)
        no_such = await p.send(new, b"v", partition=5)
        fine = await p.send(new, b"v", partition=1)
        with pytest.raises(UnknownTopicOrPartitionError):
            await no_such
        assert (await fine).partition == 1


async def test_stop_resolves_records_waiting_for_metadata(
    kafka: Any, many_topics: list[str]
) -> None:
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    p = Producer(
        bootstrap_servers=kafka.bootstrap_servers,
        allow_auto_create_topics=False,
        **{**FAST, "max_block_ms": 30_000},
    )
    await p.start()
    good = [await p.send(t, b"v") for t in many_topics[:10]]
    bad = await p.send(missing, b"v")
    began = time.monotonic()
    await p.stop(timeout_ms=2000)  # delivers what it can, fails what waits on
    assert time.monotonic() - began < 10
    for handle in good:
        assert (await handle).offset >= 0
    with pytest.raises((KafkaTimeoutError, IllegalStateError)):
        await bad
    with pytest.raises(IllegalStateError):
        await p.send(many_topics[0], b"v")


async def test_a_transaction_over_new_topics(kafka: Any, many_topics: list[str]) -> None:
    import confluent_kafka  # type: ignore[import-untyped]

    topics = many_topics[-8:]
    run = uuid.uuid4().hex[:8]
    async with Producer(
        bootstrap_servers=kafka.bootstrap_servers, transactional_id=f"tx-many-{run}", **FAST
    ) as p:
        # aborted: records still waiting for metadata fail, and none is visible
        await p.begin_transaction()
        dropped = [await p.send(t, b"aborted", key=b"k") for t in topics]
        await p.abort_transaction()
        for handle in dropped:
            with pytest.raises(TransactionAbortedError):
                await handle
        await p.begin_transaction()
        kept = [await p.send(t, f"committed {run}".encode(), key=b"k") for t in topics]
        await p.commit_transaction()  # AddPartitionsToTxn once their partitions are known
        for topic, handle in zip(topics, kept, strict=True):
            meta = await handle
            assert (meta.topic, meta.partition) == (topic, partition_for_key(b"k", PARTITIONS))
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": kafka.bootstrap_servers,
        "group.id": f"g-{run}",
        "auto.offset.reset": "earliest",
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
    })
    try:
        consumer.subscribe([topics[0]])
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and f"committed {run}".encode() not in values:
            msg = await asyncio.to_thread(consumer.poll, 0.5)
            if msg is not None and not msg.error():
                values.append(msg.value())
        assert f"committed {run}".encode() in values
        assert b"aborted" not in values
    finally:
        consumer.close()
