"""Hostile use of the transactional Producer against real brokers (4.4.0 =
transactions v2, 3.9.1 = v1): wrong types, wrong orders, races, timeouts. Each test
asserts the correct behaviour: a clear typed error quickly, never a hang, never a
record of an aborted transaction visible to a read_committed reader."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from aiokproto.admin import Admin
from aiokproto.consumer import Consumer
from aiokproto.errors import (
    CommitFailedError,
    IllegalStateError,
    InvalidTopicError,
    InvalidTransactionTimeoutError,
    KafkaConfigError,
    KafkaError,
    KafkaTimeoutError,
    ProducerFencedError,
    RecordTooLargeError,
)
from aiokproto.producer import Producer
from aiokproto.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from aiokproto.structs import ConsumerGroupMetadata, OffsetAndMetadata, TopicPartition
from tests.faults.proxy import FaultProxy
from tests.producer.helpers import create_topic

FAST: dict[str, Any] = {
    "default_api_timeout_ms": 10_000,
    "request_timeout_ms": 5_000,
    "retry_backoff_ms": 50,
    "retry_backoff_max_ms": 300,
    "max_block_ms": 8_000,
    "linger_ms": 2,
}


def txn_producer(kafka: Any, txn_id: str | None = None, **extra: Any) -> Producer:
    return Producer(
        bootstrap_servers=kafka.bootstrap_servers,
        transactional_id=txn_id or f"hx-{uuid.uuid4().hex[:10]}",
        **{**FAST, **extra},
    )


async def visible(kafka: Any, topic: str, partitions: int = 1) -> list[bytes]:
    """What a read_committed reader sees of ``topic`` (up to the last stable offset)."""
    async with Consumer(
        bootstrap_servers=kafka.bootstrap_servers, isolation_level="read_committed"
    ) as c:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        for tp in tps:
            await c.seek_to_beginning(tp)
        ends = await c.end_offsets(tps)
        # A commit or abort returns before the coordinator's markers are written: give
        # them up to 2 s to move the last stable offset to the high watermark (a
        # transaction left open on purpose keeps it back; then read up to it as is).
        async with Consumer(bootstrap_servers=kafka.bootstrap_servers) as uncommitted:
            for _ in range(40):
                if ends == await uncommitted.end_offsets(tps):
                    break
                await asyncio.sleep(0.05)
                ends = await c.end_offsets(tps)
        got: list[tuple[int, int, bytes]] = []
        async with asyncio.timeout(20):
            while [tp for tp in tps if await c.position(tp) < ends[tp]]:
                for tp, recs in (await c.getmany(timeout_ms=300)).items():
                    got.extend((tp.partition, r.offset, r.value) for r in recs)
        return [v for _, _, v in sorted(got)]


# -- wrong types -----------------------------------------------------------------------


@pytest.mark.parametrize("txn_id", [5, b"bytes-id", "", ["x"], 1.5, True])
def test_a_transactional_id_of_a_wrong_type_is_refused_at_once(txn_id: Any) -> None:
    with pytest.raises(KafkaConfigError, match="transactional_id"):
        Producer(bootstrap_servers="127.0.0.1:1", transactional_id=txn_id)


@pytest.mark.parametrize("timeout", ["2000", 2.5, True, 0, -1, None])
def test_a_transaction_timeout_of_a_wrong_type_is_refused_at_once(timeout: Any) -> None:
    with pytest.raises(KafkaConfigError, match="transaction_timeout_ms"):
        Producer(
            bootstrap_servers="127.0.0.1:1", transactional_id="t", transaction_timeout_ms=timeout
        )


async def test_a_transaction_timeout_beyond_int32_fails_typed(kafka: Any) -> None:
    """transaction_timeout_ms is an int32 on the wire: 2**31 is refused at
    construction (KafkaConfigError), or at least start() raises a typed KafkaError
    quickly; never struct.error or a hang."""
    try:
        p = txn_producer(kafka, transaction_timeout_ms=1 << 31)
    except KafkaConfigError:
        return
    try:
        with pytest.raises(KafkaError):
            async with asyncio.timeout(15):
                await p.start()
    finally:
        await p.stop()


async def test_a_transactional_id_too_long_for_the_wire_fails_typed(kafka: Any) -> None:
    """A protocol string holds at most 32767 bytes: refused at construction, or a
    typed KafkaError from start(), quickly; never a struct.error or a hang."""
    try:
        p = txn_producer(kafka, "x" * 40_000)
    except KafkaConfigError:
        return
    loop = asyncio.get_running_loop()
    began = loop.time()
    try:
        with pytest.raises(KafkaError) as info:
            async with asyncio.timeout(15):
                await p.start()
        # a timeout ("closed by the peer" for 8 s) does not say what is wrong
        assert not isinstance(info.value, KafkaTimeoutError), info.value
        assert loop.time() - began < 5
    finally:
        await p.stop()


async def test_a_transaction_timeout_above_the_brokers_maximum_fails_start_typed(
    kafka_any: Any,
) -> None:
    """transaction.max.timeout.ms is 900000 by default: start() raises
    InvalidTransactionTimeoutError quickly, and the producer is unusable, not hung."""
    p = txn_producer(kafka_any, transaction_timeout_ms=900_001)
    with pytest.raises(InvalidTransactionTimeoutError):
        async with asyncio.timeout(15):
            await p.start()
    with pytest.raises(IllegalStateError):
        p.begin_transaction()
    async with asyncio.timeout(5):
        await p.stop()
    # the same id with a valid timeout works right after
    async with txn_producer(kafka_any, transaction_timeout_ms=900_000) as q:
        async with asyncio.timeout(15), q.transaction():
            pass


def bad_offsets(t: str) -> list[Any]:
    return [
        None,
        5,
        "topic",
        {(t, "0"): 5},
        {(5, 0): 1},
        {(t, 0, 1): 1},
        {TopicPartition(t, -1): 1},
        {TopicPartition(t, 1 << 31): 1},
        {TopicPartition(t, 0): -1},
        {TopicPartition(t, 0): 1 << 63},
        {TopicPartition(t, 0): 1.5},
        {TopicPartition(t, 0): "7"},
        {TopicPartition(t, 0): OffsetAndMetadata(1, 5)},  # type: ignore[arg-type]
        {TopicPartition(t, 0): OffsetAndMetadata(1, b"meta")},  # type: ignore[arg-type]
        {TopicPartition(t, 0): OffsetAndMetadata(1, "", "x")},  # type: ignore[arg-type]
    ]


BAD_GROUPS: list[Any] = [
    None,
    5,
    "",
    ConsumerGroupMetadata(5),  # type: ignore[arg-type]
    ConsumerGroupMetadata("g", "1"),  # type: ignore[arg-type]
    ConsumerGroupMetadata("g", 1, None),  # type: ignore[arg-type]
    ConsumerGroupMetadata("g", 1 << 31, "m"),
    ConsumerGroupMetadata("g", 1, "m", 7),  # type: ignore[arg-type]
]


async def test_bad_offsets_or_group_metadata_fail_typed_and_leave_the_transaction_usable(
    kafka: Any, topic_name: str
) -> None:
    """Every malformed argument is refused before anything is sent, quickly, with a
    typed error that names the problem (not struct.error, AttributeError, nor a
    broker error retried for max_block_ms): the transaction still commits."""
    await create_topic(kafka.bootstrap_servers, topic_name)
    good_tp = {TopicPartition(topic_name, 0): 1}
    good_group = ConsumerGroupMetadata(f"{topic_name}-g")
    cases = [(o, good_group) for o in bad_offsets(topic_name)]
    cases += [(good_tp, g) for g in BAD_GROUPS]
    wrong: list[str] = []
    kept: list[bytes] = []
    async with txn_producer(kafka, max_block_ms=3_000) as p:
        loop = asyncio.get_running_loop()
        for n, (offsets, group) in enumerate(cases):
            what = f"offsets={offsets!r} group={group!r}"
            await p.begin_transaction()
            await p.send(topic_name, b"kept-%d" % n)
            began = loop.time()
            try:
                async with asyncio.timeout(10):
                    await p.send_offsets_to_transaction(offsets, group)
                wrong.append(f"{what}: accepted")
            except (KafkaConfigError, TypeError, ValueError) as exc:
                if isinstance(exc, KafkaError) and not isinstance(exc, KafkaConfigError):
                    wrong.append(f"{what}: {type(exc).__name__}: {exc}")
                elif loop.time() - began > 1:
                    wrong.append(f"{what}: took {loop.time() - began:.1f} s")
            except Exception as exc:
                wrong.append(f"{what}: {type(exc).__name__}: {exc}")
            try:
                async with asyncio.timeout(15):
                    await p.commit_transaction()
                kept.append(b"kept-%d" % n)
            except KafkaError as exc:
                wrong.append(f"{what}: poisoned the transaction: {exc!r}")
                await p.abort_transaction()
    assert not wrong, "\n".join(wrong)
    assert await visible(kafka, topic_name) == kept


# -- wrong orders ----------------------------------------------------------------------


async def test_calls_in_the_wrong_order_fail_typed_and_the_producer_goes_on(
    kafka_any: Any, topic_name: str
) -> None:
    kafka = kafka_any
    await create_topic(kafka.bootstrap_servers, topic_name)
    async with txn_producer(kafka) as p, asyncio.timeout(60):
        # begin inside transaction(): refused, the block aborts
        with pytest.raises(IllegalStateError):
            async with p.transaction():
                await p.send_and_wait(topic_name, b"a1")
                await p.begin_transaction()
        # nested transaction(): refused, the outer block aborts
        with pytest.raises(IllegalStateError):
            async with p.transaction():
                await p.send_and_wait(topic_name, b"a2")
                async with p.transaction():
                    await p.send(topic_name, b"a3")
        # abort twice, commit after abort
        await p.begin_transaction()
        await p.send_and_wait(topic_name, b"a4")
        await p.abort_transaction()
        with pytest.raises(IllegalStateError):
            await p.abort_transaction()
        with pytest.raises(IllegalStateError):
            await p.commit_transaction()
        with pytest.raises(IllegalStateError):
            await p.send_offsets_to_transaction(
                {TopicPartition(topic_name, 0): 1}, f"{topic_name}-g"
            )
        async with p.transaction():
            await p.send(topic_name, b"ok")
    assert await visible(kafka, topic_name) == [b"ok"]


async def test_a_transaction_block_cancelled_by_a_timeout_aborts_and_the_producer_goes_on(
    kafka_any: Any, topic_name: str
) -> None:
    kafka = kafka_any
    await create_topic(kafka.bootstrap_servers, topic_name)
    async with txn_producer(kafka) as p:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(1.0), p.transaction():
                await p.send_and_wait(topic_name, b"timed-out")
                await asyncio.sleep(10)
        async with asyncio.timeout(20), p.transaction():
            await p.send(topic_name, b"next")
    assert await visible(kafka, topic_name) == [b"next"]


async def test_stop_inside_a_transaction_block_aborts_it_and_the_block_fails_typed(
    kafka: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    p = txn_producer(kafka)
    await p.start()
    with pytest.raises(IllegalStateError):
        async with asyncio.timeout(20), p.transaction():
            await p.send_and_wait(topic_name, b"never")
            await p.stop()
    async with txn_producer(kafka) as q, q.transaction():
        await q.send(topic_name, b"after")
    assert await visible(kafka, topic_name) == [b"after"]


async def test_a_commit_started_from_a_delivery_callback_races_sends_consistently(
    kafka_any: Any, topic_name: str
) -> None:
    """Sends keep coming while a commit (started from a done callback) runs: each send
    either raises IllegalStateError or its record is delivered and committed exactly
    once; no handle hangs, nothing refused is visible."""
    kafka = kafka_any
    await create_topic(kafka.bootstrap_servers, topic_name)
    committed: list[bytes] = []
    async with txn_producer(kafka) as p, asyncio.timeout(40):
        await p.begin_transaction()
        commits: list[asyncio.Task[None]] = []
        first = await p.send(topic_name, b"v-000")
        first.add_done_callback(
            lambda _: commits.append(asyncio.ensure_future(p.commit_transaction()))
        )
        handles = [(b"v-000", first)]
        for i in range(1, 400):
            value = b"v-%03d" % i
            try:
                handles.append((value, await p.send(topic_name, value)))
            except IllegalStateError:
                break
            await asyncio.sleep(0.002)
        assert commits, "the callback never ran"
        await commits[0]
        for value, handle in handles:
            await handle  # accepted before the commit began: delivered
            committed.append(value)
    assert await visible(kafka, topic_name) == committed


async def test_a_send_waiting_across_an_abort_does_not_land_in_the_next_transaction(
    kafka_any: Any, topic_name: str
) -> None:
    """A send() called in transaction 1 still waits for its topic's metadata when
    transaction 1 is aborted and transaction 2 begins: the record is of the aborted
    transaction, so the send must fail (TransactionAbortedError/IllegalStateError);
    it must never be committed by transaction 2."""
    kafka = kafka_any
    await create_topic(kafka.bootstrap_servers, topic_name)
    other = f"{topic_name}-late"
    await create_topic(kafka.bootstrap_servers, other)
    async with txn_producer(kafka) as p, asyncio.timeout(40):
        await p.begin_transaction()
        late = await p.send(other, b"of-aborted-txn")  # waits for the metadata of `other`
        assert not late.done()
        await p.abort_transaction()
        await p.begin_transaction()
        await p.send(topic_name, b"txn-2")
        outcome: BaseException | None = None
        try:
            await late
        except KafkaError as exc:
            outcome = exc
        await p.commit_transaction()
    assert await visible(kafka, other) == [], f"the aborted send's outcome: {outcome!r}"
    assert outcome is not None


# -- records that cannot be sent -------------------------------------------------------


async def test_a_record_too_large_fails_alone_and_the_transaction_commits(
    kafka_any: Any, topic_name: str
) -> None:
    kafka = kafka_any
    await create_topic(kafka.bootstrap_servers, topic_name)
    async with txn_producer(kafka, max_request_size=10_000) as p, asyncio.timeout(30):
        async with p.transaction():
            await p.send(topic_name, b"before")
            big = await p.send(topic_name, b"x" * 20_000)
            with pytest.raises(RecordTooLargeError):
                await big
            with pytest.raises(RecordTooLargeError):
                await p.send_batch(topic_name, [b"in-batch", b"y" * 20_000])
            await p.send(topic_name, b"after")
    assert await visible(kafka, topic_name) == [b"before", b"after"]


async def test_a_record_the_broker_refuses_fails_the_transaction_typed(
    kafka_any: Any, topic_name: str
) -> None:
    """The topic's max.message.bytes is below the record (the client cannot know):
    the broker refuses the batch, the commit raises RecordTooLargeError, the abort
    works, nothing of that transaction is visible and the producer goes on."""
    kafka = kafka_any
    await create_topic(kafka.bootstrap_servers, topic_name, configs={"max.message.bytes": "2000"})
    async with txn_producer(kafka) as p, asyncio.timeout(40):
        await p.begin_transaction()
        small = await p.send(topic_name, b"small", partition=0)
        await p.flush()
        await small
        big = await p.send(topic_name, b"z" * 5000, partition=0)
        with pytest.raises(RecordTooLargeError):
            await p.commit_transaction()
        with pytest.raises(RecordTooLargeError):
            await big
        await p.abort_transaction()
        async with p.transaction():
            await p.send(topic_name, b"next")
    assert await visible(kafka, topic_name) == [b"next"]


async def test_an_invalid_topic_fails_its_send_alone(kafka: Any, topic_name: str) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    async with txn_producer(kafka) as p, asyncio.timeout(30):
        async with p.transaction():
            await p.send(topic_name, b"one")
            with pytest.raises(InvalidTopicError):
                await p.send("bad topic name!", b"x")
            await p.send(topic_name, b"two")
    assert await visible(kafka, topic_name) == [b"one", b"two"]


async def test_a_topic_deleted_mid_transaction_ends_in_a_typed_error_not_a_hang(
    kafka: Any, topic_name: str
) -> None:
    gone, kept = f"{topic_name}-gone", topic_name
    await create_topic(kafka.bootstrap_servers, gone)
    await create_topic(kafka.bootstrap_servers, kept)
    async with (
        txn_producer(
            kafka, delivery_timeout_ms=8_000, request_timeout_ms=3_000, max_block_ms=5_000
        ) as p,
        asyncio.timeout(60),
    ):
        await p.begin_transaction()
        await p.send_and_wait(gone, b"g1")
        await p.send_and_wait(kept, b"k1")
        async with Admin(bootstrap_servers=kafka.bootstrap_servers) as admin:
            await admin.delete_topics([gone])
        await asyncio.sleep(1)
        committed = False
        try:
            await p.send(gone, b"g2")
            for _ in range(4):
                try:
                    await p.commit_transaction()
                    committed = True
                    break
                except KafkaError as exc:
                    if p._txn is not None and p._txn.state.state.value == "committing":
                        continue  # a timed-out commit: call it again
                    raise exc
        except KafkaError:
            await p.abort_transaction()
        async with p.transaction():
            await p.send(kept, b"k2")
    want = [b"k1", b"k2"] if committed else [b"k2"]
    assert await visible(kafka, kept) == want


# -- zombies, many producers, restarts -------------------------------------------------


async def test_offsets_with_stale_group_metadata_after_a_rebalance_are_refused(
    kafka_any: Any, topic_name: str
) -> None:
    """KIP-447: a member the group moved past cannot commit offsets in a transaction:
    CommitFailedError (abortable), the abort works and nothing is committed."""
    kafka = kafka_any
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=2)
    group = f"{topic_name}-g"
    conf = {
        "bootstrap_servers": kafka.bootstrap_servers,
        "group_id": group,
        "enable_auto_commit": False,
        "session_timeout_ms": 10_000,
        "heartbeat_interval_ms": 300,
    }
    async with asyncio.timeout(60), Consumer(topic_name, **conf) as c1:
        while c1.group_metadata().generation_id < 0:
            await c1.getmany(timeout_ms=200)
        stale = c1.group_metadata()
        async with Consumer(topic_name, **conf) as c2:
            while (
                c2.group_metadata().generation_id <= stale.generation_id
                or c1.group_metadata().generation_id <= stale.generation_id
            ):
                await asyncio.gather(c1.getmany(timeout_ms=200), c2.getmany(timeout_ms=200))
            async with txn_producer(kafka) as p:
                await p.begin_transaction()
                await p.send(topic_name, b"zombie-out", partition=0)
                with pytest.raises(CommitFailedError):
                    await p.send_offsets_to_transaction({TopicPartition(topic_name, 0): 1}, stale)
                with pytest.raises(KafkaError):
                    await p.commit_transaction()
                await p.abort_transaction()
                async with p.transaction():
                    await p.send(topic_name, b"fresh", partition=1)
                    await p.send_offsets_to_transaction(
                        {TopicPartition(topic_name, 1): 1}, c1.group_metadata()
                    )
    async with Consumer(bootstrap_servers=kafka.bootstrap_servers, group_id=group) as check:
        assert await check.committed(TopicPartition(topic_name, 0)) is None
    assert await visible(kafka, topic_name, 2) == [b"fresh"]


async def test_many_producers_with_distinct_ids_in_parallel(
    kafka_any: Any, topic_name: str
) -> None:
    kafka = kafka_any
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=3)

    async def one(n: int) -> list[bytes]:
        async with txn_producer(kafka) as p:
            await p.begin_transaction()
            for i in range(5):
                await p.send(topic_name, b"abort-%d-%d" % (n, i))
            await p.flush()
            await p.abort_transaction()
            async with p.transaction():
                for i in range(5):
                    await p.send(topic_name, b"ok-%d-%d" % (n, i))
        return [b"ok-%d-%d" % (n, i) for i in range(5)]

    async with asyncio.timeout(90):
        wanted = [v for vs in await asyncio.gather(*(one(n) for n in range(6))) for v in vs]
    assert sorted(await visible(kafka, topic_name, 3)) == sorted(wanted)


async def test_a_producer_restarted_with_the_same_id_many_times(
    kafka_any: Any, topic_name: str
) -> None:
    """Each incarnation fences the previous one, which was left with a flushed open
    transaction: that transaction is aborted, the previous one's stop() does not hang,
    and exactly the committed records are visible, once each."""
    kafka = kafka_any
    await create_topic(kafka.bootstrap_servers, topic_name)
    txn_id = f"restart-{uuid.uuid4().hex[:8]}"
    wanted: list[bytes] = []
    previous: Producer | None = None
    async with asyncio.timeout(120):
        for n in range(6):
            p = txn_producer(kafka, txn_id)
            await p.start()
            if previous is not None:
                await asyncio.wait_for(previous.stop(), 15)
            async with p.transaction():
                await p.send(topic_name, b"ok-%d" % n)
            wanted.append(b"ok-%d" % n)
            await p.begin_transaction()
            await p.send_and_wait(topic_name, b"open-%d" % n)  # left open for the next
            previous = p
        assert previous is not None
        successor = txn_producer(kafka, txn_id)
        await successor.start()
        await asyncio.wait_for(previous.stop(), 15)
        await successor.stop()
    assert await visible(kafka, topic_name) == wanted


# -- the transaction timeout -----------------------------------------------------------


async def test_a_transaction_that_timed_out_fails_typed_and_the_producer_goes_on(
    kafka_any: Any, topic_name: str
) -> None:
    """The coordinator aborts a transaction older than transaction_timeout_ms and bumps
    the epoch. The commit then raises a typed error, quickly, and nothing of that
    transaction is visible. v2 (KIP-890): the coordinator only says the transaction
    is already aborted (INVALID_TXN_STATE), no other producer took the id: that is
    abortable, not fatal, and after abort_transaction() the producer goes on. v1: the
    broker answers PRODUCER_FENCED (fatal, as in Java); a new producer with the same
    id then works at once."""
    kafka = kafka_any
    v1 = kafka.version.startswith("3.")
    await create_topic(kafka.bootstrap_servers, topic_name)
    txn_id = f"hx-to-{uuid.uuid4().hex[:8]}"
    async with txn_producer(kafka, txn_id, transaction_timeout_ms=2_000) as p, asyncio.timeout(60):
        await p.begin_transaction()
        await p.send_and_wait(topic_name, b"timed-out")
        # wait until the coordinator aborted it: the last stable offset moves past it
        async with Consumer(
            bootstrap_servers=kafka.bootstrap_servers, isolation_level="read_committed"
        ) as c:
            tp = TopicPartition(topic_name, 0)
            for _ in range(80):
                if (await c.end_offsets([tp]))[tp] > 0:
                    break
                await asyncio.sleep(0.5)
        loop = asyncio.get_running_loop()
        began = loop.time()
        with pytest.raises(KafkaError) as info:
            await p.commit_transaction()
        assert loop.time() - began < 10
        if v1:
            assert isinstance(info.value, ProducerFencedError), repr(info.value)
        else:
            await p.abort_transaction()
            async with p.transaction():
                await p.send(topic_name, b"next")
    if v1:
        async with txn_producer(kafka, txn_id) as q, asyncio.timeout(20), q.transaction():
            await q.send(topic_name, b"next")
    assert await visible(kafka, topic_name) == [b"next"]


async def test_a_task_cancelled_during_send_offsets_leaves_a_usable_transaction(
    kafka: Any, topic_name: str
) -> None:
    """TxnOffsetCommit's answer is slow and the caller is cancelled: the abort works,
    the producer goes on, and only the offsets of the committed transaction count."""
    await create_topic(kafka.bootstrap_servers, topic_name)
    group = f"{topic_name}-g"
    tp = TopicPartition(topic_name, 0)
    async with FaultProxy(kafka.bootstrap_servers, seed=7) as proxy:
        async with (
            Producer(
                bootstrap_servers=proxy.bootstrap_servers,
                transactional_id=f"hx-cx-{uuid.uuid4().hex[:8]}",
                **FAST,
            ) as p,
            asyncio.timeout(60),
        ):
            await p.begin_transaction()
            await p.send(topic_name, b"aborted")
            for listener in proxy.listeners:
                listener.latency(1500, which="response", apis=[TxnOffsetCommitRequest.API_KEY])
            task = asyncio.ensure_future(p.send_offsets_to_transaction({tp: 5}, group))
            await asyncio.sleep(0.5)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await p.abort_transaction()
            await proxy.heal_all()
            async with p.transaction():
                await p.send(topic_name, b"committed")
                await p.send_offsets_to_transaction({tp: 9}, group)
        proxy.check()
    async with Consumer(bootstrap_servers=kafka.bootstrap_servers, group_id=group) as check:
        assert await check.committed(tp) == 9
    assert await visible(kafka, topic_name) == [b"committed"]
