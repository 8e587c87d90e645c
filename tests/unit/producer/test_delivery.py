"""DeliveryFuture's per-record calls, driven by hand (no sockets). The compiled build
runs them in C (aiokproto._accel.DeliveryHandle) and the pure-Python build in
delivery.py; make test runs this module under both, and both must behave alike."""

from __future__ import annotations

import asyncio
import copy
import gc
import logging
import pickle
import sys
import weakref
from typing import Any

import pytest

from aiokproto import accel
from aiokproto.errors import KafkaError, KafkaTimeoutError, RecordTooLargeError
from aiokproto.producer.batch import BatchResult
from aiokproto.producer.delivery import (
    DeliveryFuture,
    OnDelivery,
    append_to,
    wait_delivered,
)

from .test_accumulator import Rig

OK = BatchResult(100, -1, 0)


def _handles(rig: Rig, n: int) -> list[DeliveryFuture]:
    return [rig.send() for _ in range(n)]


async def test_the_build_in_use_is_the_one_named() -> None:
    base = DeliveryFuture.__mro__[1]
    assert (base.__module__ == "aiokproto._accel") == (accel.native is not None)


async def test_callbacks_run_once_each_in_order_with_equal_handles() -> None:
    rig = Rig()
    handles = _handles(rig, 5)
    got: list[tuple[int, DeliveryFuture]] = []
    for i, h in enumerate(handles):
        assert not h.done()
        with pytest.raises(asyncio.InvalidStateError):
            h.exception()
        h.add_done_callback(lambda back, i=i: got.append((i, back)))
    handles[0].batch.future.set_result(OK)  # type: ignore[union-attr]
    assert got == []  # on the loop, not inside set_result
    await asyncio.sleep(0)
    assert [i for i, _ in got] == [0, 1, 2, 3, 4]
    for i, back in got:
        assert back == handles[i] and hash(back) == hash(handles[i])
        assert back.done() and back.exception() is None
        assert back.result().offset == 100 + i
    await asyncio.sleep(0)
    assert len(got) == 5  # once each


async def test_a_callback_added_between_the_answer_and_the_run_is_called_once() -> None:
    rig = Rig()
    first, second = _handles(rig, 2)
    got: list[int] = []
    first.add_done_callback(lambda h: got.append(h.result().offset))
    first.batch.future.set_result(OK)  # type: ignore[union-attr]
    assert second.done()
    second.add_done_callback(lambda h: got.append(h.result().offset))
    for _ in range(3):
        await asyncio.sleep(0)
    assert got == [100, 101]


async def test_a_callback_added_after_the_run_is_called_on_the_next_turn() -> None:
    rig = Rig()
    (h,) = _handles(rig, 1)
    got: list[int] = []
    h.add_done_callback(lambda back: got.append(1))
    h.batch.future.set_result(OK)  # type: ignore[union-attr]
    await asyncio.sleep(0)
    h.add_done_callback(lambda back: got.append(back.result().offset))
    assert got == [1]
    await asyncio.sleep(0)
    assert got == [1, 100]


async def test_a_callback_that_adds_a_callback_to_its_own_batch() -> None:
    rig = Rig()
    first, second = _handles(rig, 2)
    got: list[str] = []
    first.add_done_callback(
        lambda h: second.add_done_callback(lambda h2: got.append(f"late {h2.result().offset}"))
    )
    second.add_done_callback(lambda h: got.append("second"))
    first.batch.future.set_result(OK)  # type: ignore[union-attr]
    for _ in range(3):
        await asyncio.sleep(0)
    assert got == ["second", "late 101"]


async def test_a_raising_callback_is_logged_and_the_others_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rig = Rig()
    handles = _handles(rig, 3)
    got: list[int] = []

    def bad(h: DeliveryFuture) -> None:
        raise ValueError("user bug")

    handles[0].add_done_callback(lambda h: got.append(0))
    handles[1].add_done_callback(bad)
    handles[2].add_done_callback(lambda h: got.append(2))
    with caplog.at_level(logging.ERROR, logger="aiokproto.producer.delivery"):
        handles[0].batch.future.set_result(OK)  # type: ignore[union-attr]
        await asyncio.sleep(0)
    assert got == [0, 2]
    (entry,) = [r for r in caplog.records if "a delivery callback raised" in r.message]
    assert entry.exc_info is not None and isinstance(entry.exc_info[1], ValueError)
    assert entry.exc_info[2] is not None  # the traceback is kept for the log


async def test_a_failed_batch_reports_its_error_to_every_callback() -> None:
    rig = Rig()
    handles = _handles(rig, 2)
    errors: list[BaseException | None] = []
    for h in handles:
        h.add_done_callback(lambda back: errors.append(back.exception()))
    boom = KafkaTimeoutError("expired")
    handles[0].batch.future.set_exception(boom)  # type: ignore[union-attr]
    await asyncio.sleep(0)
    assert errors == [boom, boom]
    assert handles[1].exception() is boom


async def test_a_record_refused_before_buffering_calls_back_on_the_loop() -> None:
    boom = KafkaTimeoutError("refused")
    h = DeliveryFuture.failed(boom)
    assert h.done() and h.exception() is boom and h.batch is None
    got: list[DeliveryFuture] = []
    h.add_done_callback(got.append)
    assert got == []
    await asyncio.sleep(0)
    assert got == [h]
    with pytest.raises(KafkaTimeoutError):
        await h


async def test_a_cycle_through_a_handle_is_collected() -> None:
    """A handle is seen by the cyclic collector: handle -> batch -> its callbacks ->
    a closure -> the handle again goes away once unreachable."""

    class Marker:
        pass

    rig = Rig()

    def make_cycle() -> weakref.ref[Marker]:
        (h,) = _handles(rig, 1)
        marker = Marker()
        holder: list[Any] = [h, marker]
        h.add_done_callback(holder.append)
        batch = h.batch
        assert batch is not None and batch.callbacks is not None
        rig.acc.incomplete.discard(batch)
        pq = rig.acc.queue("t", 0)
        pq.batches.clear()
        pq.open = None
        return weakref.ref(marker)

    gone = make_cycle()
    gc.collect()
    assert gone() is None


def test_handle_fields_keep_their_values() -> None:
    h = DeliveryFuture(None, 7, 1_700_000_000_123, -1, 100)
    assert (h._delta, h._timestamp, h._ksize, h._vsize, h._batch, h._error) == (
        7,
        1_700_000_000_123,
        -1,
        100,
        None,
        None,
    )


async def test_append_to_gives_the_handle_or_none_when_the_batch_is_full() -> None:
    rig = Rig(batch_size=300)
    (first,) = _handles(rig, 1)
    batch = first.batch
    assert batch is not None
    count = batch.builder.record_count
    h = append_to(DeliveryFuture, batch, 1_700_000_000_001, b"k", b"v" * 100, None, 1, 100)
    assert h is not None and h.batch is batch and h._delta == count
    assert (h._timestamp, h._ksize, h._vsize) == (1_700_000_000_001, 1, 100)
    assert append_to(DeliveryFuture, batch, 0, None, b"v" * 400, None, -1, 400) is None
    with pytest.raises(TypeError):
        append_to(DeliveryFuture, batch, 0, None, "text", None, -1, 4)  # type: ignore[arg-type]
    assert batch.builder.record_count == count + 1  # the refused ones left nothing
    batch.future.set_result(OK)
    assert h.result().offset == 100 + count


async def test_an_exception_before_a_base_exception_is_logged_in_its_turn(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A callback's BaseException (not an Exception) goes to the loop's exception
    handler and the next callback runs, as asyncio runs a callback: what an earlier one
    raised is logged all the same, before the next one runs (review: the compiled loop
    kept errors to log after the loop, and lost them)."""

    class Stop(BaseException):
        pass

    rig = Rig()
    handles = _handles(rig, 3)
    order: list[str] = []

    def bad(h: DeliveryFuture) -> None:
        raise ValueError("user bug")

    def stop(h: DeliveryFuture) -> None:
        order.append(f"stop, logged before: {len(caplog.records)}")
        raise Stop

    handles[0].add_done_callback(bad)
    handles[1].add_done_callback(stop)
    handles[2].add_done_callback(lambda h: order.append("after"))
    loop = asyncio.get_running_loop()
    seen: list[BaseException] = []
    loop.set_exception_handler(lambda _loop, context: seen.append(context["exception"]))
    try:
        with caplog.at_level(logging.ERROR, logger="aiokproto.producer.delivery"):
            handles[0].batch.future.set_result(OK)  # type: ignore[union-attr]
            await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(None)
    assert order == ["stop, logged before: 1", "after"]
    (entry,) = [r for r in caplog.records if "a delivery callback raised" in r.message]
    assert entry.exc_info is not None and isinstance(entry.exc_info[1], ValueError)
    assert [type(e) for e in seen] == [Stop]


async def test_a_cancelled_error_from_a_callback_leaves_the_other_records_waiters() -> None:
    """A callback reading a cancelled future's ``result()`` raises CancelledError (a
    BaseException): it stopped the batch's other callbacks, and a task awaiting another
    record of the batch slept for ever."""
    rig = Rig()
    first, second = _handles(rig, 2)
    gone = asyncio.get_running_loop().create_future()
    gone.cancel()
    first.add_done_callback(OnDelivery(lambda e, m: gone.result()))
    later = _handles(rig, 1)[0]
    late: list[DeliveryFuture] = []
    later.add_done_callback(late.append)
    waiting = asyncio.ensure_future(asyncio.wait_for(second, 5))
    await asyncio.sleep(0)
    loop = asyncio.get_running_loop()
    seen: list[BaseException] = []
    loop.set_exception_handler(lambda _loop, context: seen.append(context["exception"]))
    try:
        second.batch.future.set_result(OK)  # type: ignore[union-attr]
        assert (await waiting).offset == 101
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(None)
    assert late == [later]
    assert [type(e) for e in seen] == [asyncio.CancelledError]


async def test_keyboard_interrupt_from_a_callback_ends_the_run() -> None:
    from aiokproto.producer.delivery import _run_record_callbacks

    rig = Rig()
    handles = _handles(rig, 2)
    ran: list[int] = []

    def interrupt(_h: DeliveryFuture) -> None:
        raise KeyboardInterrupt

    batch = handles[0].batch
    assert batch is not None
    calls: list[Any] = []
    calls += (interrupt, 0, 0, 1, 1, lambda h: ran.append(1), 1, 0, 1, 1)
    batch.future.set_result(OK)
    with pytest.raises(KeyboardInterrupt):
        _run_record_callbacks(batch, calls)(batch.future)
    assert ran == []


async def test_a_handle_copies_and_pickles_as_in_python() -> None:
    """copy/pickle read the fields (review: the compiled handle raised "cannot pickle")."""
    failed = DeliveryFuture.failed(KafkaTimeoutError("refused"))
    back = pickle.loads(pickle.dumps(failed))
    assert type(back) is DeliveryFuture and back.batch is None
    assert isinstance(back.exception(), KafkaTimeoutError)
    (h,) = _handles(Rig(), 1)
    for twin in (copy.copy(h), copy.deepcopy(h, {id(h.batch): h.batch})):
        assert twin == h and twin is not h and twin.batch is h.batch
        assert (twin._delta, twin._timestamp, twin._ksize, twin._vsize) == (
            h._delta,
            h._timestamp,
            h._ksize,
            h._vsize,
        )


# -- a handle is a future to asyncio: gather/wait/wait_for take it without a Task --------


def _counting_tasks(loop: asyncio.AbstractEventLoop) -> list[int]:
    made = [0]

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kw: Any) -> asyncio.Task[Any]:
        made[0] += 1
        return asyncio.Task(coro, loop=loop, **kw)

    loop.set_task_factory(factory)  # type: ignore[arg-type]
    return made


async def test_gather_over_100000_handles_makes_no_task() -> None:
    rig = Rig(batch_size=1 << 20)
    handles = _handles(rig, 100_000)
    assert asyncio.isfuture(handles[0])
    loop = asyncio.get_running_loop()
    made = _counting_tasks(loop)
    try:
        gathered = asyncio.gather(*handles)
        batches = list({id(h.batch): h.batch for h in handles}.values())
        for batch in batches:
            batch.future.set_result(OK)  # type: ignore[union-attr]
        metas = await gathered
    finally:
        loop.set_task_factory(None)
    assert made[0] == 0
    assert len(metas) == 100_000 and metas[0].offset == 100
    assert len(batches) > 1 and metas == [h.result() for h in handles]  # each its own


async def test_wait_delivered_is_one_wait_per_batch_and_raises_the_first_error() -> None:
    rig = Rig(batch_size=200)
    handles = _handles(rig, 30)
    batches = list({id(h.batch): h.batch for h in handles}.values())
    assert len(batches) > 2
    waiting = asyncio.ensure_future(wait_delivered(handles))
    batches[0].future.set_result(OK)  # type: ignore[union-attr]
    await asyncio.sleep(0)
    assert not waiting.done()
    boom = KafkaTimeoutError("expired")
    for batch in batches[1:]:
        batch.future.set_exception(boom)  # type: ignore[union-attr]
        batch.future.exception()  # type: ignore[union-attr]  # as the accumulator does
    with pytest.raises(KafkaTimeoutError):
        await waiting
    with pytest.raises(RecordTooLargeError):
        await wait_delivered([DeliveryFuture.failed(RecordTooLargeError("big"))])
    await wait_delivered([])


async def test_cancelling_a_wait_delivered_caller_leaves_the_batch_be() -> None:
    rig = Rig()
    handles = _handles(rig, 3)
    waiting = asyncio.ensure_future(wait_delivered(handles))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert not handles[0].batch.future.cancelled()  # type: ignore[union-attr]


async def test_cancel_stops_the_waiters_of_one_record_not_its_delivery() -> None:
    """cancel() cancels the handle (and every equal one): its callbacks run at once with
    a cancelled handle, awaiting it raises CancelledError; the record is still
    delivered and the batch's other records are not touched."""
    rig = Rig()
    a, b = _handles(rig, 2)
    got: list[tuple[str, bool]] = []
    a.add_done_callback(lambda h: got.append(("a", h.cancelled())))
    b.add_done_callback(lambda h: got.append(("b", h.cancelled())))
    waiter = asyncio.ensure_future(_await(a))
    await asyncio.sleep(0)
    assert a.cancel("stop") is True
    assert a.cancel() is False  # once
    again = DeliveryFuture(a.batch, 0, 0, 0, 0)  # an equal handle: the same record
    assert again == a and again.cancelled() and again.done()
    assert a.done() and a.cancelled() and not b.done() and not b.cancelled()
    assert got == []  # on the loop, as asyncio's futures do
    with pytest.raises(asyncio.CancelledError):
        await waiter  # woken at once, not at delivery
    assert got == [("a", True)]
    with pytest.raises(asyncio.CancelledError, match="stop"):
        a.result()
    with pytest.raises(asyncio.CancelledError):
        a.exception()
    late: list[bool] = []
    a.add_done_callback(lambda h: late.append(h.cancelled()))  # done: on the next turn
    await asyncio.sleep(0)
    assert late == [True]
    batch = a.batch
    assert batch is not None and not batch.future.done()  # the record is still going
    batch.future.set_result(OK)
    await asyncio.sleep(0)
    assert got == [("a", True), ("b", False)]  # a's callback ran once, b's on delivery
    assert b.result().offset == 101
    assert a.cancel() is False and "cancelled" in repr(a)


async def _await(handle: DeliveryFuture) -> Any:
    return await handle


async def test_cancelling_a_gather_cancels_its_handles_not_the_records() -> None:
    rig = Rig()
    handles = _handles(rig, 5)
    outside = handles[4]
    seen: list[int] = []
    outside.add_done_callback(lambda h: seen.append(h.result().offset))
    gathered = asyncio.gather(*handles[:4])
    task = asyncio.ensure_future(gathered)
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task  # at once: the batch is still pending
    assert all(h.cancelled() for h in handles[:4]) and not outside.done()
    batch = outside.batch
    assert batch is not None and not batch.future.cancelled()
    batch.future.set_result(OK)
    await asyncio.sleep(0)
    assert seen == [104]


async def test_one_cancelled_handle_in_a_gather_with_return_exceptions() -> None:
    rig = Rig()
    a, b = _handles(rig, 2)
    gathered = asyncio.gather(a, b, return_exceptions=True)
    a.cancel()
    a.batch.future.set_result(OK)  # type: ignore[union-attr]
    first, second = await gathered
    assert isinstance(first, asyncio.CancelledError) and second.offset == 101


async def test_cancelling_the_awaiting_task_does_not_cancel_the_handle() -> None:
    rig = Rig()
    (h,) = _handles(rig, 1)
    task = asyncio.ensure_future(_await(h))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not h.cancelled() and not h.done()
    h.batch.future.set_result(OK)  # type: ignore[union-attr]
    assert (await h).offset == 100


async def test_wait_for_a_handle_times_out_and_leaves_the_record() -> None:
    rig = Rig()
    a, b = _handles(rig, 2)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(a, 0.01)
    # 3.11's wait_for cancels the future it waited for (the handle); 3.12's awaits it
    # in a timeout scope (only the waiting is cancelled): the record goes on either way
    assert a.cancelled() == (sys.version_info < (3, 12)) and not b.done()
    assert not a.batch.future.done()  # type: ignore[union-attr]
    done, pending = await asyncio.wait([b], timeout=0.01)
    assert not done and pending == {b}
    b.batch.future.set_result(OK)  # type: ignore[union-attr]
    assert (await asyncio.wait_for(b, 1)).offset == 101
    assert await asyncio.shield(b) == b.result()


async def test_remove_done_callback_removes_one_records_callbacks_only() -> None:
    rig = Rig()
    a, b = _handles(rig, 2)
    got: list[str] = []

    def cb(h: DeliveryFuture) -> None:
        got.append("a" if h == a else "b")

    a.add_done_callback(cb)
    a.add_done_callback(cb)
    b.add_done_callback(cb)
    assert a.remove_done_callback(cb) == 2
    assert a.remove_done_callback(cb) == 0
    a.add_done_callback(cb)  # added again after the removal: called
    a.batch.future.set_result(OK)  # type: ignore[union-attr]
    await asyncio.sleep(0)
    assert sorted(got) == ["a", "b"]
    assert b.remove_done_callback(cb) == 0  # done: already scheduled
    failed = DeliveryFuture.failed(RecordTooLargeError("big"))
    assert failed.cancel() is False and failed.remove_done_callback(cb) == 0
    assert failed.get_loop() is asyncio.get_running_loop() is a.get_loop()


async def test_on_delivery_gets_a_kafka_error_whatever_failed_the_batch() -> None:
    """send(on_delivery=)'s callback is typed ``(KafkaError | None, ...)``, as
    confluent-kafka users annotate it: anything else that failed a batch is wrapped."""
    rig = Rig()
    handle = rig.send()
    got: list[tuple[BaseException | None, object]] = []
    handle.add_done_callback(OnDelivery(lambda error, meta: got.append((error, meta))))
    cause = RuntimeError("not a Kafka error")
    handle.batch.future.set_exception(cause)  # type: ignore[union-attr]
    await asyncio.sleep(0)
    [(error, meta)] = got
    assert isinstance(error, KafkaError) and error.__cause__ is cause and meta is None
    assert "not a Kafka error" in str(error)
