"""The group coordinator against a real broker, driven directly (no fetcher)."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from aiokproto.admin import Admin, NewPartitions, NewTopic
from aiokproto.cluster.client import ClusterClient
from aiokproto.consumer.group import ClassicGroupDriver, GroupConfig
from aiokproto.consumer.listener import ConsumerRebalanceListener
from aiokproto.consumer.subscription import SubscriptionState
from aiokproto.structs import OffsetAndMetadata, TopicPartition
from tests.clients import client_for


async def create(bootstrap: str, topic: str, partitions: int) -> None:
    async with Admin(bootstrap_servers=bootstrap) as admin:
        await admin.create_topics(
            [NewTopic(topic, num_partitions=partitions, replication_factor=1)]
        )


class Recorder(ConsumerRebalanceListener):
    """Keeps every callback, and checks a global owner map (no partition owned twice)."""

    def __init__(self, name: str, owners: dict[TopicPartition, str]) -> None:
        self.name = name
        self.owners = owners
        self.events: list[tuple[str, frozenset[TopicPartition]]] = []

    async def on_partitions_revoked(self, revoked: frozenset[TopicPartition]) -> None:
        self.events.append(("revoked", revoked))
        for tp in revoked:
            assert self.owners.pop(tp) == self.name

    async def on_partitions_assigned(self, assigned: frozenset[TopicPartition]) -> None:
        self.events.append(("assigned", assigned))
        for tp in assigned:
            assert tp not in self.owners, (
                f"{tp} assigned to {self.name} while {self.owners[tp]} owns it"
            )
            self.owners[tp] = self.name

    async def on_partitions_lost(self, lost: frozenset[TopicPartition]) -> None:
        self.events.append(("lost", lost))
        for tp in lost:
            if self.owners.get(tp) == self.name:
                del self.owners[tp]


def recorder(m: Member) -> Recorder:
    listener = m.sub.listener
    assert isinstance(listener, Recorder)
    return listener


class Member:
    def __init__(
        self,
        bootstrap: str,
        topic: str | re.Pattern[str],
        group: str,
        listener: ConsumerRebalanceListener | None = None,
        client_options: dict[str, Any] | None = None,
        **options: Any,
    ) -> None:
        self.client: ClusterClient = client_for(bootstrap, **(client_options or {}))
        self.sub = SubscriptionState()
        if isinstance(topic, str):
            self.sub.subscribe([topic], listener=listener)
        else:
            self.sub.subscribe(pattern=topic, listener=listener)
        self.group = ClassicGroupDriver(self.client, self.sub, GroupConfig(group, **options))

    async def start(self) -> Member:
        await self.client.start()
        await self.group.start()
        return self

    async def close(self) -> None:
        try:
            await self.group.close()
        finally:
            await self.client.close()

    async def abandon(self) -> None:
        """Die without leaving the group (as if the process were killed)."""
        for task in self.group._tasks:
            task.cancel()
        for task in self.group._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.group._tasks = []
        self.group._closed = True
        await self.client.close()

    def assigned(self) -> frozenset[TopicPartition]:
        return self.sub.assigned()


@contextlib.asynccontextmanager
async def members(
    n: int, bootstrap: str, topic: str, group: str, **options: Any
) -> AsyncIterator[list[Member]]:
    started: list[Member] = []
    try:
        for _ in range(n):
            started.append(await Member(bootstrap, topic, group, **options).start())
        yield started
    finally:
        for m in started:
            await m.close()


async def eventually(check: Callable[[], bool], limit_s: float, what: str) -> None:
    deadline = time.monotonic() + limit_s
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)


def split_ok(group: list[Member], topic: str, partitions: int) -> bool:
    sets = [m.assigned() for m in group]
    if any(m.group.state.value != "stable" for m in group):
        return False
    if len({m.group.generation_id for m in group}) != 1:
        return False
    union = frozenset().union(*sets)
    return sum(len(s) for s in sets) == partitions and union == {
        TopicPartition(topic, p) for p in range(partitions)
    }


FAST: dict[str, Any] = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 500}


@pytest.mark.kafka39
@pytest.mark.parametrize("strategy", ["range", "roundrobin", "sticky", "cooperative-sticky"])
async def test_three_members_own_twelve_partitions_once(
    kafka: Any, topic_name: str, strategy: str
) -> None:
    await create(kafka.bootstrap_servers, topic_name, 12)
    async with members(
        3,
        kafka.bootstrap_servers,
        topic_name,
        f"g-{topic_name}",
        partition_assignment_strategy=(strategy,),
        **FAST,
    ) as group:
        await eventually(lambda: split_ok(group, topic_name, 12), 30, "a 3-way split")
        assert sorted(len(m.assigned()) for m in group) == [4, 4, 4]
        leaders = [m for m in group if m.group.is_leader]
        assert len(leaders) == 1


@pytest.mark.kafka39
async def test_dead_member_is_replaced_after_session_timeout(kafka: Any, topic_name: str) -> None:
    await create(kafka.bootstrap_servers, topic_name, 4)
    async with members(2, kafka.bootstrap_servers, topic_name, f"g-{topic_name}", **FAST) as group:
        await eventually(lambda: split_ok(group, topic_name, 4), 30, "a 2-way split")
        survivor, victim = group
        before = survivor.group.generation_id
        await victim.abandon()
        started = time.monotonic()
        await eventually(
            lambda: split_ok([survivor], topic_name, 4) and survivor.group.generation_id > before,
            30,
            "the survivor taking every partition",
        )
        took = time.monotonic() - started
        # the broker waits for the session to expire: not before ~6 s
        assert 4.5 < took < 25, took
        group.remove(victim)


async def test_cooperative_join_revokes_only_what_moves(kafka: Any, topic_name: str) -> None:
    await create(kafka.bootstrap_servers, topic_name, 6)
    owners: dict[TopicPartition, str] = {}
    opts: dict[str, Any] = {"partition_assignment_strategy": ("cooperative-sticky",), **FAST}
    group = f"g-{topic_name}"
    first = [
        await Member(
            kafka.bootstrap_servers, topic_name, group, Recorder(f"m{i}", owners), **opts
        ).start()
        for i in range(2)
    ]
    late: Member | None = None
    try:
        await eventually(lambda: split_ok(first, topic_name, 6), 30, "a 2-way split")
        before = {m: m.assigned() for m in first}
        for m in first:
            recorder(m).events.clear()
        late = await Member(
            kafka.bootstrap_servers, topic_name, group, Recorder("late", owners), **opts
        ).start()
        everyone = [*first, late]
        await eventually(lambda: split_ok(everyone, topic_name, 6), 40, "a 3-way split")
        assert sorted(len(m.assigned()) for m in everyone) == [2, 2, 2]
        for m in first:
            events = recorder(m).events
            revoked = frozenset().union(*(p for kind, p in events if kind == "revoked"))
            kept = before[m] & m.assigned()
            # only the partition that moved to the new member was revoked
            assert revoked == before[m] - m.assigned()
            assert len(revoked) == 1 and len(kept) == 2
            assert not any(kind == "lost" for kind, _ in events)
        assert owners == {tp: recorder(m).name for m in everyone for tp in m.assigned()}
    finally:
        for m in [*first, *([late] if late else [])]:
            await m.close()


async def test_commit_and_fetch_committed(kafka: Any, topic_name: str) -> None:
    await create(kafka.bootstrap_servers, topic_name, 2)
    async with members(1, kafka.bootstrap_servers, topic_name, f"g-{topic_name}", **FAST) as (m,):
        assert await m.group.wait_for_assignment(30)
        tp0, tp1 = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)
        assert await m.group.fetch_committed([tp0, tp1]) == {tp0: None, tp1: None}
        await m.group.commit({tp0: OffsetAndMetadata(5, "meta"), tp1: OffsetAndMetadata(7)})
        got = await m.group.fetch_committed([tp0, tp1])
        assert got == {tp0: OffsetAndMetadata(5, "meta"), tp1: OffsetAndMetadata(7)}


@pytest.mark.kafka39
async def test_static_member_rejoins_without_rebalance(kafka: Any, topic_name: str) -> None:
    await create(kafka.bootstrap_servers, topic_name, 4)
    group = f"g-{topic_name}"
    owners: dict[TopicPartition, str] = {}
    opts: dict[str, Any] = {"session_timeout_ms": 20000, "heartbeat_interval_ms": 500}
    a = await Member(
        kafka.bootstrap_servers,
        topic_name,
        group,
        Recorder("a", owners),
        group_instance_id="inst-a",
        **opts,
    ).start()
    b = await Member(
        kafka.bootstrap_servers, topic_name, group, group_instance_id="inst-b", **opts
    ).start()
    b2: Member | None = None
    try:
        await eventually(lambda: split_ok([a, b], topic_name, 4), 30, "a 2-way split")
        generation, b_had = a.group.generation_id, b.assigned()
        recorder(a).events.clear()
        await b.close()  # static: no LeaveGroup
        b2 = await Member(
            kafka.bootstrap_servers, topic_name, group, group_instance_id="inst-b", **opts
        ).start()
        assert await b2.group.wait_for_assignment(30)
        assert b2.assigned() == b_had
        await asyncio.sleep(2)  # a few heartbeats: nothing happens to the other member
        assert a.group.generation_id == generation and a.group.state.value == "stable"
        assert recorder(a).events == []
    finally:
        await a.close()
        if b2 is not None:
            await b2.close()


async def test_second_static_member_with_same_id_fences_the_first(
    kafka: Any, topic_name: str
) -> None:
    await create(kafka.bootstrap_servers, topic_name, 1)
    group = f"g-{topic_name}"
    async with members(
        1, kafka.bootstrap_servers, topic_name, group, group_instance_id="same", **FAST
    ) as (first,):
        assert await first.group.wait_for_assignment(30)
        async with members(
            1, kafka.bootstrap_servers, topic_name, group, group_instance_id="same", **FAST
        ) as (second,):
            assert await second.group.wait_for_assignment(30)
            await eventually(
                lambda: first.group.state.value == "failed", 20, "the first to be fenced"
            )
            from aiokproto.errors import FencedInstanceIdError

            with pytest.raises(FencedInstanceIdError, match="same group_instance_id 'same'"):
                first.group.raise_if_failed()
            first.group.raise_if_failed()  # raised once
            with pytest.raises(FencedInstanceIdError):
                await first.group.commit({TopicPartition(topic_name, 0): OffsetAndMetadata(1)})
            assert first.assigned() == frozenset()


async def test_member_that_stops_polling_leaves_and_rejoins(
    kafka: Any, topic_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    await create(kafka.bootstrap_servers, topic_name, 2)
    opts: dict[str, Any] = {**FAST, "max_poll_interval_ms": 3000}
    async with members(2, kafka.bootstrap_servers, topic_name, f"g-{topic_name}", **opts) as (
        idle,
        busy,
    ):
        await eventually(lambda: split_ok([idle, busy], topic_name, 2), 30, "a 2-way split")

        async def keep_polling() -> None:
            while True:
                busy.group.notify_poll()
                await asyncio.sleep(0.2)

        poller = asyncio.create_task(keep_polling())
        try:
            await eventually(
                lambda: split_ok([busy], topic_name, 2), 30, "the busy member taking all"
            )
            assert idle.assigned() == frozenset()
            assert any("max_poll_interval_ms=3000" in r.getMessage() for r in caplog.records)
            idle.group.notify_poll()
            await eventually(lambda: split_ok([idle, busy], topic_name, 2), 30, "the rejoin")
        finally:
            poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await poller


async def test_closing_member_leaves_at_once(kafka: Any, topic_name: str) -> None:
    await create(kafka.bootstrap_servers, topic_name, 4)
    group = f"g-{topic_name}"
    opts: dict[str, Any] = {"session_timeout_ms": 30000, "heartbeat_interval_ms": 500}
    async with members(1, kafka.bootstrap_servers, topic_name, group, **opts) as (stay,):
        leaving = await Member(kafka.bootstrap_servers, topic_name, group, **opts).start()
        try:
            await eventually(lambda: split_ok([stay, leaving], topic_name, 4), 30, "a 2-way split")
        finally:
            await leaving.close()
        started = time.monotonic()
        # far sooner than the 30 s session timeout: LeaveGroup told the broker
        await eventually(lambda: split_ok([stay], topic_name, 4), 10, "the hand-over")
        assert time.monotonic() - started < 10


async def test_pattern_subscription_picks_up_new_topics(kafka: Any, topic_name: str) -> None:
    first, second = f"{topic_name}-a", f"{topic_name}-b"
    await create(kafka.bootstrap_servers, first, 2)
    pattern = re.compile(re.escape(topic_name) + r"-.*")
    m = await Member(
        kafka.bootstrap_servers,
        pattern,
        f"g-{topic_name}",
        client_options={"metadata_max_age_ms": 1000},
        **FAST,
    ).start()
    try:
        assert await m.group.wait_for_assignment(30)
        assert m.assigned() == {TopicPartition(first, 0), TopicPartition(first, 1)}
        await create(kafka.bootstrap_servers, second, 1)
        await eventually(lambda: TopicPartition(second, 0) in m.assigned(), 30, "the new topic")
        assert len(m.assigned()) == 3
    finally:
        await m.close()


async def test_leader_rebalances_when_partitions_are_added(kafka: Any, topic_name: str) -> None:
    await create(kafka.bootstrap_servers, topic_name, 2)
    opts: dict[str, Any] = {"client_options": {"metadata_max_age_ms": 1000}, **FAST}
    async with members(2, kafka.bootstrap_servers, topic_name, f"g-{topic_name}", **opts) as group:
        await eventually(lambda: split_ok(group, topic_name, 2), 30, "a 2-way split")
        async with Admin(bootstrap_servers=kafka.bootstrap_servers) as admin:
            await admin.create_partitions({topic_name: NewPartitions(4)})
        await eventually(lambda: split_ok(group, topic_name, 4), 30, "the 4-partition split")


def fail_first_commit(m: Member, code: int, before: Callable[[], Any] | None = None) -> list[int]:
    """Make the member's first OffsetCommit answer ``code`` (fault injection)."""
    real = m.group._offsets.commit_once
    calls: list[int] = []

    async def once(*args: Any, **kwargs: Any) -> dict[TopicPartition, int]:
        calls.append(1)
        if len(calls) == 1:
            if before is not None:
                await before()
            return dict.fromkeys(args[0], code)
        return await real(*args, **kwargs)

    m.group._offsets.commit_once = once  # type: ignore[method-assign]
    return calls


@pytest.mark.kafka39
async def test_commit_during_rebalance_is_sent_again_when_still_owned(
    kafka: Any, topic_name: str
) -> None:
    await create(kafka.bootstrap_servers, topic_name, 2)
    opts = {"partition_assignment_strategy": ("range",), "enable_auto_commit": False, **FAST}
    async with members(1, kafka.bootstrap_servers, topic_name, f"g-{topic_name}", **opts) as (m,):
        assert await m.group.wait_for_assignment(30)
        generation = m.group.generation_id
        tp0 = TopicPartition(topic_name, 0)
        calls = fail_first_commit(m, 27)  # REBALANCE_IN_PROGRESS
        await m.group.commit({tp0: OffsetAndMetadata(5)}, timeout_ms=30000)
        assert len(calls) == 2 and m.group.generation_id > generation  # rejoined in between
        assert await m.group.fetch_committed([tp0]) == {tp0: OffsetAndMetadata(5)}


async def test_commit_fails_clearly_when_partitions_moved(kafka: Any, topic_name: str) -> None:
    from aiokproto.consumer.group import CommitFailedError

    await create(kafka.bootstrap_servers, topic_name, 2)
    group = f"g-{topic_name}"
    opts = {"partition_assignment_strategy": ("range",), "enable_auto_commit": False, **FAST}
    async with members(1, kafka.bootstrap_servers, topic_name, group, **opts) as (a,):
        assert await a.group.wait_for_assignment(30)
        joined: list[Member] = []

        async def second_member_joins() -> None:
            joined.append(await Member(kafka.bootstrap_servers, topic_name, group, **opts).start())
            await eventually(lambda: split_ok([a, *joined], topic_name, 2), 30, "a 2-way split")

        fail_first_commit(a, 27, second_member_joins)
        tps = {TopicPartition(topic_name, p): OffsetAndMetadata(3) for p in range(2)}
        try:
            with pytest.raises(CommitFailedError, match="not assigned to this member"):
                await a.group.commit(tps, timeout_ms=30000)
        finally:
            for m in joined:
                await m.close()


async def test_unknown_member_on_commit_loses_partitions_and_rejoins(
    kafka: Any, topic_name: str
) -> None:
    from aiokproto.consumer.group import CommitFailedError

    await create(kafka.bootstrap_servers, topic_name, 1)
    owners: dict[TopicPartition, str] = {}
    opts = {"enable_auto_commit": False, **FAST}
    m = await Member(
        kafka.bootstrap_servers, topic_name, f"g-{topic_name}", Recorder("m", owners), **opts
    ).start()
    try:
        assert await m.group.wait_for_assignment(30)
        tp0 = TopicPartition(topic_name, 0)
        fail_first_commit(m, 25)  # UNKNOWN_MEMBER_ID: the broker forgot us
        with pytest.raises(CommitFailedError):
            await m.group.commit({tp0: OffsetAndMetadata(1)}, timeout_ms=30000)
        assert ("lost", frozenset({tp0})) in recorder(m).events
        assert await m.group.wait_for_assignment(30) and m.assigned() == {tp0}
        await m.group.commit({tp0: OffsetAndMetadata(1)})  # a member again
    finally:
        await m.close()


async def test_listener_exception_surfaces_once(kafka: Any, topic_name: str) -> None:
    class Broken(ConsumerRebalanceListener):
        async def on_partitions_assigned(self, assigned: frozenset[TopicPartition]) -> None:
            raise RuntimeError("listener bug")

    await create(kafka.bootstrap_servers, topic_name, 1)
    m = await Member(
        kafka.bootstrap_servers, topic_name, f"g-{topic_name}", Broken(), **FAST
    ).start()
    try:
        assert await m.group.wait_for_assignment(30)
        with pytest.raises(RuntimeError, match="listener bug"):
            m.group.raise_if_failed()
        m.group.raise_if_failed()
        assert m.group.state.value == "stable" and m.assigned()
    finally:
        await m.close()


async def test_unsubscribe_leaves_the_group(kafka: Any, topic_name: str) -> None:
    await create(kafka.bootstrap_servers, topic_name, 2)
    opts = {"session_timeout_ms": 30000, "heartbeat_interval_ms": 500}
    async with members(2, kafka.bootstrap_servers, topic_name, f"g-{topic_name}", **opts) as (a, b):
        await eventually(lambda: split_ok([a, b], topic_name, 2), 30, "a 2-way split")
        await b.group.unsubscribe()
        b.sub.unsubscribe()
        b.group.request_rejoin()
        await eventually(lambda: split_ok([a], topic_name, 2), 10, "the hand-over")
        assert b.group.state.value == "unjoined" and b.assigned() == frozenset()
