"""What confluent-kafka users reach for, against a real broker: ``send(...,
on_delivery=)``, ``len(producer)``, ``purge()``; and delivery handles as asyncio
futures (``gather`` over them makes no Task, cancelling one leaves the records be)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

import pytest

from aiokproto.errors import PurgedError, RecordTooLargeError
from aiokproto.producer import Producer, RecordMetadata, wait_delivered
from tests.producer.helpers import FAST, consume, create_topic

pytest.importorskip("confluent_kafka")  # consume() reads back with librdkafka

Report = tuple[BaseException | None, RecordMetadata | None]


def producer(kafka: Any, **options: Any) -> Producer:
    return Producer(bootstrap_servers=kafka.bootstrap_servers, **{**FAST, **options})


async def test_on_delivery_reports_each_record_and_survives_a_raising_callback(
    kafka: Any, topic_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    reports: list[Report] = []

    def report(err: BaseException | None, meta: RecordMetadata | None) -> None:
        reports.append((err, meta))

    def bad(err: BaseException | None, meta: RecordMetadata | None) -> None:
        raise ValueError("user bug")

    async with producer(kafka, max_request_size=2_000) as p:
        with caplog.at_level(logging.ERROR, logger="aiokproto.producer.delivery"):
            for i in range(5):
                await p.send(topic_name, b"v%d" % i, on_delivery=report)
                await p.send(topic_name, b"bad", on_delivery=bad)
            big = await p.send(topic_name, b"x" * 5_000, on_delivery=report)
            with pytest.raises(TypeError, match="callable"):
                await p.send(topic_name, b"v", on_delivery="not callable")  # type: ignore[arg-type]
            await p.flush()
            await asyncio.sleep(0)
            after = await p.send(topic_name, b"after", on_delivery=report)
            assert after.cancel()  # stops its waiters: not the record, nor its report
            await p.flush()
            await asyncio.sleep(0)
    assert big.batch is None  # refused before buffering: reported all the same
    ok = [m for e, m in reports if e is None]
    assert [m.offset for m in ok if m is not None] == [0, 2, 4, 6, 8, 10]
    assert all(isinstance(m, RecordMetadata) and m.topic == topic_name for m in ok)
    (failed,) = [(e, m) for e, m in reports if e is not None]
    assert isinstance(failed[0], RecordTooLargeError) and failed[1] is None
    raised = [r for r in caplog.records if "on_delivery callback" in r.message]
    assert len(raised) == 5 and all(r.exc_info for r in raised)


async def test_len_counts_undelivered_records_and_a_producer_is_always_truthy(
    kafka: Any, topic_name: str
) -> None:
    p = producer(kafka, linger_ms=60_000)
    assert len(p) == 0 and p
    async with p:
        await p.partitions_for(topic_name)
        for i in range(10):
            await p.send(topic_name, b"v%d" % i)
        assert len(p) == 10 and "undelivered=10" in repr(p)
        await p.flush()
        assert len(p) == 0 and bool(p) is True


async def test_purge_fails_unsent_records_and_releases_a_waiting_flush(
    kafka: Any, topic_name: str
) -> None:
    reports: list[Report] = []
    async with producer(kafka, linger_ms=60_000) as p:
        await p.partitions_for(topic_name)
        handles = [
            await p.send(topic_name, b"old%d" % i, on_delivery=lambda e, m: reports.append((e, m)))
            for i in range(10)
        ]
        flushing = asyncio.ensure_future(p.flush())
        await asyncio.sleep(0)  # flush() waits for the batch...
        assert p.purge() == 10  # ...which is still lingering: never sent, so dropped
        await asyncio.wait_for(flushing, 5)  # and flush() is released at once
        assert len(p) == 0 and p.purge() == 0
        for h in handles:
            with pytest.raises(PurgedError):
                await h
        with pytest.raises(PurgedError):
            await wait_delivered(handles)
        await asyncio.sleep(0)
        assert len(reports) == 10 and all(isinstance(e, PurgedError) for e, _ in reports)
        new = [await p.send(topic_name, b"new%d" % i) for i in range(3)]  # it goes on
        await p.flush()
        assert [(await h).offset for h in new] == [0, 1, 2]
    got = await asyncio.to_thread(consume, kafka.bootstrap_servers, topic_name, 3)
    assert [m.value() for m in got] == [b"new0", b"new1", b"new2"]
    assert producer(kafka).purge() == 0  # never started: nothing to drop


async def test_purge_in_a_transaction_leaves_it_to_abort(kafka: Any, topic_name: str) -> None:
    """purge() in a transaction drops its unsent records, so the transaction cannot
    commit them: commit_transaction() raises, abort_transaction() ends it, and the
    next transaction works (confluent-kafka likewise requires an abort)."""
    await create_topic(kafka.bootstrap_servers, topic_name)
    txn = f"tx-{uuid.uuid4().hex[:10]}"
    async with producer(kafka, transactional_id=txn, linger_ms=60_000) as p:
        await p.begin_transaction()
        handles = [await p.send(topic_name, b"dropped%d" % i) for i in range(3)]
        assert p.purge() == 3
        with pytest.raises(Exception, match="purge"):
            await p.commit_transaction()
        await p.abort_transaction()
        for h in handles:
            with pytest.raises(PurgedError):
                await h
        async with p.transaction():
            await p.send(topic_name, b"kept")
    got = await asyncio.to_thread(consume, kafka.bootstrap_servers, topic_name, 1)
    assert [m.value() for m in got] == [b"kept"]


async def test_gather_over_real_handles_makes_no_task_and_a_cancel_drops_no_record(
    kafka: Any, topic_name: str
) -> None:
    loop = asyncio.get_running_loop()
    made = 0

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kw: Any) -> asyncio.Task[Any]:
        nonlocal made
        made += 1
        return asyncio.Task(coro, loop=loop, **kw)

    async with producer(kafka, linger_ms=60_000) as p:
        await p.partitions_for(topic_name)
        first = [await p.send(topic_name, b"a%d" % i) for i in range(100)]
        waiting = asyncio.ensure_future(asyncio.gather(*first))
        await asyncio.sleep(0.05)
        waiting.cancel()  # the records linger: the gather is cancelled, not them
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert all(h.cancelled() for h in first) and len(p) == 100
        loop.set_task_factory(factory)  # type: ignore[arg-type]
        try:
            second = [await p.send(topic_name, b"b%d" % i) for i in range(20_000)]
            gathered = asyncio.gather(*second)
            await p.flush()
            metas = await gathered
        finally:
            loop.set_task_factory(None)
        assert made < 100  # the producer's own tasks (its sender...), none per handle
        await wait_delivered(first)  # cancelled handles, delivered records
    assert [m.offset for m in metas] == list(range(100, 20_100))
    got = await asyncio.to_thread(consume, kafka.bootstrap_servers, topic_name, 20_100)
    assert len(got) == 20_100
