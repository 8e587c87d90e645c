"""PendingTopic: records sent before their topic's metadata was known keep their
handles once placed on real batches (issue 33)."""

from __future__ import annotations

import asyncio

import pytest

from aiokproto.errors import KafkaError, KafkaTimeoutError, UnknownTopicOrPartitionError
from aiokproto.producer.batch import BatchResult, ProducerBatch
from aiokproto.producer.delivery import OnDelivery, wait_delivered
from aiokproto.producer.pending import PendingTopic, detached_batch, failed_place


def _batch(partition: int) -> ProducerBatch:
    return detached_batch("t", partition, asyncio.get_running_loop())


async def test_handles_read_their_own_batch_once_placed() -> None:
    pt = PendingTopic("t", asyncio.get_running_loop())
    a = pt.add(1000, b"k0", b"v0", None, 50, None, 0)
    b = pt.add(1001, None, b"value", None, 60, None, 0)
    c = pt.add(1002, b"k2", None, None, 40, 3, 0)
    assert len(pt) == 3 and pt.charge == 150
    assert not a.done()
    p0, p3 = _batch(0), _batch(3)
    pt.settle([(p0, 5), (p0, 6), (p3, 0)])
    assert not a.done()  # placed, not delivered
    p0.future.set_result(BatchResult(100, -1, 0))
    await asyncio.sleep(0)
    # each record's fate is its own batch's: a and b are delivered, c still waits
    assert a.done() and b.done() and not c.done()
    assert (await a).offset == 105 and repr(a) == "<DeliveryFuture t[0] done>"
    assert not pt.parent.future.done()  # what wait_delivered waits for: every record
    p3.future.set_result(BatchResult(7, -1, 0))
    await asyncio.sleep(0)
    ma, mb, mc = await a, await b, await c
    assert (ma.partition, ma.offset, ma.timestamp) == (0, 105, 1000)
    assert (mb.partition, mb.offset, mb.serialized_key_size) == (0, 106, -1)
    assert (mc.partition, mc.offset, mc.serialized_value_size) == (3, 7, -1)
    assert mb.topic == "t"


async def test_a_record_that_could_not_be_placed_fails_alone() -> None:
    pt = PendingTopic("t", asyncio.get_running_loop())
    good = pt.add(1, None, b"v", None, 10, None, 0)
    bad = pt.add(2, None, b"v", None, 10, 9, 0)
    p1 = _batch(1)
    loop = asyncio.get_running_loop()
    pt.settle([(p1, 0), failed_place("t", UnknownTopicOrPartitionError("no 9"), loop)])
    p1.future.set_result(BatchResult(4, -1, 0))
    await asyncio.sleep(0)
    assert (await good).offset == 4
    with pytest.raises(UnknownTopicOrPartitionError, match="no 9"):
        await bad
    assert pt.parent.future.exception() is not None  # the first failed record's error


async def test_fail_fails_every_handle_and_callbacks_see_it() -> None:
    pt = PendingTopic("t", asyncio.get_running_loop())
    seen: list[tuple[KafkaError | None, object]] = []
    handles = [pt.add(i, None, b"v", None, 10, None, 0) for i in range(3)]
    handles[1].add_done_callback(OnDelivery(lambda e, m: seen.append((e, m))))
    pt.fail(KafkaTimeoutError("topic 't' not present in metadata"))
    await asyncio.sleep(0)
    for h in handles:
        with pytest.raises(KafkaTimeoutError):
            await h
    assert len(seen) == 1 and isinstance(seen[0][0], KafkaTimeoutError) and seen[0][1] is None


async def test_callbacks_of_placed_records_get_their_partition() -> None:
    pt = PendingTopic("t", asyncio.get_running_loop())
    seen: list[tuple[int, int]] = []
    for i in range(4):
        h = pt.add(i, bytes([i]), b"v", None, 10, None, 0)
        h.add_done_callback(OnDelivery(lambda e, m: seen.append((m.partition, m.offset))))
    batches = [_batch(p) for p in range(2)]
    pt.settle([(batches[i % 2], i // 2) for i in range(4)])
    for p, b in enumerate(batches):
        b.future.set_result(BatchResult(10 * p, -1, 0))
    for _ in range(3):
        await asyncio.sleep(0)
    assert seen == [(0, 0), (0, 1), (1, 10), (1, 11)]  # as their batches resolved


async def test_settle_on_batches_already_done_resolves_at_once() -> None:
    pt = PendingTopic("t", asyncio.get_running_loop())
    h = pt.add(1, None, b"v", None, 10, None, 0)
    b = _batch(2)
    b.future.set_result(BatchResult(3, -1, 0))
    pt.settle([(b, 0)])
    assert pt.parent.future.done()
    assert (await h).offset == 3


async def test_a_cancelled_handle_leaves_the_others() -> None:
    pt = PendingTopic("t", asyncio.get_running_loop())
    first, second = (pt.add(i, None, b"v", None, 10, None, 0) for i in range(2))
    assert first.cancel()
    assert first.cancelled() and not second.done()
    b = _batch(0)
    pt.settle([(b, 0), (b, 1)])
    b.future.set_result(BatchResult(0, -1, 0))
    await asyncio.sleep(0)
    assert (await second).offset == 1
    with pytest.raises(asyncio.CancelledError):
        await first


async def test_a_placed_record_is_done_when_its_own_batch_is() -> None:
    """A record is not held back by the topic's other records: an awaiting task, a
    callback added before or after placing, gather and wait_for see its batch alone
    (before, every handle waited for the last batch holding one of them: a lingering
    partition, or one whose leader was down, up to delivery_timeout_ms)."""
    pt = PendingTopic("t", asyncio.get_running_loop())
    fast, slow = pt.add(1, None, b"v", None, 10, 0, 0), pt.add(2, None, b"v", None, 10, 1, 0)
    seen: list[str] = []
    fast.add_done_callback(lambda h: seen.append(f"before {h.result().offset}"))
    fast.add_done_callback(OnDelivery(lambda e, m: seen.append(f"on_delivery {m.offset}")))
    slow.add_done_callback(lambda h: seen.append("slow"))
    awaiting = asyncio.ensure_future(asyncio.wait_for(fast, 5))
    gathered = asyncio.ensure_future(asyncio.gather(fast))
    await asyncio.sleep(0)
    p0, p1 = _batch(0), _batch(1)
    pt.settle([(p0, 3), (p1, 0)])
    fast.add_done_callback(lambda h: seen.append(f"after {h.result().offset}"))
    p0.future.set_result(BatchResult(40, -1, 0))
    assert (await awaiting).offset == 43
    assert [m.offset for m in await gathered] == [43]
    await asyncio.sleep(0)
    assert seen == ["before 43", "on_delivery 43", "after 43"]
    assert not slow.done() and slow.batch is pt.parent
    with pytest.raises(asyncio.InvalidStateError):
        slow.result()
    with pytest.raises(asyncio.InvalidStateError):
        slow.exception()
    p1.future.set_exception(KafkaTimeoutError("expired"))
    with pytest.raises(KafkaTimeoutError):
        await slow
    await asyncio.sleep(0)
    assert seen[-1] == "slow"
    fast.add_done_callback(lambda h: seen.append("late"))  # done: at once
    await asyncio.sleep(0)
    assert seen[-1] == "late" and len(seen) == 5  # each callback ran once


async def test_cancel_and_remove_after_placing_touch_only_that_record() -> None:
    pt = PendingTopic("t", asyncio.get_running_loop())
    a, b, c = (pt.add(i, None, b"v", None, 10, 0, 0) for i in range(3))
    seen: list[str] = []
    a.add_done_callback(lambda h: seen.append("a cancelled" if h.cancelled() else "a"))
    a.add_done_callback(OnDelivery(lambda e, m: seen.append(f"a delivered {m.offset}")))

    def removed(_h: object) -> None:
        seen.append("removed ran")

    b.add_done_callback(removed)
    c.add_done_callback(lambda h: seen.append(f"c {h.result().offset}"))
    p0 = _batch(0)
    pt.settle([(p0, 0), (p0, 1), (p0, 2)])
    assert b.remove_done_callback(removed) == 1
    assert a.cancel("not needed") and a.cancelled() and a.done()
    await asyncio.sleep(0)
    assert seen == ["a cancelled"]  # at once; its delivery report still waits
    p0.future.set_result(BatchResult(9, -1, 0))
    await asyncio.sleep(0)
    assert seen == ["a cancelled", "a delivered 9", "c 11"]
    assert (await b).offset == 10 and not a.cancel()
    with pytest.raises(asyncio.CancelledError, match="not needed"):
        await a


async def test_a_raising_callback_of_a_placed_record_leaves_the_others(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pt = PendingTopic("t", asyncio.get_running_loop())
    handles = [pt.add(i, None, b"v", None, 10, 0, 0) for i in range(3)]
    seen: list[int] = []

    def bad(_h: object) -> None:
        raise RuntimeError("user bug")

    def cancelled(_h: object) -> None:
        raise asyncio.CancelledError  # a BaseException: to the loop's handler

    handles[0].add_done_callback(bad)
    handles[0].add_done_callback(cancelled)
    for h in handles:
        h.add_done_callback(lambda h: seen.append(h.result().offset))
    p0 = _batch(0)
    pt.settle([(p0, i) for i in range(3)])
    loop = asyncio.get_running_loop()
    handled: list[BaseException] = []
    loop.set_exception_handler(lambda _loop, context: handled.append(context["exception"]))
    try:
        p0.future.set_result(BatchResult(0, -1, 0))
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(None)
    assert seen == [0, 1, 2]
    assert "a delivery callback raised" in caplog.text
    assert [type(e) for e in handled] == [asyncio.CancelledError]


async def test_wait_delivered_waits_for_the_records_own_batches() -> None:
    """wait_delivered() over placed records waits for their own batches, as awaiting
    them does: it waited for every batch of the topic's first burst (a lingering
    partition, or one whose leader was down, up to delivery_timeout_ms) while
    ``await handle`` of the same record returned at once."""
    pt = PendingTopic("t", asyncio.get_running_loop())
    fast, cancelled, slow = (pt.add(i, None, b"v", None, 10, p, 0) for i, p in enumerate((0, 0, 1)))
    assert cancelled.cancel()
    waiting = asyncio.ensure_future(wait_delivered([fast, cancelled]))
    await asyncio.sleep(0)
    p0, p1 = _batch(0), _batch(1)
    pt.settle([(p0, 0), (p0, 1), (p1, 0)])
    await asyncio.sleep(0)
    assert not waiting.done()
    p0.future.set_result(BatchResult(20, -1, 0))
    await asyncio.wait_for(waiting, 5)  # slow's batch is still open
    assert not slow.done() and (await fast).offset == 20
    failing = asyncio.ensure_future(wait_delivered([slow, fast]))
    p1.future.set_exception(KafkaTimeoutError("expired"))
    with pytest.raises(KafkaTimeoutError):
        await asyncio.wait_for(failing, 5)
    await wait_delivered([fast, cancelled])  # the topic's other record failed, not these


async def test_wait_delivered_over_records_that_never_got_their_topic() -> None:
    pt = PendingTopic("t", asyncio.get_running_loop())
    handles = [pt.add(i, None, b"v", None, 10, None, 0) for i in range(3)]
    handles[0].cancel()
    waiting = asyncio.ensure_future(wait_delivered(handles))
    await asyncio.sleep(0)
    pt.fail(KafkaTimeoutError("topic 't' not present in metadata"))
    with pytest.raises(KafkaTimeoutError, match="not present"):
        await asyncio.wait_for(waiting, 5)
