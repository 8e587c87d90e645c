"""Hostile use of consumer groups: stop() in the middle of a rebalance's revoke,
listeners that do things, several tasks consuming one member."""

from __future__ import annotations

import asyncio
from typing import Any

from aiokproto.consumer import Consumer, ConsumerRebalanceListener
from aiokproto.structs import TopicPartition
from tests.hostile.test_consumer_stop_attacks import consume, fill, member


class Recorder(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.revoked: list[frozenset[TopicPartition]] = []
        self.assigned: list[frozenset[TopicPartition]] = []

    async def on_partitions_assigned(self, assigned: frozenset[TopicPartition]) -> None:
        self.assigned.append(assigned)

    async def on_partitions_revoked(self, revoked: frozenset[TopicPartition]) -> None:
        self.revoked.append(revoked)


async def test_stop_during_the_commit_before_a_rebalance_revoke_keeps_commit_and_listener(
    kafka: Any, topic_name: str
) -> None:
    """Expected: a member stopped while a rebalance's revoke is committing (eager
    protocol, auto-commit; the coordinator answers slowly) still commits what it
    consumed and calls on_partitions_revoked for its partitions, once. Observed:
    close() only waits for a listener already running (_in_user_code); it cancels the
    group task in the middle of _commit_before_revoke, the listener is never called,
    and the CLOSE finds nothing left to revoke (the machine already gave the
    partitions up): the consumed offsets are never committed."""
    await fill(kafka, topic_name, 2, 20)
    group = f"g-{topic_name}"
    recorder = Recorder()
    a = member(
        kafka, topic_name, group, enable_auto_commit=True, auto_commit_interval_ms=600_000
    )
    a.subscribe([topic_name], listener=recorder)
    b = member(kafka, topic_name, group)
    await a.start()
    try:
        await consume(a, 40)
        coordinator = a.group_coordinator
        assert coordinator is not None
        offsets = coordinator._offsets
        original = offsets.commit_before_revoke
        entered = asyncio.Event()

        async def slow_commit(*args: Any, **kwargs: Any) -> Any:
            entered.set()
            await asyncio.sleep(1.0)  # a slow coordinator
            return await original(*args, **kwargs)

        offsets.commit_before_revoke = slow_commit  # type: ignore[method-assign]
        await b.start()  # a rebalance: a revokes everything (eager) and commits first
        async with asyncio.timeout(30):
            await entered.wait()
            await a.stop()
    finally:
        await a.stop()
        await b.stop()
    tps = frozenset(TopicPartition(topic_name, p) for p in range(2))
    check = member(kafka, topic_name, f"{group}")
    async with check:
        committed = {p: await check.committed(TopicPartition(topic_name, p)) for p in range(2)}
    assert (recorder.revoked, committed) == ([tps], {0: 20, 1: 20})


import contextlib  # noqa: E402
import itertools  # noqa: E402

import pytest  # noqa: E402

from aiokproto.consumer import ConsumerStoppedError  # noqa: E402
from tests.consumer.test_group_guarantees import (  # noqa: E402
    Listener,
    Timeline,
    keep_producing,
    until,
)

_seq = itertools.count()


async def _many_ways(
    consumer: Consumer, name: str, timeline: Timeline, stopping: asyncio.Event
) -> None:
    """Three tasks take records from one consumer at once: async for, getmany, getone;
    a fourth asks position() of whatever it owns."""
    from tests.consumer import test_group_guarantees as tg

    def note(tp: TopicPartition, offset: int) -> None:
        timeline.handed.append((next(tg._seq), name, tp, offset))

    async def iterate() -> None:
        async for r in consumer:
            note(TopicPartition(r.topic, r.partition), r.offset)
            await asyncio.sleep(0.001)

    async def many() -> None:
        with contextlib.suppress(ConsumerStoppedError):
            while True:
                got = await consumer.getmany(timeout_ms=100, max_records=7)
                for tp, recs in got.items():
                    for r in recs:
                        note(tp, r.offset)
                await asyncio.sleep(0.002)

    async def one() -> None:
        with contextlib.suppress(ConsumerStoppedError):
            while True:
                r = await consumer.getone()
                note(TopicPartition(r.topic, r.partition), r.offset)

    async def positions() -> None:
        with contextlib.suppress(ConsumerStoppedError):
            while not stopping.is_set():
                for tp in list(consumer.assignment()):
                    try:
                        await consumer.position(tp, timeout_ms=200)
                    except ConsumerStoppedError:
                        raise
                    except Exception:
                        pass
                await asyncio.sleep(0.01)

    await asyncio.gather(iterate(), many(), one(), positions())


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
async def test_several_tasks_on_one_member_while_the_group_rebalances(
    kafka: Any, topic_name: str, strategy: str
) -> None:
    """Expected: while members come and go, no member hands a record out while it does
    not own its partition, and (auto-commit before every revoke succeeding) no record
    is handed out twice in the group, however many tasks take records from one
    consumer at once."""
    from tests.consumer.conftest import create_topic

    await create_topic(kafka.bootstrap_servers, topic_name, partitions=4)
    group = f"g-{topic_name}"
    timeline = Timeline()
    stop = asyncio.Event()
    producing = asyncio.ensure_future(keep_producing(kafka.bootstrap_servers, topic_name, stop))
    options = {"partition_assignment_strategy": (strategy,), "enable_auto_commit": True}
    members: dict[str, Consumer] = {}
    runs: dict[str, asyncio.Future[Any]] = {}
    stopping: dict[str, asyncio.Event] = {}

    async def join(name: str) -> None:
        c = member(kafka, topic_name, group, **options)
        c.subscribe([topic_name], listener=Listener(name, timeline))
        await c.start()
        members[name] = c
        stopping[name] = asyncio.Event()
        runs[name] = asyncio.ensure_future(_many_ways(c, name, timeline, stopping[name]))

    async def leave(name: str) -> None:
        c = members.pop(name)
        await c.stop()
        stopping[name].set()
        async with asyncio.timeout(10):
            await runs.pop(name)

    try:
        async with asyncio.timeout(90):
            await join("a")
            await until(lambda: len(timeline.handed) > 50, 30)
            await join("b")
            await asyncio.sleep(3)
            await join("c")
            await asyncio.sleep(3)
            await leave("a")
            await asyncio.sleep(3)
            await join("d")
            await asyncio.sleep(3)
    finally:
        for name in list(members):
            await leave(name)
        stop.set()
        await producing
    timeline.check()
    seen: dict[tuple[TopicPartition, int], int] = {}
    for _, _, tp, offset in timeline.handed:
        seen[(tp, offset)] = seen.get((tp, offset), 0) + 1
    twice = sorted((tp.partition, o) for (tp, o), n in seen.items() if n > 1)
    assert not twice, f"{len(twice)} records handed out twice: {twice[:10]}"


class CommitsWhenAssigned(ConsumerRebalanceListener):
    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer
        self.commits: list[tuple[str, float]] = []

    async def on_partitions_assigned(self, assigned: frozenset[TopicPartition]) -> None:
        import time

        began = time.monotonic()
        try:
            await self.consumer.commit()
            self.commits.append(("ok", time.monotonic() - began))
        except Exception as exc:  # recorded
            self.commits.append((repr(exc), time.monotonic() - began))

    async def on_partitions_revoked(self, revoked: frozenset[TopicPartition]) -> None:
        pass


async def test_a_commit_in_on_partitions_assigned_after_a_cooperative_revoke(
    kafka: Any, topic_name: str
) -> None:
    """Expected: commit() from on_partitions_assigned works at once (Java allows it;
    the generation is valid: the member just synced). Observed: when a cooperative member
    gave partitions up, the machine is in PREPARING while the listener runs; the
    commit waits in _until_stable() for STABLE, which the group task (running this
    listener) can never reach: it hangs for the whole default_api_timeout_ms, then
    raises KafkaTimeoutError, and the group is stuck for as long."""
    await fill(kafka, topic_name, 4, 5)
    group = f"g-{topic_name}"
    options = {
        "partition_assignment_strategy": ("cooperative-sticky",),
        "enable_auto_commit": False,
    }
    a = member(kafka, topic_name, group, **options)
    listener = CommitsWhenAssigned(a)
    a.subscribe([topic_name], listener=listener)
    b = member(kafka, topic_name, group, **options)
    try:
        await a.start()
        await consume(a, 20)
        await b.start()
        async with asyncio.timeout(40):
            while len(listener.commits) < 2:
                await a.getmany(timeout_ms=100)
                await b.getmany(timeout_ms=0)
    finally:
        await a.stop()
        await b.stop()
    outcome, took = listener.commits[1]
    # It must not hang. Without offsets it commits what is still owned, then names the
    # two partitions that left with records handed out and never committed (the
    # listener's revoke did not commit them): they will be consumed again by b.
    assert took < 3, listener.commits
    assert outcome == "ok" or outcome.startswith("CommitFailedError"), listener.commits


async def test_a_cancelled_stop_leaves_no_group_task_running(
    kafka: Any, topic_name: str
) -> None:
    """Expected: when stop() is cancelled (e.g. by an outer timeout) while it waits for
    a running rebalance listener, the consumer's group, heartbeat and watch tasks are
    still cancelled: nothing of the consumer keeps running. Observed: close() takes
    the tasks out of self._tasks, then awaits the listener; cancelled there, it never
    cancels them: they run on (heartbeating over a closed client) until the loop
    ends ("Task was destroyed but it is pending")."""
    await fill(kafka, topic_name, 2, 5)
    group = f"g-{topic_name}"

    class Slow(ConsumerRebalanceListener):
        running = asyncio.Event()

        async def on_partitions_assigned(self, assigned: frozenset[TopicPartition]) -> None:
            pass

        async def on_partitions_revoked(self, revoked: frozenset[TopicPartition]) -> None:
            self.running.set()
            await asyncio.sleep(3)

    a = member(kafka, topic_name, group)
    a.subscribe([topic_name], listener=Slow())
    b = member(kafka, topic_name, group)
    await a.start()
    mine = {t for t in asyncio.all_tasks() if group in t.get_name()}  # a's own tasks
    try:
        await consume(a, 10)
        await b.start()  # a rebalance: a's revoke listener runs for 3 s
        async with asyncio.timeout(20):
            await Slow.running.wait()
            stopping = asyncio.ensure_future(a.stop())
            await asyncio.sleep(0.3)
            stopping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await stopping
            await asyncio.sleep(4)  # the listener is over: anything left runs freely
        left = [t.get_name() for t in mine if not t.done()]
        assert not left, f"still running after a cancelled stop(): {left}"
    finally:
        await b.stop()
        for t in mine:
            t.cancel()


async def test_commit_does_not_name_partitions_that_only_skipped_aborted_records(
    kafka: Any, topic_name: str
) -> None:
    """Expected (DESIGN: commit() names partitions "taken with records handed out
    beyond" the last commit): a member that committed everything it was handed, and
    whose positions then only moved over an aborted transaction (read_committed: no
    record handed out), gets no CommitFailedError when the group moves a partition.
    Observed: PartitionState.base is compared with the position, which the fetcher
    also advances past control batches and aborted records: the moved partition is
    named as having uncommitted records that "will be consumed again"."""
    import uuid

    from tests.consumer.conftest import ck

    await fill(kafka, topic_name, 2, 5)
    group = f"g-{topic_name}"
    options = {
        "partition_assignment_strategy": ("cooperative-sticky",),
        "enable_auto_commit": False,
        "isolation_level": "read_committed",
    }
    a = member(kafka, topic_name, group, **options)
    b = member(kafka, topic_name, group, **options)

    def aborted_transaction() -> None:
        producer = ck.Producer(
            {"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": uuid.uuid4().hex}
        )
        producer.init_transactions(30)
        producer.begin_transaction()
        for part in range(2):
            for i in range(3):
                producer.produce(topic_name, value=b"aborted%d" % i, partition=part)
        producer.flush(30)
        producer.abort_transaction(30)

    async with a:
        await consume(a, 10)
        await a.commit()  # everything handed out is committed
        await asyncio.to_thread(aborted_transaction)
        tps = [TopicPartition(topic_name, p) for p in range(2)]
        # 5 records, 3 aborted ones and the abort marker per partition. The marker is
        # written after abort_transaction() returns: end offsets read at once may not
        # count it yet, so the positions are waited for at the known end.
        async with asyncio.timeout(30):  # positions move over the aborted records
            while [await a.position(tp) for tp in tps] != [9, 9]:
                assert await a.getmany(timeout_ms=200) == {}
        ends = await a.end_offsets(tps)
        assert [ends[tp] for tp in tps] == [9, 9]
        async with b, asyncio.timeout(30):
            while len(a.assignment()) != 1 or len(b.assignment()) != 1:
                await a.getmany(timeout_ms=100)
                await b.getmany(timeout_ms=100)
            await a.commit()


async def test_unsubscribe_from_a_rebalance_listener_does_not_hang(
    kafka: Any, topic_name: str
) -> None:
    """Expected: unsubscribe() called from on_partitions_assigned (a listener that
    decides this member should not consume these partitions) returns: the member
    leaves the group. Observed: ClassicGroupDriver.unsubscribe() posts UNSUBSCRIBED to
    the group task and awaits it, but the group task is the one running this
    listener: it waits forever (no timeout), the member stays in the group owning its
    partitions, and a later stop() waits 30 s for the listener."""
    await fill(kafka, topic_name, 1, 5)
    outcome: list[str] = []

    class LeavesAtOnce(ConsumerRebalanceListener):
        async def on_partitions_assigned(self, assigned: frozenset[TopicPartition]) -> None:
            if assigned:
                await a.unsubscribe()
                outcome.append("left")

        async def on_partitions_revoked(self, revoked: frozenset[TopicPartition]) -> None:
            pass

    a = member(kafka, topic_name, f"g-{topic_name}")
    a.subscribe([topic_name], listener=LeavesAtOnce())
    await a.start()
    try:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(15):
                while not outcome:
                    await a.getmany(timeout_ms=200)
        assert outcome == ["left"], "unsubscribe() from the listener never returned"
    finally:
        for t in asyncio.all_tasks():  # do not wait 30 s in stop() for the stuck listener
            if t.get_name().startswith("aiokproto-group-g-"):
                t.cancel()
        await a.stop(timeout_ms=1000)


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
async def test_concurrent_commits_during_a_rebalance_end_within_their_timeout(
    kafka: Any, topic_name: str, strategy: str
) -> None:
    """Holds: several tasks committing at once (with and without offsets) while a
    member joins end, each within its timeout, with success or CommitFailedError; a
    commit from the revoke listener runs meanwhile."""
    from aiokproto.consumer import CommitFailedError

    await fill(kafka, topic_name, 4, 10)
    group = f"g-{topic_name}"
    options = {"partition_assignment_strategy": (strategy,), "enable_auto_commit": False}
    a = member(kafka, topic_name, group, **options)
    listener = Listener("a", Timeline(), a)
    a.subscribe([topic_name], listener=listener)
    b = member(kafka, topic_name, group, **options)
    outcomes: list[str] = []

    async def committer(explicit: bool) -> None:
        loop = asyncio.get_running_loop()
        end = loop.time() + 8
        while loop.time() < end:
            began = loop.time()
            try:
                if explicit:
                    owned = a.assignment()
                    await a.commit({tp: 1 for tp in owned}, timeout_ms=3000)
                else:
                    await a.commit(timeout_ms=3000)
                outcomes.append("ok")
            except CommitFailedError:
                outcomes.append("failed")
            took = loop.time() - began
            assert took < 4, f"a commit with a 3 s timeout took {took:.1f} s"
            await asyncio.sleep(0.01)

    async with a:
        await consume(a, 40)
        async with asyncio.timeout(30):
            tasks = [asyncio.ensure_future(committer(i % 2 == 0)) for i in range(4)]
            await asyncio.sleep(0.5)
            async with b:
                while not (a.assignment() and b.assignment()):
                    await b.getmany(timeout_ms=100)
                    await a.getmany(timeout_ms=0)
                await asyncio.gather(*tasks)
    assert "ok" in outcomes
    assert all(c == "ok" or "CommitFailedError" in c for c in listener.commits), listener.commits
