"""The transactional producer against real brokers: Kafka 4.x (transactions v2) and
3.9 (v1), read back by read_committed consumers (ours and librdkafka's)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from aiokproto.admin import Admin, NewTopic
from aiokproto.consumer import Consumer
from aiokproto.errors import (
    CommitFailedError,
    IllegalGenerationError,
    IllegalStateError,
    InvalidProducerEpochError,
    KafkaConfigError,
    KafkaError,
    ProducerFencedError,
    StaleMemberEpochError,
    TopicAlreadyExistsError,
    TransactionAbortedError,
)
from aiokproto.producer import Producer
from aiokproto.structs import ConsumerGroupMetadata, OffsetAndMetadata, TopicPartition
from tests.producer.helpers import FAST, create_topic

# the errors a fenced producer may see first, by transactions version (Produce answers
# INVALID_PRODUCER_EPOCH, abortable; the coordinator PRODUCER_FENCED, fatal)
FENCED = (ProducerFencedError, InvalidProducerEpochError, IllegalStateError)


def txn_producer(kafka: Any, txn_id: str | None = None, **extra: Any) -> Producer:
    return Producer(
        bootstrap_servers=kafka.bootstrap_servers,
        transactional_id=txn_id or f"tx-{uuid.uuid4().hex[:10]}",
        **{**FAST, "linger_ms": 2, **extra},
    )


async def read(
    kafka: Any, topic: str, partitions: int, isolation: str, expect: int, within: float = 20
) -> list[bytes]:
    """Every value of ``topic`` (by partition, then offset), waiting up to ``within``
    for ``expect`` of them and then a little more for any extra."""
    got: list[tuple[int, int, bytes]] = []
    async with Consumer(
        bootstrap_servers=kafka.bootstrap_servers, isolation_level=isolation
    ) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        for p in range(partitions):
            await consumer.seek_to_beginning(TopicPartition(topic, p))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        quiet_until = None
        while loop.time() < deadline:
            batch = await consumer.getmany(timeout_ms=300)
            for tp, recs in batch.items():
                got.extend((tp.partition, r.offset, r.value) for r in recs)
            if len(got) >= expect:
                quiet_until = quiet_until or loop.time() + 1.0
                if loop.time() >= quiet_until:
                    break
    return [v for _, _, v in sorted(got)]


async def test_committed_records_are_visible_and_aborted_ones_never(
    kafka_any: Any, topic_name: str
) -> None:
    kafka = kafka_any
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=3)
    async with txn_producer(kafka) as p:
        assert p._txn is not None
        assert p._txn.v2 == (not kafka.version.startswith("3.")), "transactions version"
        for t in range(4):
            await p.begin_transaction()
            for i in range(30):
                await p.send(topic_name, b"t%d-%02d" % (t, i), partition=i % 3)
            if t % 2:
                await p.flush()  # in the log, then aborted
                await p.abort_transaction()
            else:
                await p.commit_transaction()
    committed = [b"t%d-%02d" % (t, i) for t in (0, 2) for i in range(30)]
    want = sorted(committed, key=lambda v: (int(v[3:]) % 3, v))
    got = await read(kafka, topic_name, 3, "read_committed", len(committed))
    assert got == want
    everything = await read(kafka, topic_name, 3, "read_uncommitted", 120)
    assert len(everything) == 120  # the aborted ones are in the log, only hidden


async def test_librdkafka_read_committed_sees_exactly_the_committed_records(
    kafka: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=2)
    async with txn_producer(kafka) as p:
        async with p.transaction():
            for i in range(10):
                await p.send(topic_name, b"ok-%d" % i, partition=i % 2)
        with pytest.raises(RuntimeError, match="boom"):
            async with p.transaction():
                for i in range(10):
                    await p.send(topic_name, b"bad-%d" % i, partition=i % 2)
                await p.flush()  # written to the log, then aborted
                raise RuntimeError("boom")
        async with p.transaction():
            await p.send(topic_name, b"last", partition=0)
    import confluent_kafka

    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": kafka.bootstrap_servers,
            "group.id": f"rc-{uuid.uuid4().hex}",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([confluent_kafka.TopicPartition(topic_name, p, 0) for p in range(2)])
    values: list[bytes] = []
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20
        while len(values) < 11 and loop.time() < deadline:
            for msg in await loop.run_in_executor(None, lambda: consumer.consume(100, 0.5)):
                assert msg.error() is None, msg.error()
                values.append(msg.value())
        for msg in consumer.consume(100, 1.0):
            values.append(msg.value())
    finally:
        consumer.close()
    assert sorted(values) == sorted([b"ok-%d" % i for i in range(10)] + [b"last"])
    # the aborted ones are in the log, hidden
    assert len(await read(kafka, topic_name, 2, "read_uncommitted", 21)) == 21


async def test_calls_outside_their_state_are_refused_clearly(
    kafka: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    with pytest.raises(KafkaConfigError, match="transactional_id"):
        Producer(bootstrap_servers=kafka.bootstrap_servers, transactional_id="")
    with pytest.raises(KafkaConfigError, match="idempotence"):
        Producer(bootstrap_servers=kafka.bootstrap_servers, transactional_id="t", acks=1)
    plain = Producer(bootstrap_servers=kafka.bootstrap_servers)
    with pytest.raises(IllegalStateError, match="transactional_id"):
        plain.begin_transaction()
    p = txn_producer(kafka)
    with pytest.raises(IllegalStateError, match="not started"):
        p.begin_transaction()
    async with p:
        assert await p.partitions_for(topic_name) == {0}  # no transaction needed
        with pytest.raises(IllegalStateError, match="begin_transaction"):
            await p.send(topic_name, b"outside")
        with pytest.raises(IllegalStateError, match="begin_transaction"):
            await p.send_batch(topic_name, [b"outside"])
        with pytest.raises(IllegalStateError, match="begin_transaction"):
            await p.commit_transaction()
        with pytest.raises(IllegalStateError, match="begin_transaction"):
            await p.abort_transaction()
        p.begin_transaction()  # aiokafka calls it without await; both work
        with pytest.raises(IllegalStateError, match="open"):
            await p.begin_transaction()
        await p.commit_transaction()  # nothing sent: nothing to end
        await p.begin_transaction()
        await p.abort_transaction()  # nothing sent either
        await p.begin_transaction()
        meta = await p.send_and_wait(topic_name, b"inside")
        await p.commit_transaction()
        assert meta.offset >= 0
        with pytest.raises(IllegalStateError, match="begin_transaction"):
            await p.send_and_wait(topic_name, b"after")
    got = await read(kafka, topic_name, 1, "read_committed", 1)
    assert got == [b"inside"]


async def test_unsent_records_of_an_aborted_transaction_fail_typed(
    kafka: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    async with txn_producer(kafka, linger_ms=60_000, batch_size=1_000_000) as p:
        await p.begin_transaction()
        handles = [await p.send(topic_name, b"%d" % i) for i in range(5)]
        await p.abort_transaction()
        for h in handles:
            with pytest.raises(TransactionAbortedError):
                await h
        async with p.transaction():  # the producer goes on
            await p.send(topic_name, b"next")
    assert await read(kafka, topic_name, 1, "read_committed", 1) == [b"next"]


async def test_a_second_producer_with_the_same_id_fences_the_first(
    kafka_any: Any, topic_name: str
) -> None:
    kafka = kafka_any
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=2)
    txn_id = f"fence-{uuid.uuid4().hex[:8]}"
    zombie = txn_producer(kafka, txn_id)
    await zombie.start()
    try:
        await zombie.begin_transaction()
        await zombie.send_and_wait(topic_name, b"zombie-open", partition=0)
        async with txn_producer(kafka, txn_id) as successor:
            # the successor's start fenced the zombie and aborted its open transaction
            async with successor.transaction():
                await successor.send(topic_name, b"successor", partition=1)
            fenced: BaseException | None = None
            try:
                await zombie.send_and_wait(topic_name, b"zombie-late", partition=0)
                await zombie.commit_transaction()
            except KafkaError as exc:
                fenced = exc
            assert isinstance(fenced, FENCED), repr(fenced)
            if not isinstance(fenced, ProducerFencedError):
                # an epoch error from Produce is abortable: the abort learns it is fenced
                with pytest.raises(ProducerFencedError):
                    await zombie.abort_transaction()
            # fatal from now on: every call raises the same error, none hangs
            for call in (zombie.begin_transaction, zombie.abort_transaction):
                with pytest.raises(ProducerFencedError):
                    await asyncio.wait_for(call(), 5)  # type: ignore[arg-type]
            with pytest.raises(ProducerFencedError):
                await zombie.send(topic_name, b"never")
    finally:
        await zombie.stop()
    got = await read(kafka, topic_name, 2, "read_committed", 1)
    assert got == [b"successor"]


async def test_consume_transform_produce_commits_offsets_with_the_output(
    kafka_any: Any, topic_name: str
) -> None:
    kafka = kafka_any
    source, sink = topic_name, f"{topic_name}-out"
    await create_topic(kafka.bootstrap_servers, source, partitions=2)
    await create_topic(kafka.bootstrap_servers, sink, partitions=2)
    async with Producer(bootstrap_servers=kafka.bootstrap_servers) as plain:
        for i in range(40):
            await plain.send(source, b"%d" % i, partition=i % 2)
    group = f"{topic_name}-g"

    async def run(abort: bool) -> int:
        async with (
            Consumer(
                source,
                bootstrap_servers=kafka.bootstrap_servers,
                group_id=group,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                isolation_level="read_committed",
            ) as consumer,
            txn_producer(kafka) as producer,
        ):
            done = 0
            while done < 40:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=5000), 30)
                if not batch:
                    continue
                await producer.begin_transaction()
                offsets: dict[TopicPartition, int | OffsetAndMetadata] = {}
                for tp, recs in batch.items():
                    for r in recs:
                        await producer.send(sink, b"out-" + r.value, partition=tp.partition)
                    offsets[tp] = recs[-1].offset + 1
                    done += len(recs)
                metadata = consumer.group_metadata()
                assert isinstance(metadata, ConsumerGroupMetadata)
                assert metadata.generation_id >= 1 and metadata.member_id
                await producer.send_offsets_to_transaction(offsets, metadata)
                if abort:
                    await producer.abort_transaction()
                    return done
                await producer.commit_transaction()
            return done

    await run(abort=True)  # nothing of this run counts: no output, no offsets
    assert await run(abort=False) == 40
    async with Consumer(
        bootstrap_servers=kafka.bootstrap_servers, group_id=group, enable_auto_commit=False
    ) as check:
        assert await check.committed(TopicPartition(source, 0)) == 20
        assert await check.committed(TopicPartition(source, 1)) == 20
    out = await read(kafka, sink, 2, "read_committed", 40)
    assert sorted(out) == sorted(b"out-%d" % i for i in range(40))


async def test_offsets_by_topic_id_for_a_consumer_protocol_member(
    kafka: Any, topic_name: str
) -> None:
    """TxnOffsetCommit v6 (Kafka 4.4, KIP-1319) names topics by id and checks the
    member epoch of a KIP-848 member: the offsets land when the epoch is the member's,
    and a stale epoch (STALE_MEMBER_EPOCH at v6, ILLEGAL_GENERATION before) is a
    CommitFailedError that leaves the transaction to abort, as in Java."""
    if kafka.version.startswith("3."):
        pytest.skip("KIP-848 groups and TxnOffsetCommit v6 need Kafka 4")
    await create_topic(kafka.bootstrap_servers, topic_name)
    async with Producer(bootstrap_servers=kafka.bootstrap_servers) as plain:
        for i in range(3):
            await plain.send_and_wait(topic_name, b"in-%d" % i)
    tp = TopicPartition(topic_name, 0)
    group = f"{topic_name}-g"
    async with (
        Consumer(
            topic_name,
            bootstrap_servers=kafka.bootstrap_servers,
            group_id=group,
            group_protocol="consumer",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        ) as consumer,
        txn_producer(kafka) as producer,
    ):
        got = await asyncio.wait_for(consumer.getmany(tp, timeout_ms=10_000), 30)
        assert [r.offset for r in got[tp]] == [0, 1, 2]
        member = consumer.group_metadata()
        assert member.generation_id >= 1  # the member epoch
        # writing to the topic makes its id known to the producer: v6 is used
        await producer.begin_transaction()
        await producer.send(topic_name, b"echo")
        stale = ConsumerGroupMetadata(group, member.generation_id + 7, member.member_id)
        with pytest.raises(CommitFailedError, match="no longer has this member") as failed:
            await producer.send_offsets_to_transaction({tp: 1}, stale)
        # v6 says which; v5 (Kafka 4.3, or a topic id the producer lacks) folds it
        v6 = kafka.version != "4.3.1"
        cause = StaleMemberEpochError if v6 else IllegalGenerationError
        assert type(failed.value.__cause__) is cause
        await producer.abort_transaction()
        async with producer.transaction():
            await producer.send(topic_name, b"echo")
            await producer.send_offsets_to_transaction({tp: 3}, member)
        assert await consumer.committed(tp) == 3


async def test_offsets_for_a_re_created_topic_go_to_its_new_id(
    kafka: Any, topic_name: str
) -> None:
    """TxnOffsetCommit v6 with an id the topic no longer has (deleted and created again
    under its name since the producer last looked) gets UNKNOWN_TOPIC_ID: the producer
    refreshes its metadata and the retry names the new topic."""
    if kafka.version.startswith("3.") or kafka.version == "4.3.1":
        pytest.skip("TxnOffsetCommit v6 needs Kafka 4.4")
    source, sink = topic_name, f"{topic_name}-out"
    await create_topic(kafka.bootstrap_servers, source)
    await create_topic(kafka.bootstrap_servers, sink)
    group = f"{topic_name}-g"
    tp = TopicPartition(source, 0)
    async with txn_producer(kafka) as producer:
        async with producer.transaction():  # the producer learns both topics' ids
            await producer.send(source, b"x")
            await producer.send(sink, b"x")
        async with Admin(bootstrap_servers=kafka.bootstrap_servers) as admin:
            await admin.delete_topics([source])
            async with asyncio.timeout(30):
                while True:
                    try:
                        await admin.create_topics([NewTopic(source, 1, 1)])
                        break
                    except TopicAlreadyExistsError:  # the deletion is still going on
                        await asyncio.sleep(0.2)
        async with asyncio.timeout(30), producer.transaction():
            await producer.send(sink, b"y")
            await producer.send_offsets_to_transaction({tp: 5}, ConsumerGroupMetadata(group))
        async with Admin(bootstrap_servers=kafka.bootstrap_servers) as admin:
            committed = await admin.list_consumer_group_offsets(group)
    assert committed[tp].offset == 5


async def test_stop_aborts_an_open_transaction(kafka: Any, topic_name: str) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    p = txn_producer(kafka)
    await p.start()
    await p.begin_transaction()
    await p.send_and_wait(topic_name, b"never-committed")
    await p.stop()
    # the abort was written: a read_committed reader is not held at the open transaction
    async with txn_producer(kafka) as q, q.transaction():
        await q.send(topic_name, b"later")
    assert await read(kafka, topic_name, 1, "read_committed", 1) == [b"later"]


async def test_many_transactions_keep_order_and_exactly_once(
    kafka_any: Any, topic_name: str
) -> None:
    # v2 changes the epoch (sequences restart) with every transaction; v1 keeps it
    kafka = kafka_any
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=4)
    sent: list[bytes] = []
    async with txn_producer(kafka, batch_size=200) as p:
        for t in range(12):
            async with p.transaction():
                for i in range(50):
                    value = b"%02d-%02d" % (t, i)
                    await p.send(topic_name, value, key=b"k%d" % (i % 7))
                    sent.append(value)
    got = await read(kafka, topic_name, 4, "read_committed", len(sent))
    assert sorted(got) == sorted(sent)
    assert len(set(got)) == len(got)
