"""``enable_auto_offset_store=False`` + ``store_offsets()`` (confluent-kafka's offset
store) against a real broker: commits without offsets take what was stored, never the
positions, and what was stored for a revoked partition is never committed later."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest

from aiokproto.consumer import Consumer, ConsumerRebalanceListener, ConsumerRecord
from aiokproto.errors import IllegalStateError, KafkaConfigError, NoGroupError
from aiokproto.structs import OffsetAndMetadata, TopicPartition
from tests.consumer.conftest import aproduce, create_topic
from tests.consumer.test_consume_group_e2e import take


def _options(kafka: Any, group: str, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap_servers": kafka.bootstrap_servers,
        "group_id": group,
        "auto_offset_reset": "earliest",
        "enable_auto_offset_store": False,
        "auto_commit_interval_ms": 100,
        "session_timeout_ms": 6_000,
        "heartbeat_interval_ms": 200,
        **extra,
    }


async def _committed_soon(consumer: Consumer, tp: TopicPartition, want: int) -> None:
    deadline = time.monotonic() + 10
    while (got := await consumer.committed(tp)) != want:
        assert time.monotonic() < deadline, f"committed {got}, not {want}"
        await asyncio.sleep(0.1)


async def test_auto_commit_commits_the_stored_offsets_not_the_positions(
    kafka: Any, topic_name: str
) -> None:
    await aproduce(
        kafka.bootstrap_servers, topic_name, [(0, None, b"v%d" % i, None) for i in range(20)]
    )
    tp = TopicPartition(topic_name, 0)
    group = f"g-{uuid.uuid4().hex[:8]}"
    async with Consumer(topic_name, **_options(kafka, group)) as consumer:
        records = await take(consumer, 20)
        assert await consumer.position(tp) == 20
        await asyncio.sleep(0.5)  # auto-commits went by: nothing stored, nothing committed
        assert await consumer.committed(tp) is None
        # processing finished out of order: 0..4 are done, 5 is not, 9 is
        consumer.store_offsets(records[:5])
        await _committed_soon(consumer, tp, 5)
        consumer.store_offsets(records[9])
        await _committed_soon(consumer, tp, 10)
        consumer.store_offsets(offsets={tp: 7})  # the last call wins, lower or not
        await consumer.commit()  # commit() without offsets: the stored ones too
        assert await consumer.committed(tp) == 7
        consumer.store_offsets(offsets={tp: OffsetAndMetadata(12, "", -1)})
        assert "group_id" in repr(consumer) and "assigned=1" in repr(consumer)
    # stop() commits what was stored, and the next member starts there
    async with Consumer(topic_name, **_options(kafka, group)) as again:
        assert (await take(again, 1))[0].offset == 12


async def test_store_offsets_refuses_what_it_cannot_store(kafka: Any, topic_name: str) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=1)
    tp = TopicPartition(topic_name, 0)
    other = TopicPartition(topic_name + "-other", 0)
    group = f"g-{uuid.uuid4().hex[:8]}"
    async with Consumer(**_options(kafka, group)) as consumer:
        consumer.assign([tp])
        with pytest.raises(IllegalStateError, match="not assigned"):
            consumer.store_offsets(offsets={tp: 3, other: 1})  # all or nothing
        assert consumer._subs.states()[tp].stored is None
        fake = ConsumerRecord(other.topic, 0, 4, 0, 0, None, b"", ())
        with pytest.raises(IllegalStateError, match=f"{other.topic}-0 not assigned"):
            consumer.store_offsets(fake)
        with pytest.raises(KafkaConfigError):
            consumer.store_offsets(offsets={tp: -1})
        with pytest.raises(KafkaConfigError):
            consumer.store_offsets(["not a record"])  # type: ignore[list-item]
        consumer.store_offsets(offsets={tp: 3})
        await consumer.commit()
        assert await consumer.committed(tp) == 3
    plain = dict(_options(kafka, group), enable_auto_offset_store=True)
    async with Consumer(**plain) as consumer:
        consumer.assign([tp])
        with pytest.raises(IllegalStateError, match="enable_auto_offset_store=False"):
            consumer.store_offsets(offsets={tp: 1})
    no_group = {k: v for k, v in _options(kafka, group).items() if k == "bootstrap_servers"}
    async with Consumer(**no_group, enable_auto_offset_store=False) as consumer:
        consumer.assign([tp])
        with pytest.raises(NoGroupError):
            consumer.store_offsets(offsets={tp: 1})
    with pytest.raises(KafkaConfigError, match="enable_auto_offset_store must be a bool"):
        Consumer(**_options(kafka, group, enable_auto_offset_store="no"))


async def test_a_revoked_partitions_stored_offset_is_never_committed_after(
    kafka: Any, topic_name: str
) -> None:
    """Stored offsets go with the partition: committed before it is revoked (the next
    owner starts there), never by a later auto-commit of the member that lost it."""
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=2)
    await aproduce(
        kafka.bootstrap_servers, topic_name, [(i % 2, None, b"v%d" % i, None) for i in range(40)]
    )
    group = f"g-{uuid.uuid4().hex[:8]}"
    tps = [TopicPartition(topic_name, p) for p in (0, 1)]
    async with Consumer(topic_name, **_options(kafka, group)) as first:
        await take(first, 40)
        first.store_offsets(offsets={tps[0]: 3, tps[1]: 3})
        await _committed_soon(first, tps[0], 3)
        second = Consumer(topic_name, **_options(kafka, group, enable_auto_commit=False))
        await second.start()
        try:
            deadline = time.monotonic() + 30
            seen: list[int] = []
            while len(first.assignment()) != 1 or len(second.assignment()) != 1 or not seen:
                assert time.monotonic() < deadline, "no rebalance"
                await first.getmany(timeout_ms=100)
                for records in (await second.getmany(timeout_ms=100)).values():
                    seen += [r.offset for r in records]
            (moved,) = second.assignment()
            # the new owner starts at the stored offset (committed before the revoke)
            assert seen[0] == 3
            second.store_offsets(offsets={moved: 15})
            await second.commit()
            await asyncio.sleep(0.5)  # first auto-commits a few times meanwhile
            assert await second.committed(moved) == 15
        finally:
            await second.stop()


class _StoreOnRevoke(ConsumerRebalanceListener):
    """Stores offset 10 + partition for every partition revoked: processing finished
    in the listener, as it often does."""

    def __init__(self) -> None:
        self.consumer: Consumer | None = None

    async def on_partitions_revoked(self, revoked: frozenset[TopicPartition]) -> None:
        assert self.consumer is not None
        if revoked:
            self.consumer.store_offsets(offsets={tp: 10 + tp.partition for tp in revoked})


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
async def test_what_a_revoke_listener_stores_is_committed(
    kafka: Any, topic_name: str, protocol: str
) -> None:
    """The commit before a revoke comes after ``on_partitions_revoked`` with stored
    offsets: it commits what the listener stored (it ran first, and the listener's
    store_offsets() was accepted, then forgotten with the partition)."""
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=2)
    await aproduce(
        kafka.bootstrap_servers, topic_name, [(i % 2, None, b"v%d" % i, None) for i in range(40)]
    )
    group = f"g-{uuid.uuid4().hex[:8]}"
    options = _options(kafka, group, group_protocol=protocol, auto_commit_interval_ms=60_000)
    if protocol == "consumer":  # the broker decides those
        del options["session_timeout_ms"], options["heartbeat_interval_ms"]
    listener = _StoreOnRevoke()
    first = listener.consumer = Consumer(**options)
    async with first:
        first.subscribe([topic_name], listener=listener)
        await take(first, 40)
        async with Consumer(topic_name, **options) as second:
            # a rebalance moves a partition to second
            deadline = time.monotonic() + 30
            while len(first.assignment()) != 1 or len(second.assignment()) != 1:
                assert time.monotonic() < deadline, "no rebalance"
                await first.getmany(timeout_ms=100)
                await second.getmany(timeout_ms=100)
            (moved,) = second.assignment()
            assert await second.committed(moved) == 10 + moved.partition
            await second.stop()
            (kept,) = first.assignment()
    # stop() revokes the rest: the listener's offsets are committed there too
    async with Consumer(**options) as check:
        assert await check.committed(kept) == 10 + kept.partition
