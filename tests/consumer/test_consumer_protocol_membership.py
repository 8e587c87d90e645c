"""KIP-848 membership against the real broker when a member does not leave cleanly:
a member killed without leaving keeps its partitions until the group's session timeout
(then the broker moves them), and a static member (``group_instance_id``) that comes
back within the timeout gets its partitions back with no reassignment at all.

The member that goes away is its own OS process (tests.faults.chaos.member), so a
SIGKILL is a real crash: no leave heartbeat, no final commit."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from aiokproto.consumer import Consumer
from aiokproto.structs import TopicPartition
from tests.consumer.conftest import create_topic, set_group_timeouts
from tests.consumer.test_consumer_protocol_broker import fill, member
from tests.consumer.test_group_guarantees import Listener, Timeline, keep_producing
from tests.faults.chaos.members import MemberPool

SESSION_MS = 6_000
PARTITIONS = 4


class History:
    """Every assignment a consumer had, with when it got it."""

    def __init__(self) -> None:
        self.changes: list[tuple[float, frozenset[TopicPartition]]] = []

    def note(self, now: frozenset[TopicPartition]) -> None:
        if not self.changes or self.changes[-1][1] != now:
            self.changes.append((time.monotonic(), now))

    @property
    def current(self) -> frozenset[TopicPartition]:
        return self.changes[-1][1] if self.changes else frozenset()

    def since(self, t: float) -> list[frozenset[TopicPartition]]:
        return [tps for at, tps in self.changes if at >= t]


@asynccontextmanager
async def polling(consumer: Consumer, history: History) -> AsyncIterator[None]:
    async def loop() -> None:
        while True:
            await consumer.getmany(timeout_ms=100)
            history.note(consumer.assignment())

    task = asyncio.ensure_future(loop())
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def wait_for(predicate: Any, limit_s: float, what: str) -> float:
    began = time.monotonic()
    while not predicate():
        if time.monotonic() - began > limit_s:
            raise AssertionError(f"not within {limit_s} s: {what}")
        await asyncio.sleep(0.05)
    return time.monotonic() - began


async def setup(kafka: Any, topic: str, tmp_path: Path, static: bool) -> tuple[str, MemberPool]:
    group = f"g-{topic}"
    await create_topic(kafka.bootstrap_servers, topic, partitions=PARTITIONS)
    await fill(kafka.bootstrap_servers, topic, PARTITIONS, 50)
    await set_group_timeouts(
        kafka.bootstrap_servers, group, session_ms=SESSION_MS, heartbeat_ms=500
    )
    pool = MemberPool(tmp_path, kafka.bootstrap_servers, topic, group, "consumer", static)
    return group, pool


async def test_a_killed_member_keeps_its_partitions_until_the_session_times_out(
    kafka: Any, topic_name: str, tmp_path: Path
) -> None:
    group, pool = await setup(kafka, topic_name, tmp_path, static=False)
    every = frozenset(TopicPartition(topic_name, p) for p in range(PARTITIONS))
    history = History()
    try:
        async with asyncio.timeout(90), member(kafka, group) as b:
            b.subscribe([topic_name])
            async with polling(b, history):
                await wait_for(lambda: history.current == every, 30, "b owns everything alone")
                pool.start(0)
                await wait_for(lambda: len(history.current) == 2, 30, "the process took half")
                pool.kill(0)
                killed = time.monotonic()
                took = await wait_for(lambda: history.current == every, 30, "b got all back")
    finally:
        pool.kill_everything()
    # not moved at once (nobody told the broker), and moved once the session expired
    assert took >= SESSION_MS / 1000 * 0.5, f"moved after {took:.1f} s"
    assert history.since(killed)[-1] == every
    print(f"the killed member's partitions moved after {took:.1f} s (session {SESSION_MS} ms)")


async def test_a_static_member_back_within_the_session_gets_its_partitions_back(
    kafka: Any, topic_name: str, tmp_path: Path
) -> None:
    # stop() sends the static leave (epoch -2): the broker keeps the assignment for the
    # session timeout, so the replacement process with the same group_instance_id takes
    # over the same partitions and the other member sees no rebalance at all.
    history = History()
    async with static_pair(kafka, topic_name, tmp_path, history) as (pool, first):
        settled = time.monotonic()
        first.proc.terminate()
        assert await asyncio.to_thread(first.proc.wait, 30) == 0
        del pool.live[0]
        second = pool.start(0)
        await wait_for(lambda: consumed(second), SESSION_MS / 1000, "the replacement consumed")
        await asyncio.sleep(SESSION_MS / 1000)  # past the session: still nothing moves
        changes = history.since(settled)
    assert changes == [], f"b's assignment changed while its peer restarted: {changes}"
    log = second.log.read_text()
    assert "assigned" in log
    assert "revoked" not in log and "lost" not in log


async def test_a_static_member_replaced_after_a_crash_waits_for_the_session(
    kafka: Any, topic_name: str, tmp_path: Path
) -> None:
    # SIGKILL: no leave, so the broker still counts the old process as the instance's
    # owner; the replacement gets UnreleasedInstanceIdError (typed, on every poll, as
    # Java's fatal error) until the session expires. Subscribing again then joins.
    history = History()
    async with static_pair(kafka, topic_name, tmp_path, history) as (pool, _):
        pool.kill(0)
        killed = time.monotonic()
        second = pool.start(0)
        took = await wait_for(lambda: consumed(second), 40, "the replacement consumed")
    log = second.log.read_text()
    assert "the instance id is still held" in log
    assert took >= SESSION_MS / 1000 * 0.5, f"joined after {took:.1f} s"
    # b usually takes the crashed member's partitions when its session expires, but a
    # replacement that rejoins before b's next heartbeat gets them straight from the
    # broker (seen under load), so b's history is not asserted on.
    print(f"b's assignment changes after the kill: {len(history.since(killed))}")


def consumed(m: Any) -> bool:
    return bool(m.out.exists() and m.out.stat().st_size > 0)


@asynccontextmanager
async def static_pair(
    kafka: Any, topic: str, tmp_path: Path, history: History
) -> AsyncIterator[tuple[MemberPool, Any]]:
    """An in-process static member b and a static member process, the group split
    between them and records arriving."""
    group, pool = await setup(kafka, topic, tmp_path, static=True)
    stop = asyncio.Event()
    # records keep coming: a replacement has something to consume (and log) at once
    producing = asyncio.ensure_future(keep_producing(kafka.bootstrap_servers, topic, stop))
    try:
        async with asyncio.timeout(120), member(kafka, group, group_instance_id="b") as b:
            b.subscribe([topic])
            async with polling(b, history):
                first = pool.start(0)
                await wait_for(lambda: len(history.current) == 2, 30, "the group split")
                await wait_for(lambda: consumed(first), 30, "the process consumed")
                yield pool, first
    finally:
        stop.set()
        await producing
        pool.kill_everything()


async def test_a_member_that_stops_polling_leaves_and_rejoins_at_its_next_poll(
    kafka: Any, topic_name: str
) -> None:
    # max_poll_interval_ms under KIP-848 (Java's rule): the member sends the leave
    # heartbeat, its partitions go to the other member and its listener hears
    # on_partitions_lost; the next poll rejoins and the group splits again.
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=PARTITIONS)
    group = f"g-{topic_name}"
    # b learns of a's leave at its next heartbeat: 1 s apart instead of Kafka's 5 s (a
    # loaded CI machine once took more than the 20 s below to hand b everything)
    await set_group_timeouts(
        kafka.bootstrap_servers, group, session_ms=45_000, heartbeat_ms=1_000
    )
    every = frozenset(TopicPartition(topic_name, p) for p in range(PARTITIONS))
    timeline = Timeline()
    history = History()
    async with asyncio.timeout(90):
        async with (
            member(kafka, group, max_poll_interval_ms=2_000) as a,
            member(kafka, group) as b,
        ):
            a.subscribe([topic_name], listener=Listener("a", timeline))
            b.subscribe([topic_name])
            async with polling(b, history):
                while len(a.assignment()) != 2:
                    await a.getmany(timeout_ms=100)
                # a stops polling
                await wait_for(lambda: history.current == every, 20, "b took everything")
                assert [e for e in timeline.events if e[2] == "lost"], timeline.events
                while len(a.assignment()) != 2:  # polling again rejoins
                    await a.getmany(timeout_ms=100)
                await wait_for(lambda: len(history.current) == 2, 20, "the group split again")


async def test_manual_assignment_commits_without_joining(kafka: Any, topic_name: str) -> None:
    # assign() with group_protocol="consumer": no membership at all, yet commits go to
    # the group's offsets (as a simple consumer group's, generation -1)
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=1)
    await fill(kafka.bootstrap_servers, topic_name, 1, 10)
    tp = TopicPartition(topic_name, 0)
    group = f"g-{topic_name}"
    async with asyncio.timeout(60):
        async with member(kafka, group) as c:
            c.assign([tp])
            got = await c.getmany(tp, timeout_ms=5_000)
            while len(got.get(tp, [])) < 4:
                got = await c.getmany(tp, timeout_ms=5_000, max_records=4)
            await c.commit({tp: 4})
            assert await c.committed(tp) == 4
        async with member(kafka, group) as again:
            again.assign([tp])
            assert (await again.getone()).offset == 4
