"""BrokerTasks, the per-broker task supervisor of both fetchers, under a bare event loop
(no sockets): one task per broker, forgotten when it ends, a failure reported once and
fatal, waiters released on failure and on close, nothing detached after close."""

from __future__ import annotations

import asyncio
import logging

import pytest

from aiokproto.cluster.broker_tasks import BrokerTasks, Wakeup, wait_event


class Owner:
    """What a fetcher gives its BrokerTasks: the failures it heard, a wake-up."""

    def __init__(self) -> None:
        self.failures: list[tuple[int, BaseException]] = []
        self.wakeup = Wakeup()
        self.released = 0
        self.tasks = BrokerTasks("test-fetch", failed=self.failed, release=self.release)

    def failed(self, node: int, exc: BaseException) -> None:
        self.failures.append((node, exc))

    def release(self) -> None:
        self.released += 1
        self.wakeup.set()


async def test_one_task_per_broker_named_after_it_and_forgotten_when_it_ends() -> None:
    owner = Owner()
    go = asyncio.Event()
    ran: list[int] = []

    async def job(node: int) -> None:
        ran.append(node)
        await go.wait()

    assert owner.tasks.start(1, job)
    assert owner.tasks.start(2, job)
    assert not owner.tasks.start(1, job)  # one runs already
    await asyncio.sleep(0)
    names = sorted(t.get_name() for t in asyncio.all_tasks() if t.get_name().startswith("test-"))
    assert names == ["test-fetch-1", "test-fetch-2"]
    assert owner.tasks.nodes() == [1, 2] and 1 in owner.tasks and len(owner.tasks) == 2
    go.set()
    await owner.tasks.join()
    assert ran == [1, 2] and len(owner.tasks) == 0 and 1 not in owner.tasks
    assert owner.tasks.start(1, job)  # ended (its partitions moved): a new one may start
    await owner.tasks.close()
    assert owner.failures == []


async def test_a_failure_reaches_the_owner_once_wakes_its_waiters_and_starts_nothing_more(
    caplog: pytest.LogCaptureFixture,
) -> None:
    owner = Owner()
    waiter = owner.wakeup.waiter()
    boom = ValueError("decoder defect")

    async def failing(node: int) -> None:
        await asyncio.sleep(0)
        raise boom

    async def idle(node: int) -> None:
        await asyncio.Event().wait()

    with caplog.at_level(logging.ERROR, "aiokproto.cluster.broker_tasks"):
        owner.tasks.start(1, idle)
        owner.tasks.start(2, failing)
        async with asyncio.timeout(5):
            await waiter.wait()  # released by the failure
    assert owner.failures == [(2, boom)]
    assert owner.tasks.failure is boom
    assert "test-fetch-2 failed" in caplog.text
    assert owner.tasks.nodes() == [1]
    assert not owner.tasks.start(2, idle)  # a defect: no task starts after it
    assert not owner.tasks.start(3, idle)
    await owner.tasks.close()
    assert owner.tasks.nodes() == []


async def test_close_releases_waiters_cancels_every_task_and_refuses_new_ones() -> None:
    owner = Owner()
    cancelled: list[int] = []
    started = asyncio.Event()

    async def job(node: int) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(node)
            raise

    owner.tasks.start(1, job)
    owner.tasks.start(2, job)
    await started.wait()
    reader_waits = owner.wakeup.waiter()
    reader = asyncio.create_task(reader_waits.wait())
    await owner.tasks.close()
    async with asyncio.timeout(5):
        await reader  # a waiter never outlives the tasks it waits on
    assert sorted(cancelled) == [1, 2] and owner.released >= 1
    assert owner.failures == [] and owner.tasks.failure is None  # a cancel is no failure
    assert not owner.tasks.start(3, job) and owner.tasks.closed
    leftovers = [t for t in asyncio.all_tasks() if t.get_name().startswith("test-fetch")]
    assert leftovers == []


async def test_a_task_cancelled_before_it_ran_leaves_no_unawaited_coroutine() -> None:
    owner = Owner()
    made: list[int] = []

    async def job(node: int) -> None:
        made.append(node)

    owner.tasks.start(1, job)
    await owner.tasks.close()  # before the task got a turn
    assert made == [] and owner.tasks.nodes() == []


async def test_join_waits_for_tasks_that_end_on_their_own() -> None:
    owner = Owner()
    stopping = asyncio.Event()
    ended: list[int] = []

    async def job(node: int) -> None:
        await stopping.wait()
        await asyncio.sleep(0.01)
        ended.append(node)

    for node in (1, 2, 3):
        owner.tasks.start(node, job)
    stopping.set()
    await owner.tasks.join()
    assert sorted(ended) == [1, 2, 3] and owner.tasks.nodes() == []
    await owner.tasks.join()  # nothing left: returns at once


async def test_wakeup_reaches_every_waiter_and_wait_event_times_out() -> None:
    wakeup = Wakeup()
    first, second = wakeup.waiter(), wakeup.waiter()
    assert first is second and not wakeup.awaited()
    waiting = asyncio.create_task(first.wait())
    await asyncio.sleep(0)
    assert wakeup.awaited()
    wakeup.set()
    await waiting
    assert first.is_set() and not wakeup.waiter().is_set()  # the next wait is fresh
    loop = asyncio.get_running_loop()
    began = loop.time()
    await wait_event(wakeup.waiter(), 0.05)
    assert 0.04 <= loop.time() - began < 1
