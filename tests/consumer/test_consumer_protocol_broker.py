"""The consumer group protocol (KIP-848, group_protocol="consumer") against the real
4.4.0 broker: assignments computed by the broker, reconciled by the member (revoke
first, then assign), commits carrying the member epoch.

Not covered yet: regex subscriptions and static membership with this protocol."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from aiokproto.consumer import Consumer, ConsumerRebalanceListener
from aiokproto.consumer.group.consumer_driver import ConsumerGroupDriver
from aiokproto.consumer.group.consumer_machine import Effect, EffectKind, State
from aiokproto.producer import Producer
from aiokproto.structs import TopicPartition
from tests.consumer.conftest import create_topic
from tests.consumer.lost_commit import forty_records
from tests.consumer.test_consume_group_e2e import take
from tests.consumer.test_group_guarantees import (
    Listener,
    Timeline,
    keep_producing,
    running,
    until,
)


def member(kafka: Any, group: str, **options: Any) -> Consumer:
    defaults: dict[str, Any] = {
        "auto_offset_reset": "earliest",
        "default_api_timeout_ms": 20_000,
        "group_protocol": "consumer",
    }
    return Consumer(
        bootstrap_servers=kafka.bootstrap_servers, group_id=group, **{**defaults, **options}
    )


def events(timeline: Timeline, who: str, kind: str) -> list[frozenset[TopicPartition]]:
    return [tps for _, name, k, tps in timeline.events if name == who and k == kind]


def handed_by(timeline: Timeline, who: str) -> set[TopicPartition]:
    return {tp for _, name, tp, _ in timeline.handed if name == who}


def covers(timeline: Timeline, ends: dict[TopicPartition, int]) -> bool:
    seen: dict[TopicPartition, set[int]] = {}
    for _, _, tp, offset in timeline.handed:
        seen.setdefault(tp, set()).add(offset)
    return all(set(range(end)) <= seen.get(tp, set()) for tp, end in ends.items())


def before_each_effect(
    consumer: Consumer, monkeypatch: Any, hook: Callable[[Effect], Awaitable[None]]
) -> ConsumerGroupDriver:
    """Await ``hook(effect)`` before the consumer's KIP-848 driver works on each effect
    (to place a commit or a leave between two steps); returns the driver."""
    driver = consumer.group_coordinator
    assert isinstance(driver, ConsumerGroupDriver)
    work_on = driver._work_on

    async def hooked(effect: Effect) -> None:
        await hook(effect)
        await work_on(effect)

    monkeypatch.setattr(driver, "_work_on", hooked)
    return driver


async def committed_offsets(
    kafka: Any, group: str, partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, int | None]:
    """The group's committed offsets, read through a fresh consumer (it joins nothing)."""
    async with member(kafka, group) as check:
        return {tp: await check.committed(tp) for tp in partitions}


async def fill(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    async with Producer(bootstrap_servers=bootstrap, linger_ms=5) as p:
        for part in range(partitions):
            await p.send_batch(
                topic, [b"%d-%d" % (part, i) for i in range(per_partition)], partition=part
            )
        await p.flush()


async def test_one_member_gets_every_partition_and_consumes_everything(
    kafka: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=3)
    await fill(kafka.bootstrap_servers, topic_name, 3, 40)
    timeline = Timeline()
    every = {TopicPartition(topic_name, p) for p in range(3)}
    seen: set[tuple[int, int]] = set()
    async with asyncio.timeout(60):
        async with member(kafka, f"g-{topic_name}") as c:
            c.subscribe([topic_name], listener=Listener("a", timeline))
            assert isinstance(c.group_coordinator, ConsumerGroupDriver)
            async for r in c:
                seen.add((r.partition, r.offset))
                if len(seen) == 120:
                    break
            assert c.assignment() == every
            assert c.group_metadata().generation_id > 0  # the member epoch
    assert seen == {(p, o) for p in range(3) for o in range(40)}
    assert events(timeline, "a", "assigned")[0] == every
    # stop() left the group: the revoke listener got everything, nothing was lost
    assert events(timeline, "a", "revoking")[-1] == every
    assert not events(timeline, "a", "lost")


async def test_two_members_split_the_partitions_and_nobody_double_consumes(
    kafka: Any, topic_name: str
) -> None:
    # a consumes alone while records keep coming; b joins: the broker moves partitions
    # from a to b (a revokes first, commits in its listener, then b gets them). No
    # partition is handed out by both at once, and every record is handed out.
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=4)
    group = f"g-{topic_name}"
    every = {TopicPartition(topic_name, p) for p in range(4)}
    timeline = Timeline()
    stop = asyncio.Event()
    producing = asyncio.ensure_future(keep_producing(kafka.bootstrap_servers, topic_name, stop))
    a = member(kafka, group, enable_auto_commit=False)
    b = member(kafka, group, enable_auto_commit=False)
    la = Listener("a", timeline, a)
    lb = Listener("b", timeline, b)
    a.subscribe([topic_name], listener=la)
    b.subscribe([topic_name], listener=lb)
    try:
        async with asyncio.timeout(90):
            await a.start()
            async with running(a, "a", timeline):
                await until(lambda: bool(handed_by(timeline, "a")), 30)
                await b.start()
                async with running(b, "b", timeline):
                    await until(
                        lambda: (
                            bool(a.assignment())
                            and bool(b.assignment())
                            and a.assignment() | b.assignment() == every
                            and not a.assignment() & b.assignment()
                        ),
                        30,
                    )
                    mark = len(timeline.handed)
                    await until(
                        lambda: {w for _, w, _, _ in timeline.handed[mark:]} == {"a", "b"}, 30
                    )
                    stop.set()
                    await producing
                    ends = await a.end_offsets(sorted(every))
                    await until(lambda: covers(timeline, ends), 30)
    finally:
        stop.set()
        await producing
    timeline.check()
    moved = set().union(*events(timeline, "b", "assigned"))
    assert moved, "b never got a partition"
    # a gave b's partitions back through on_partitions_revoked (and committed there)
    assert moved <= set().union(*events(timeline, "a", "revoking"))
    assert la.commits and all(c == "ok" for c in la.commits), la.commits
    assert all(c == "ok" for c in lb.commits), lb.commits
    assert la.lost == lb.lost == 0


async def test_a_member_that_stops_hands_its_partitions_to_the_other(
    kafka: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=4)
    await fill(kafka.bootstrap_servers, topic_name, 4, 30)
    group = f"g-{topic_name}"
    every = {TopicPartition(topic_name, p) for p in range(4)}
    timeline = Timeline()
    a = member(kafka, group)
    b = member(kafka, group)
    a.subscribe([topic_name], listener=Listener("a", timeline))
    b.subscribe([topic_name], listener=Listener("b", timeline))
    async with asyncio.timeout(90):
        await a.start()
        async with running(a, "a", timeline):
            await b.start()
            async with running(b, "b", timeline):
                await until(
                    lambda: (
                        bool(a.assignment())
                        and bool(b.assignment())
                        and a.assignment() | b.assignment() == every
                    ),
                    30,
                )
                b_had = b.assignment()
                await until(lambda: covers(timeline, dict.fromkeys(every, 30)), 30)
            # b left (stop() revoked and sent the leave heartbeat): a gets it all
            await until(lambda: a.assignment() == every, 30)
            await fill(kafka.bootstrap_servers, topic_name, 4, 10)
            await until(lambda: covers(timeline, dict.fromkeys(every, 40)), 30)
    timeline.check()
    late = {tp for seq, who, tp, off in timeline.handed if who == "a" and off >= 30}
    assert b_had <= late, "a did not consume the partitions b gave up"
    assert events(timeline, "b", "revoking")[-1] == b_had


async def test_a_commit_between_the_revoke_and_the_assign_step_names_only_owned_partitions(
    kafka: Any, topic_name: str, monkeypatch: Any
) -> None:
    # After a revoke step the machine stops owning the revoked partitions as soon as it
    # takes REVOKED; the assign step runs later on the worker. A getmany() returning in
    # between, then commit() (what every "poll, commit" loop does), committed the
    # revoked partition's position too and failed "not assigned to this member"
    # (seen in the mixed-group interop test). It commits what the member owns.
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=2)
    await fill(kafka.bootstrap_servers, topic_name, 2, 20)
    group = f"g-{topic_name}"
    timeline = Timeline()
    a = member(kafka, group, enable_auto_commit=False)
    b = member(kafka, group, enable_auto_commit=False)
    a.subscribe([topic_name], listener=Listener("a", timeline, a))
    b.subscribe([topic_name], listener=Listener("b", timeline, b))
    outcomes: list[str] = []
    revoked: list[frozenset[TopicPartition]] = []

    async def commit_in_the_gap(effect: Effect) -> None:
        if effect.kind is EffectKind.REVOKE_STEP and effect.partitions:
            revoked.append(effect.partitions)
        elif effect.kind is EffectKind.ASSIGN_STEP and revoked and not outcomes:
            try:  # from a task of its own, as the application's loop would
                await asyncio.ensure_future(a.commit())
                outcomes.append("ok")
            except Exception as exc:
                outcomes.append(repr(exc))

    async with asyncio.timeout(90):
        async with a:
            before_each_effect(a, monkeypatch, commit_in_the_gap)
            seen: set[int] = set()
            while seen != {0, 1}:  # both partitions have a position past what is committed
                batch = await a.getmany(timeout_ms=500)
                seen |= {tp.partition for tp in batch}
            async with b:
                await until(lambda: bool(outcomes), 30)
                kept = a.assignment()
                positions = {tp: await a.position(tp) for tp in kept}
    assert outcomes == ["ok"], outcomes
    assert len(revoked[0]) == 1 and not revoked[0] & kept
    assert kept and all(p == 20 for p in positions.values())
    committed = await committed_offsets(kafka, group, kept | revoked[0])
    # the kept partition's position was committed in the gap, the revoked one's by the
    # revoke listener
    assert set(committed.values()) == {20}, committed


class PositionCommits(ConsumerRebalanceListener):
    """The usual manual-commit listener: commit the position of every revoked partition
    (position() of a partition the consumer does not hold raises). Its first revoke
    waits for ``gate``."""

    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer
        self.calls: list[tuple[str, frozenset[TopicPartition], str]] = []
        self.in_first = asyncio.Event()
        self.gate = asyncio.Event()
        self.gate.set()

    async def on_partitions_assigned(self, assigned: frozenset[TopicPartition]) -> None:
        self.calls.append(("assigned", assigned, "ok"))

    async def on_partitions_revoked(self, revoked: frozenset[TopicPartition]) -> None:
        if not self.in_first.is_set():
            self.in_first.set()
            await self.gate.wait()
        try:
            offsets = {tp: await self.consumer.position(tp) for tp in revoked}
            await self.consumer.commit(offsets)
            self.calls.append(("revoked", revoked, "ok"))
        except Exception as exc:
            self.calls.append(("revoked", revoked, repr(exc)))

    async def on_partitions_lost(self, lost: frozenset[TopicPartition]) -> None:
        self.calls.append(("lost", lost, "ok"))


async def test_stop_during_a_revoke_step_revokes_only_what_is_still_held(
    kafka: Any, topic_name: str
) -> None:
    # stop() while a reconciliation's revoke listener runs: the leave then releases
    # everything the machine owns, which still includes the partition being revoked
    # (REVOKED was never taken). That partition is gone from the consumer when the
    # revoke step ends, so the leave's listener must get only the rest; given it too,
    # its position() raised, and the rest was never committed (read again elsewhere).
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=2)
    await fill(kafka.bootstrap_servers, topic_name, 2, 20)
    group = f"g-{topic_name}"
    every = {TopicPartition(topic_name, p) for p in range(2)}
    a = member(kafka, group, enable_auto_commit=False)
    listener = PositionCommits(a)
    listener.gate.clear()
    a.subscribe([topic_name], listener=listener)
    async with asyncio.timeout(90):
        await a.start()
        got = 0
        while got < 40:
            batch = await a.getmany(timeout_ms=500)
            got += sum(len(records) for records in batch.values())
        b = member(kafka, group, enable_auto_commit=False)
        b.subscribe([topic_name])
        async with b:
            await listener.in_first.wait()  # a revokes one partition for b
            driver = a.group_coordinator
            assert isinstance(driver, ConsumerGroupDriver)
            stopping = asyncio.ensure_future(a.stop())
            await until(lambda: driver.state is not State.RECONCILING, 10)
            listener.gate.set()
            await stopping
        committed = await committed_offsets(kafka, group, every)
    revokes = [(tps, outcome) for kind, tps, outcome in listener.calls if kind == "revoked"]
    assert [outcome for _, outcome in revokes] == ["ok", "ok"], listener.calls
    assert revokes[0][0] | revokes[1][0] == every and not revokes[0][0] & revokes[1][0]
    assert committed == dict.fromkeys(every, 20), committed


async def test_a_leave_before_the_assign_step_revokes_only_what_was_handed_over(
    kafka: Any, topic_name: str, monkeypatch: Any
) -> None:
    # the machine owns the new assignment from REVOKED on; the worker hands it to the
    # consumer at the assign step. A leave in between must not revoke partitions the
    # consumer never got (on_partitions_assigned never ran for them).
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=2)
    a = member(kafka, f"g-{topic_name}")
    listener = PositionCommits(a)
    a.subscribe([topic_name], listener=listener)
    stopping: list[asyncio.Future[None]] = []

    async def leave_first(effect: Effect) -> None:
        if effect.kind is EffectKind.ASSIGN_STEP and not stopping:
            stopping.append(asyncio.ensure_future(a.stop()))
            await until(lambda: driver.state is not State.RECONCILING, 10)

    async with asyncio.timeout(60):
        await a.start()
        driver = before_each_effect(a, monkeypatch, leave_first)
        await until(lambda: bool(stopping), 30)
        await stopping[0]
    assert not [c for c in listener.calls if c[0] == "revoked"], listener.calls


async def test_commit_then_a_new_member_resumes_from_the_committed_offsets(
    kafka: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=3)
    await fill(kafka.bootstrap_servers, topic_name, 3, 20)
    group = f"g-{topic_name}"
    every = sorted(TopicPartition(topic_name, p) for p in range(3))
    async with asyncio.timeout(90):
        async with member(kafka, group, enable_auto_commit=False) as a:
            a.subscribe([topic_name])
            got = 0
            async for _ in a:
                got += 1
                if got == 60:
                    break
            await a.commit()  # every consumed position, with the member epoch
            assert {tp: await a.committed(tp) for tp in every} == dict.fromkeys(every, 20)
            # explicit offsets too (partition 0 back to 15)
            await a.commit({every[0]: 15})
            assert await a.committed(every[0]) == 15
        await fill(kafka.bootstrap_servers, topic_name, 3, 10)
        first: dict[int, int] = {}
        async with member(kafka, group, enable_auto_commit=False) as b:
            b.subscribe([topic_name])
            seen = 0
            async for r in b:
                first.setdefault(r.partition, r.offset)
                seen += 1
                if seen == 5 + 10 + 10 + 10:
                    break
        assert first == {0: 15, 1: 20, 2: 20}


async def test_auto_commit_on_stop_lets_the_next_member_resume(kafka: Any, topic_name: str) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=2)
    await fill(kafka.bootstrap_servers, topic_name, 2, 25)
    group = f"g-{topic_name}"
    async with asyncio.timeout(60):
        async with member(kafka, group) as a:
            a.subscribe([topic_name])
            got = 0
            async for _ in a:
                got += 1
                if got == 50:
                    break
        # stop() auto-committed before revoking
        async with member(kafka, group) as b:
            b.subscribe([topic_name])
            tps = [TopicPartition(topic_name, p) for p in range(2)]
            assert {tp: await b.committed(tp) for tp in tps} == dict.fromkeys(tps, 25)


async def test_unsubscribe_revokes_and_a_new_subscription_rejoins(
    kafka: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=2)
    await fill(kafka.bootstrap_servers, topic_name, 2, 5)
    every = {TopicPartition(topic_name, p) for p in range(2)}
    timeline = Timeline()
    async with asyncio.timeout(60):
        async with member(kafka, f"g-{topic_name}") as c:
            listener = Listener("a", timeline)
            c.subscribe([topic_name], listener=listener)
            await c.getone()
            assert c.assignment() == every
            await c.unsubscribe()
            assert c.assignment() == frozenset()
            assert events(timeline, "a", "revoking")[-1] == every
            c.subscribe([topic_name], listener=listener)
            await c.getone()  # from the committed offsets (auto-commit before revoke)
            await until(lambda: c.assignment() == every, 20)
    # (as in Java, on_partitions_assigned is also called for an empty assignment: the
    # broker's first answer to a rejoin may assign nothing yet)
    assert [tps for tps in events(timeline, "a", "assigned") if tps] == [every, every]
    assert not events(timeline, "a", "lost")


async def test_three_members_over_twelve_partitions_move_only_what_must_move(
    kafka: Any, topic_name: str
) -> None:
    # a, b, c own 4 partitions each; c leaves: only c's 4 move (a and b revoke
    # nothing); d joins: exactly 4 move to d. Every record is handed out exactly once
    # (commits in the revoke listener), and never by two members at once.
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=12)
    group = f"g-{topic_name}"
    every = {TopicPartition(topic_name, p) for p in range(12)}
    timeline = Timeline()
    stop = asyncio.Event()
    producing = asyncio.ensure_future(keep_producing(kafka.bootstrap_servers, topic_name, stop))
    consumers = {n: member(kafka, group, enable_auto_commit=False) for n in "abcd"}
    for name, c in consumers.items():
        c.subscribe([topic_name], listener=Listener(name, timeline, c))
    a, b, c, d = consumers.values()

    def split(*members: Consumer) -> bool:
        owned = [m.assignment() for m in members]
        return sum(map(len, owned)) == 12 and set().union(*owned) == every

    def revoked_since(mark: int, who: str) -> set[TopicPartition]:
        return {
            tp for seq, n, k, tps in timeline.events if seq >= mark and n == who
            if k == "revoking" for tp in tps
        }  # fmt: skip

    def mark() -> int:
        return max((seq for seq, *_ in timeline.events), default=0) + 1

    try:
        async with asyncio.timeout(150):
            for name in "abc":
                await consumers[name].start()
            async with running(a, "a", timeline), running(b, "b", timeline):
                async with running(c, "c", timeline):
                    await until(lambda: split(a, b, c) and len(a.assignment()) == 4, 40)
                    before = {n: consumers[n].assignment() for n in "abc"}
                    left = mark()
                # c left (its listener committed)
                await until(lambda: split(a, b) and len(a.assignment()) == 6, 40)
                assert revoked_since(left, "a") == revoked_since(left, "b") == set()
                assert a.assignment() > before["a"] and b.assignment() > before["b"]
                await d.start()
                joined = mark()
                async with running(d, "d", timeline):
                    await until(lambda: split(a, b, d) and len(d.assignment()) == 4, 40)
                    gave = revoked_since(joined, "a") | revoked_since(joined, "b")
                    assert gave == d.assignment(), (gave, d.assignment())
                    stop.set()
                    await producing
                    ends = await a.end_offsets(sorted(every))
                    await until(lambda: covers(timeline, ends), 40)
    finally:
        stop.set()
        await producing
    timeline.check()
    handed = [(tp, offset) for _, _, tp, offset in timeline.handed]
    assert len(handed) == len(set(handed)), "a record was handed out twice"


async def test_a_subscribe_right_after_unsubscribe_keeps_no_released_partition(
    kafka: Any, topic_name: str, monkeypatch: Any
) -> None:
    # unsubscribe() starts the leave and flags the partition revoking; a subscribe()
    # right after keeps the subscription, so the leave must drop what it released.
    # Otherwise the flagged state stayed, and a rejoin handing back the same set (an
    # unchanged assignment keeps its states) left the partition never fetched again.
    tp = await forty_records(kafka.bootstrap_servers, topic_name)
    a = member(kafka, f"g-{topic_name}", enable_auto_commit=False)
    a.subscribe([topic_name])
    released = [False]
    at_rejoin: list[bool | None] = []  # the old state's revoking flag when it rejoins

    async def watch(effect: Effect) -> None:
        if effect.kind is EffectKind.REVOKE:
            released[0] = True
        elif effect.kind is EffectKind.ASSIGN_STEP and released[0] and not at_rejoin:
            state = a._subs.state_of(tp)
            at_rejoin.append(None if state is None else state.revoking)

    async with asyncio.timeout(60):
        async with a:
            before_each_effect(a, monkeypatch, watch)
            await take(a, 10)
            await a.commit()
            left = a.unsubscribe()
            a.subscribe([topic_name])
            await left
            await take(a, 30)  # the rest comes, from the committed 10
    assert at_rejoin == [None], at_rejoin
