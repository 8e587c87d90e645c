"""Records sent to a topic whose metadata is not known yet (``producer/pending.py``),
used as a hostile caller would: every handle settles, typed, nothing hangs, no record
is lost, duplicated or reordered, and the buffer memory they held comes back."""

from __future__ import annotations

import asyncio
import gc
import uuid
from typing import Any

import pytest

from aiokproto.errors import IllegalStateError, KafkaError, KafkaTimeoutError, PurgedError
from aiokproto.producer import Producer, wait_delivered
from tests.producer.helpers import FAST, consume, create_topic


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _nothing_held(p: Producer) -> None:
    assert p._acc is not None
    assert (p._reserved, p._acc.used, len(p._pending)) == (0, 0, 0)


async def test_a_sender_failure_fails_the_records_waiting_for_their_topic(kafka: Any) -> None:
    # The sender's loop died (a bug: it fails every buffered record and every later
    # call). A record still waiting for its topic was placed behind it once the topic
    # appeared, and its handle, flush() and a commit waited for ever.
    later = _name("after-fatal")
    async with Producer(
        bootstrap_servers=kafka.bootstrap_servers, allow_auto_create_topics=False, **FAST
    ) as p:
        handle = await p.send(later, b"v")
        assert p._acc is not None and p._sender is not None

        def broken(*_args: Any) -> Any:
            raise RuntimeError("a bug in the drain")

        p._acc.drain = broken  # type: ignore[method-assign]
        p._sender.wake()
        for _ in range(100):
            if p._sender.fatal is not None:
                break
            await asyncio.sleep(0.01)
        assert p._sender.fatal is not None
        await create_topic(kafka.bootstrap_servers, later)
        with pytest.raises(KafkaError, match="sender failed"):
            await asyncio.wait_for(handle, 10)
        await asyncio.wait_for(p.flush(), 10)
        assert p._reserved == 0 and not p._pending


async def test_buffer_memory_held_by_records_waiting_for_a_topic_is_named(kafka: Any) -> None:
    # Records for a topic that never comes hold their buffer memory until they fail
    # (max_block_ms); a send() meanwhile waits for it. Its error said "0 bytes are
    # buffered in 0 batch(es)" and blamed the brokers, and buffer-available-bytes
    # counted their memory as free.
    good = await create_topic(kafka.bootstrap_servers, _name("good"))
    missing = _name("missing")
    async with Producer(
        bootstrap_servers=kafka.bootstrap_servers,
        buffer_memory=3000,
        batch_size=1500,
        allow_auto_create_topics=False,
        **{**FAST, "max_block_ms": 1000},
    ) as p:
        await p.partitions_for(good)
        held = [await p.send(missing, b"x" * 1000) for _ in range(2)]
        # they are not available to others (the gauge said all 3000 bytes were)
        assert p.metrics().value("buffer-available-bytes") < 1000
        with pytest.raises(KafkaTimeoutError, match=f"waiting for the metadata of .*{missing}"):
            await p.send(good, b"y" * 1000)
        for handle in held:
            with pytest.raises(KafkaTimeoutError, match=missing):
                await handle
        _nothing_held(p)  # their memory came back
        assert p.metrics().value("buffer-available-bytes") == 3000
        assert (await (await p.send(good, b"y" * 1000))).offset >= 0


async def test_stop_fails_a_record_for_a_missing_topic_saying_so(kafka: Any) -> None:
    # It said "the Producer is stopped; create a new one to send" for a record sent
    # while it was running (the type stays: test_stop_while_a_send_waits_for_metadata...)
    missing = _name("missing")
    seen: list[Any] = []
    p = Producer(
        bootstrap_servers=kafka.bootstrap_servers,
        allow_auto_create_topics=False,
        **{**FAST, "max_block_ms": 30_000},
    )
    await p.start()
    handle = await p.send(missing, b"v", on_delivery=lambda e, m: seen.append(e))
    await p.stop(timeout_ms=5000)
    with pytest.raises(IllegalStateError, match=f"stopped before topic '{missing}'"):
        await handle
    await asyncio.sleep(0)
    assert len(seen) == 1 and isinstance(seen[0], IllegalStateError)
    assert p._reserved == 0


async def test_every_path_to_a_new_topic_keeps_send_order_and_offsets(kafka: Any) -> None:
    # keyless, keyed, headers with on_delivery, explicit partitions, send_batch and a
    # built batch, all while the topic is pending, with small batches: each handle's
    # offset is where a consumer finds its value, and each partition is in send order
    topic = await create_topic(kafka.bootstrap_servers, _name("mixed"), 3)
    reports: list[Any] = []
    sent: list[tuple[bytes, Any]] = []
    async with Producer(
        bootstrap_servers=kafka.bootstrap_servers, batch_size=300, linger_ms=20, **FAST
    ) as p:
        for i in range(60):
            value = b"v%d" % i
            if i % 5 == 0:
                handle = await p.send(topic, value)
            elif i % 5 == 1:
                handle = await p.send(topic, value, key=b"k%d" % (i % 3))
            elif i % 5 == 2:
                handle = await p.send(
                    topic, value, headers=[("h", b"x")], on_delivery=lambda e, m: reports.append(e)
                )
            elif i % 5 == 3:
                handle = await p.send(topic, value, partition=i % 3)
            else:
                handle = await p.send(topic, value, key=b"z", partition=2)
            sent.append((value, handle))
        assert len(p) == 60 and p._pending  # still waiting for the metadata
        many = await p.send_batch(topic, [b"b1", b"b2"], keys=[b"k1", b"k2"])
        built = p.create_batch()
        built.append(key=None, value=b"built", timestamp=None)
        one = await p.send_batch(built, topic, partition=0)
        sent.append((b"after", await p.send(topic, b"after", key=b"k0")))
        placed = [(value, await handle) for value, handle in sent]
        placed += zip((b"b1", b"b2"), await many, strict=True)
        placed.append((b"built", await one))
        _nothing_held(p)
    assert reports == [None] * 12
    read = consume(kafka.bootstrap_servers, topic, len(placed), 3)
    found = {(m.partition(), m.offset()): m.value() for m in read}
    assert len(found) == len(placed)  # none lost, none twice
    for value, meta in placed:
        assert found[(meta.partition, meta.offset)] == value
    order = [value for value, _ in sent]
    for part in range(3):
        mine = [found[at] for at in sorted(found) if at[0] == part and found[at] in order]
        assert mine == sorted(mine, key=order.index)


async def test_stop_while_tasks_send_to_new_topics_settles_every_handle(
    kafka: Any, caplog: Any
) -> None:
    p = Producer(bootstrap_servers=kafka.bootstrap_servers, **FAST)
    await p.start()
    outcomes: list[Any] = []

    async def sender(i: int) -> None:
        topic = _name(f"stop-{i}")
        handles = []
        try:
            for j in range(5):
                handles.append(await p.send(topic, b"%d" % j))
                await asyncio.sleep(0)
        except IllegalStateError:
            pass  # stopped: nothing buffered for this call
        for handle in handles:
            try:
                outcomes.append(await handle)
            except KafkaError as exc:
                outcomes.append(exc)

    tasks = [asyncio.create_task(sender(i)) for i in range(20)]
    await asyncio.sleep(0.005)
    await asyncio.wait_for(p.stop(timeout_ms=10_000), 30)
    await asyncio.wait_for(asyncio.gather(*tasks), 30)
    assert outcomes and all(
        isinstance(o, KafkaError) or o.offset >= 0 for o in outcomes
    ), {type(o).__name__ for o in outcomes}
    assert (p._reserved, len(p)) == (0, 0)
    gc.collect()
    assert "never retrieved" not in caplog.text


async def test_purge_flush_and_cancelled_waits_on_pending_records(kafka: Any) -> None:
    topic = await create_topic(kafka.bootstrap_servers, _name("purge"), 2)
    async with Producer(bootstrap_servers=kafka.bootstrap_servers, **FAST) as p:
        dropped = await p.send(topic, b"dropped")
        assert p.purge() == 1
        with pytest.raises(PurgedError):
            await dropped
        first = await p.send(topic, b"a", key=b"k")
        second = await p.send(topic, b"b", key=b"k")

        async def awaits() -> Any:
            return await first

        waiter = asyncio.create_task(awaits())
        await asyncio.sleep(0)
        waiter.cancel()  # cancels the waiting task, not the record
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(second, 0.0001)  # cancels the handle, not the record
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(p.flush(), 0.0001)
        third = await p.send(topic, b"c", key=b"k")
        await p.flush()
        assert second.cancelled() and not first.cancelled()
        assert (await third).offset == (await first).offset + 2
        _nothing_held(p)
    read = consume(kafka.bootstrap_servers, topic, 3, 2)
    assert [m.value() for m in read] == [b"a", b"b", b"c"]


async def test_a_placed_record_is_reported_when_its_own_batch_is(kafka: Any) -> None:
    # Records sent before their topic's metadata was known: each handle is done, and
    # its on_delivery runs, when the record's own batch is answered. Before, every
    # handle of the burst waited for the last of its batches: a full batch sent at
    # once reported only when another partition's batch ended its linger (2.03 s
    # with linger_ms=2000; here 60 s, past the wait below).
    topic = await create_topic(kafka.bootstrap_servers, _name("own-batch"), partitions=2)
    reports: list[tuple[KafkaError | None, int]] = []
    async with Producer(
        bootstrap_servers=kafka.bootstrap_servers, batch_size=300, linger_ms=60_000, **FAST
    ) as p:
        lingering = await p.send(topic, b"x" * 100, partition=1)
        first = await p.send(
            topic,
            b"a" * 100,
            partition=0,
            on_delivery=lambda e, m: reports.append((e, -1 if m is None else m.offset)),
        )
        rest = [await p.send(topic, b"b" * 100, partition=0) for _ in range(3)]
        meta = await asyncio.wait_for(first, 15)  # its batch filled: sent at once
        assert (meta.partition, meta.offset) == (0, 0)
        await asyncio.wait_for(wait_delivered([first]), 15)  # so does this
        await asyncio.sleep(0)
        assert reports == [(None, 0)]
        assert not lingering.done()
        await asyncio.wait_for(p.flush(), 15)
        assert (await lingering).partition == 1
        assert [(await h).offset for h in rest] == [1, 2, 3]
        _nothing_held(p)
