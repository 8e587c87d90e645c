"""Consumer groups when a rebalance meets a busy member: heartbeats go on while the
revoke listener runs, a commit from the listener goes through (also during stop()), no
partition is handed out by two members at once, and commit() after a rebalance says
which partitions it could not commit."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from aiokproto.consumer import CommitFailedError, Consumer, ConsumerRebalanceListener
from aiokproto.producer import Producer
from aiokproto.structs import TopicPartition
from tests.consumer.conftest import create_topic

_seq = itertools.count()  # one clock for every member: the event order on the loop


@dataclass
class Timeline:
    """When each member owned each partition, and when it handed records out."""

    # (seq, member, "assigned" | "revoking" | "lost", partitions)
    events: list[tuple[int, str, str, frozenset[TopicPartition]]] = field(default_factory=list)
    handed: list[tuple[int, str, TopicPartition, int]] = field(default_factory=list)

    def owner_intervals(self) -> dict[TopicPartition, list[tuple[str, int, int]]]:
        """tp -> [(member, from_seq, to_seq)]; to_seq is where it stopped owning."""
        open_: dict[tuple[str, TopicPartition], int] = {}
        out: dict[TopicPartition, list[tuple[str, int, int]]] = {}
        for seq, member, kind, tps in self.events:
            for tp in tps:
                if kind == "assigned":
                    open_[(member, tp)] = seq
                elif (member, tp) in open_:
                    out.setdefault(tp, []).append((member, open_.pop((member, tp)), seq))
        for (member, tp), start in open_.items():
            out.setdefault(tp, []).append((member, start, 1 << 62))
        return out

    def check(self) -> None:
        intervals = self.owner_intervals()
        for tp, spans in intervals.items():
            spans = sorted(spans, key=lambda s: s[1])
            for (m1, _, end1), (m2, start2, _) in itertools.pairwise(spans):
                assert end1 <= start2, f"{tp} owned by {m1} and {m2} at once"
        for seq, member, tp, offset in self.handed:
            owned = any(
                m == member and start < seq < end for m, start, end in intervals.get(tp, [])
            )
            assert owned, f"{member} handed out {tp}@{offset} while not owning it"


class Listener(ConsumerRebalanceListener):
    def __init__(
        self,
        name: str,
        timeline: Timeline,
        consumer: Consumer | None = None,
        revoke_delay_s: float = 0.0,
    ) -> None:
        self.name = name
        self.timeline = timeline
        self.consumer = consumer
        self.revoke_delay_s = revoke_delay_s
        self.commits: list[str] = []  # "ok" or the error's repr, per listener commit
        self.lost = 0

    async def on_partitions_assigned(self, assigned: frozenset[TopicPartition]) -> None:
        self.timeline.events.append((next(_seq), self.name, "assigned", assigned))

    async def on_partitions_revoked(self, revoked: frozenset[TopicPartition]) -> None:
        self.timeline.events.append((next(_seq), self.name, "revoking", revoked))
        await asyncio.sleep(self.revoke_delay_s)  # slow cleanup, longer than a session
        if self.consumer is not None:
            try:
                await self.consumer.commit()
                self.commits.append("ok")
            except Exception as exc:  # recorded: the test asserts on it
                self.commits.append(repr(exc))

    async def on_partitions_lost(self, lost: frozenset[TopicPartition]) -> None:
        self.lost += 1
        self.timeline.events.append((next(_seq), self.name, "lost", lost))


async def keep_producing(bootstrap: str, topic: str, stop: asyncio.Event) -> int:
    sent = 0
    async with Producer(bootstrap_servers=bootstrap, linger_ms=5) as p:
        while not stop.is_set():
            await p.send_batch(topic, [b"r%d" % (sent + i) for i in range(20)])
            sent += 20
            await asyncio.sleep(0.05)
        await p.flush()
    return sent


async def iterate(consumer: Consumer, name: str, timeline: Timeline) -> None:
    async for record in consumer:
        tp = TopicPartition(record.topic, record.partition)
        timeline.handed.append((next(_seq), name, tp, record.offset))
        await asyncio.sleep(0.001)  # a little processing per record


@contextlib.asynccontextmanager
async def running(consumer: Consumer, name: str, timeline: Timeline) -> AsyncIterator[None]:
    task = asyncio.ensure_future(iterate(consumer, name, timeline))
    try:
        yield
    finally:
        await consumer.stop()
        async with asyncio.timeout(5):
            await task  # stop() ends the iteration


async def until(predicate: Callable[[], bool], limit_s: float) -> None:
    async with asyncio.timeout(limit_s):
        while True:
            if predicate():
                return
            await asyncio.sleep(0.1)


def member(kafka: Any, topic: str, group: str, **options: Any) -> Consumer:
    defaults: dict[str, Any] = {
        "auto_offset_reset": "earliest",
        "session_timeout_ms": 6000,
        "heartbeat_interval_ms": 500,
        "default_api_timeout_ms": 20_000,
    }
    return Consumer(
        topic,
        bootstrap_servers=kafka.bootstrap_servers,
        group_id=group,
        **{**defaults, **options},
    )


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
async def test_a_slow_revoke_listener_commits_and_nobody_double_consumes(
    kafka: Any, topic_name: str, strategy: str
) -> None:
    # The revoke listener of the first member takes 8 s, longer than the 6 s session,
    # and commits at its end: heartbeats must go on meanwhile, its partitions must not
    # be handed out by it after the revoke began, nor by anyone else before that.
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=4)
    group = f"g-{topic_name}"
    timeline = Timeline()
    stop = asyncio.Event()
    producing = asyncio.ensure_future(keep_producing(kafka.bootstrap_servers, topic_name, stop))
    a = member(
        kafka,
        topic_name,
        group,
        partition_assignment_strategy=(strategy,),
        enable_auto_commit=False,
    )
    b = member(
        kafka,
        topic_name,
        group,
        partition_assignment_strategy=(strategy,),
        enable_auto_commit=False,
    )
    la = Listener("a", timeline, a, revoke_delay_s=8.0)
    lb = Listener("b", timeline, b)
    a.subscribe([topic_name], listener=la)
    b.subscribe([topic_name], listener=lb)
    try:
        await a.start()
        async with running(a, "a", timeline):
            await until(lambda: any(who == "a" for _, who, _, _ in timeline.handed), 30)
            await b.start()
            async with running(b, "b", timeline):
                # the slow listener, then a stable group
                await until(lambda: bool(la.commits and b.assignment() and a.assignment()), 40)
                await asyncio.sleep(1.0)
                handed_before = len(timeline.handed)
                await asyncio.sleep(1.0)
                assert len(timeline.handed) > handed_before, "the group stopped consuming"
                # a stops first, while b keeps the group stable: its slow listener's
                # commit at stop then races no rebalance of b's leaving (that case is
                # not what this test is about)
                await a.stop()
    finally:
        stop.set()
        await producing
    assert la.commits and all(c == "ok" for c in la.commits), la.commits
    assert all(c == "ok" for c in lb.commits), lb.commits
    assert la.lost == 0, "heartbeats stopped while the listener ran: the member was expelled"
    timeline.check()


async def test_a_commit_in_the_revoke_listener_works_during_stop(
    kafka: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=2)
    async with Producer(bootstrap_servers=kafka.bootstrap_servers) as p:
        await p.send_batch(topic_name, [b"v%d" % i for i in range(50)], partition=0)
        await p.send_batch(topic_name, [b"w%d" % i for i in range(30)], partition=1)
    group = f"g-{topic_name}"
    timeline = Timeline()
    consumer = member(kafka, topic_name, group, enable_auto_commit=False)
    listener = Listener("a", timeline, consumer)
    consumer.subscribe([topic_name], listener=listener)
    await consumer.start()
    got = 0
    async with asyncio.timeout(30):
        while got < 80:
            got += sum(len(r) for r in (await consumer.getmany(timeout_ms=500)).values())
    await consumer.stop()
    assert listener.commits == ["ok"]
    check = member(kafka, topic_name, group)
    async with check:
        committed = {p: await check.committed(TopicPartition(topic_name, p)) for p in range(2)}
    assert committed == {0: 50, 1: 30}


async def test_commit_after_a_rebalance_names_the_partitions_that_moved(
    kafka: Any, topic_name: str
) -> None:
    # A member takes records from four partitions and, while it works on them, a
    # second member joins and takes two: commit() must say so, not return quietly,
    # and still commit the two it kept.
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=4)
    async with Producer(bootstrap_servers=kafka.bootstrap_servers) as p:
        for part in range(4):
            await p.send_batch(topic_name, [b"x"] * 10, partition=part)
    group = f"g-{topic_name}"
    options = {
        "partition_assignment_strategy": ("cooperative-sticky",),
        "enable_auto_commit": False,
    }
    a = member(kafka, topic_name, group, **options)
    b = member(kafka, topic_name, group, **options)
    async with a:
        taken: dict[TopicPartition, int] = {}
        async with asyncio.timeout(30):
            while sum(taken.values()) < 40:
                for tp, recs in (await a.getmany(timeout_ms=500)).items():
                    taken[tp] = taken.get(tp, 0) + len(recs)
        async with b:
            async with asyncio.timeout(30):  # "processing" while the group rebalances
                while len(b.assignment()) != 2 or len(a.assignment()) != 2:
                    await b.getmany(timeout_ms=200)
                    await a.getmany(timeout_ms=0)  # polls, hands out nothing new
            kept = a.assignment()
            moved = frozenset(taken) - kept
            with pytest.raises(CommitFailedError) as failure:
                await a.commit()
            for tp in moved:
                assert f"{tp.topic}-{tp.partition}" in str(failure.value)
            for tp in kept:
                assert f"{tp.topic}-{tp.partition}" not in str(failure.value)
            for tp in kept:
                assert await a.committed(tp) == 10  # what it still owns was committed
            await a.commit()  # reported once: the next commit is clean


class SeeksWhenAssigned(ConsumerRebalanceListener):
    """Restores positions kept outside Kafka, slowly, with plain (not async) methods."""

    def __init__(self, consumer: Consumer, offset: int) -> None:
        self.consumer = consumer
        self.offset = offset
        self.assigned: list[frozenset[TopicPartition]] = []

    def on_partitions_assigned(self, assigned: frozenset[TopicPartition]) -> None:  # type: ignore[override]
        self.assigned.append(assigned)
        for tp in assigned:
            self.consumer.seek(tp, self.offset)

    def on_partitions_revoked(self, revoked: frozenset[TopicPartition]) -> None:  # type: ignore[override]
        pass


class SlowSeek(ConsumerRebalanceListener):
    def __init__(self, consumer: Consumer, offset: int) -> None:
        self.consumer = consumer
        self.offset = offset

    async def on_partitions_assigned(self, assigned: frozenset[TopicPartition]) -> None:
        await asyncio.sleep(1.0)  # e.g. reading offsets from a database
        for tp in assigned:
            self.consumer.seek(tp, self.offset)


@pytest.mark.parametrize("how", ["async for", "getmany", "getone"])
@pytest.mark.parametrize("kind", ["plain", "slow"])
async def test_nothing_is_handed_out_before_on_partitions_assigned_returns(
    kafka: Any, topic_name: str, kind: str, how: str
) -> None:
    # auto_offset_reset="none": only the listener's seek gives the partitions a
    # position; a poll that ran before it returned used to raise NoOffsetForPartition.
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=2)
    async with Producer(bootstrap_servers=kafka.bootstrap_servers) as p:
        for part in range(2):
            await p.send_batch(topic_name, [b"%d" % i for i in range(10)], partition=part)
    consumer = member(kafka, topic_name, f"g-{topic_name}", auto_offset_reset="none")
    listener: ConsumerRebalanceListener = (
        SeeksWhenAssigned(consumer, 7) if kind == "plain" else SlowSeek(consumer, 7)
    )
    consumer.subscribe([topic_name], listener=listener)
    got: dict[int, list[int]] = {0: [], 1: []}
    async with consumer:
        async with asyncio.timeout(30):
            if how == "getmany":
                while len(got[0]) < 3 or len(got[1]) < 3:
                    for tp, recs in (await consumer.getmany(timeout_ms=50)).items():
                        got[tp.partition].extend(r.offset for r in recs)
            elif how == "getone":
                while len(got[0]) < 3 or len(got[1]) < 3:
                    record = await consumer.getone()
                    got[record.partition].append(record.offset)
            else:
                async for record in consumer:
                    got[record.partition].append(record.offset)
                    if len(got[0]) >= 3 and len(got[1]) >= 3:
                        break
    assert got == {0: [7, 8, 9], 1: [7, 8, 9]}
    if isinstance(listener, SeeksWhenAssigned):
        assert listener.assigned and frozenset().union(*listener.assigned) == {
            TopicPartition(topic_name, 0),
            TopicPartition(topic_name, 1),
        }


class AwaitsWithoutSeeking(ConsumerRebalanceListener):
    """A listener that awaits something and leaves positions alone."""

    async def on_partitions_assigned(self, assigned: frozenset[TopicPartition]) -> None:
        await asyncio.sleep(0.3)  # e.g. warming a cache


@pytest.mark.parametrize("how", ["async for", "getmany", "getone"])
@pytest.mark.parametrize("protocol", ["classic", "consumer"])
async def test_an_awaiting_assigned_listener_that_does_not_seek_still_gets_records(
    kafka: Any, topic_name: str, protocol: str, how: str
) -> None:
    # Found while writing the metrics tests: the poll that ran while the listener was
    # awaiting marked the assignment's positions settled, skipping the held
    # partitions, and nothing looked them up after the listener returned: the
    # consumer waited forever. Half of the records were committed by an earlier member.
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=2)
    async with Producer(bootstrap_servers=kafka.bootstrap_servers) as p:
        for part in range(2):
            await p.send_batch(topic_name, [b"%d" % i for i in range(10)], partition=part)
    group = f"g-{topic_name}"

    def new_member() -> Consumer:
        if protocol == "classic":
            return member(kafka, topic_name, group, enable_auto_commit=False)
        return Consumer(
            topic_name,
            bootstrap_servers=kafka.bootstrap_servers,
            group_id=group,
            group_protocol="consumer",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )

    first = new_member()
    async with first, asyncio.timeout(30):
        while len(first.assignment()) < 2:  # a member may commit once it is in
            await first.getmany(timeout_ms=100)
        await first.commit({TopicPartition(topic_name, 0): 5, TopicPartition(topic_name, 1): 0})
    consumer = new_member()
    consumer.subscribe([topic_name], listener=AwaitsWithoutSeeking())
    got: dict[int, list[int]] = {0: [], 1: []}

    def done() -> bool:
        return len(got[0]) >= 5 and len(got[1]) >= 10

    async with consumer:
        async with asyncio.timeout(30):
            if how == "getmany":
                while not done():
                    for tp, recs in (await consumer.getmany(timeout_ms=50)).items():
                        got[tp.partition].extend(r.offset for r in recs)
            elif how == "getone":
                while not done():
                    record = await consumer.getone()
                    got[record.partition].append(record.offset)
            else:
                async for record in consumer:
                    got[record.partition].append(record.offset)
                    if done():
                        break
    assert got == {0: list(range(5, 10)), 1: list(range(10))}
