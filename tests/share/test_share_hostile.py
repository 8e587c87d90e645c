"""ShareConsumer used badly, against the real 4.4.0 broker: wrong arguments, foreign and
stale records, cancelled commits, concurrent stops, deleted topics, late members,
failing deserializers, lock renewal."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from typing import Any

import pytest

from aiokproto.admin import Admin
from aiokproto.admin.batch_error import AdminBatchError
from aiokproto.consumer.errors import RecordDeserializationError
from aiokproto.errors import (
    ConsumerStoppedError,
    IllegalStateError,
    KafkaConfigError,
    KafkaError,
)
from aiokproto.share import ShareConsumer, ShareRecord
from aiokproto.share.driver import ShareGroupDriver
from aiokproto.share.fetcher import ShareFetcher
from aiokproto.structs import TopicPartition
from tests.consumer.conftest import create_topic
from tests.share.conftest import configure_share_group
from tests.share.test_share_consumer_broker import fill, setup, share


async def take(c: ShareConsumer, n: int, *, timeout_ms: int = 300) -> list[ShareRecord]:
    out: list[ShareRecord] = []
    while len(out) < n:
        for rs in (await c.getmany(timeout_ms=timeout_ms, max_records=n - len(out))).values():
            out.extend(rs)
    return out


async def drain(c: ShareConsumer, *, quiet_s: float = 1.5) -> list[ShareRecord]:
    """Everything until nothing comes for ``quiet_s``."""
    out: list[ShareRecord] = []
    quiet = time.monotonic()
    while time.monotonic() - quiet < quiet_s:
        got = [r for rs in (await c.getmany(timeout_ms=200)).values() for r in rs]
        if got:
            out.extend(got)
            quiet = time.monotonic()
    return out


# -- arguments --------------------------------------------------------------------------


async def test_wrong_types_and_options_are_config_errors(kafka: Any) -> None:
    bs = kafka.bootstrap_servers
    bad: list[dict[str, Any]] = [
        {},
        {"group_id": ""},
        {"group_id": 5},
        {"group_id": "g", "acknowledgement_mode": "auto"},
        {"group_id": "g", "max_poll_records": 0},
        {"group_id": "g", "max_poll_records": True},
        {"group_id": "g", "fetch_max_wait_ms": -1},
        {"group_id": "g", "value_deserializer": "utf-8"},
        {"group_id": "g", "acknowledgement_commit_callback": 1},
        {"group_id": "g", "client_rack": 3},
        {"group_id": "g", "no_such_option": 1},
    ]
    for opts in bad:
        with pytest.raises(KafkaConfigError):
            ShareConsumer("t", bootstrap_servers=bs, **opts)
    for topics in ((["t"],), ("",), (5,), (None,)):
        with pytest.raises(KafkaConfigError):
            ShareConsumer(*topics, bootstrap_servers=bs, group_id="g")
    c = ShareConsumer(bootstrap_servers=bs, group_id="g")
    with pytest.raises(IllegalStateError):
        await c.getmany()
    with pytest.raises(IllegalStateError):
        c.subscribe(["t"])
    async with c:
        for topics in (5, ["t", 5], [""], None):
            with pytest.raises(KafkaConfigError):
                c.subscribe(topics)  # type: ignore[arg-type]
        assert c.subscription() == frozenset()
        c.subscribe("t")  # one name, not its letters
        assert c.subscription() == {"t"}
        for kwargs in ({"max_records": 0}, {"max_records": 1.5}, {"timeout_ms": "1"}):
            with pytest.raises(KafkaConfigError):
                await c.getmany(**kwargs)
        with pytest.raises(IllegalStateError, match="explicit"):
            c.acknowledge(ShareRecord("t", 0, 0, 0, 0, None, None, ()))
        assert await c.commit() == {}  # nothing pending
    assert c.acquisition_lock_timeout_ms is None or c.acquisition_lock_timeout_ms > 0


async def test_foreign_stale_and_double_acknowledgements(kafka: Any, topic_name: str) -> None:
    group = await setup(kafka, topic_name, 1, 10)
    async with asyncio.timeout(30):
        a = share(kafka, group, topic_name, acknowledgement_mode="explicit")
        async with a:
            assert await a.commit() == {}  # nothing pending yet
            mine = await take(a, 10)  # the whole batch is acquired by a
            with pytest.raises(IllegalStateError):
                a.acknowledge(mine[0]._replace(partition=7), "accept")
            with pytest.raises(KafkaConfigError):
                a.acknowledge((topic_name, 0, mine[0].offset), "accept")  # type: ignore[arg-type]
            a.acknowledge(mine[0], "renew")
            a.acknowledge(mine[0], "accept")  # renew then accept is fine
            with pytest.raises(IllegalStateError):
                a.acknowledge(mine[0], "accept")  # twice
            for r in mine[1:5]:
                a.acknowledge(r, "accept")
            for r in mine[5:]:
                a.acknowledge(r, "release")
            res = await a.commit()
            assert res == {TopicPartition(topic_name, 0): None}
            assert await a.commit() == {}  # nothing left
            with pytest.raises(IllegalStateError):
                a.acknowledge(mine[7], "accept")  # released already
        with pytest.raises(ConsumerStoppedError):
            a.acknowledge(mine[1], "accept")  # stale: the consumer stopped
        with pytest.raises(ConsumerStoppedError):
            await a.commit()


# -- commit, stop ------------------------------------------------------------------------


async def test_a_cancelled_commit_does_not_break_the_next(kafka: Any, topic_name: str) -> None:
    group = await setup(kafka, topic_name, 1, 20)
    async with asyncio.timeout(30):
        async with share(kafka, group, topic_name, acknowledgement_mode="explicit") as c:
            first = await take(c, 10)
            for r in first:
                c.acknowledge(r, "accept")
            task = asyncio.create_task(c.commit())
            await asyncio.sleep(0)  # the commit is waiting for the broker now
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # cancelled again at once, before any I/O
            rest = await take(c, 10)
            for r in rest:
                c.acknowledge(r, "accept")
            task = asyncio.create_task(c.commit())
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            res = await c.commit(timeout_ms=10_000)
            assert all(e is None for e in res.values())
            assert await c.commit() == {}
        # everything accepted: a new member finds nothing
        async with share(kafka, group, topic_name) as d:
            assert await drain(d, quiet_s=1.0) == []


async def test_stop_twice_and_concurrently(kafka: Any, topic_name: str) -> None:
    group = await setup(kafka, topic_name, 1, 5)
    async with asyncio.timeout(30):
        c = share(kafka, group, topic_name)
        await c.stop()  # never started
        c = share(kafka, group, topic_name)
        await c.start()
        await take(c, 5)
        await asyncio.gather(c.stop(), c.stop(), c.stop())
        await c.stop()
        with pytest.raises(ConsumerStoppedError):
            await c.start()


async def test_stop_ends_a_waiting_getmany_and_async_for(kafka: Any, topic_name: str) -> None:
    group = await setup(kafka, topic_name, 1, 0)
    async with asyncio.timeout(30):
        c = share(kafka, group, topic_name)
        await c.start()
        waiting = asyncio.create_task(c.getmany(timeout_ms=60_000))
        seen: list[ShareRecord] = []

        async def loop() -> None:
            async for r in c:
                seen.append(r)

        looping = asyncio.create_task(loop())
        await asyncio.sleep(1.0)
        began = time.monotonic()
        await c.stop()
        with pytest.raises(ConsumerStoppedError):
            await waiting
        await looping  # just ends
        assert time.monotonic() - began < 5
        assert seen == []
        with pytest.raises(ConsumerStoppedError):
            await c.getmany()
        assert [r async for r in c] == []


async def test_a_failing_broker_task_is_fatal_on_every_poll(
    kafka: Any, topic_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A defect in a broker's fetch task (not a broker answer) reaches the application
    at once and on every poll after it, a new subscription does not hide it, and
    stop() still ends promptly (BrokerTasks starts nothing after a failure)."""
    group = await setup(kafka, topic_name, 1, 5)

    async def broken(self: ShareFetcher, node: int, session: Any) -> Any:
        raise ValueError("a defect in the fetch loop")

    monkeypatch.setattr(ShareFetcher, "_exchange", broken)
    async with asyncio.timeout(30):
        c = share(kafka, group, topic_name)
        await c.start()
        with pytest.raises(KafkaError, match=r"share fetcher for broker \d+ failed: ValueError"):
            while True:
                await c.getmany(timeout_ms=500)
        c.subscribe([topic_name])
        for _ in range(2):
            with pytest.raises(KafkaError, match="share fetcher for broker"):
                await c.getmany(timeout_ms=100)
        began = time.monotonic()
        await c.stop()
        assert time.monotonic() - began < 10
        with pytest.raises(ConsumerStoppedError):
            await c.getmany()


async def test_a_failing_heartbeat_task_is_fatal_on_every_poll(
    kafka: Any, topic_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A defect in the heartbeat task is raised by the next poll and every one after
    it (it was a member that quietly never joined), and stop() still ends."""
    group = await setup(kafka, topic_name, 1, 5)

    async def broken(self: ShareGroupDriver, client: Any) -> Any:
        raise ValueError("a defect in the heartbeat")

    monkeypatch.setattr(ShareGroupDriver, "heartbeat_once", broken)
    async with asyncio.timeout(30):
        c = share(kafka, group, topic_name)
        await c.start()
        with pytest.raises(KafkaError, match="share heartbeat failed: ValueError"):
            while True:
                await c.getmany(timeout_ms=500)
        c.subscribe([topic_name])  # a dead task of ours stays fatal
        with pytest.raises(KafkaError, match="share heartbeat failed"):
            await c.getmany(timeout_ms=100)
        await c.stop()


async def test_stop_after_breaking_out_of_async_for_releases_the_unseen(
    kafka: Any, topic_name: str
) -> None:
    # async for hands records out one by one from a batch of up to max_poll_records:
    # the ones the loop never reached were not processed and must come back
    group = await setup(kafka, topic_name, 1, 50)
    async with asyncio.timeout(30):
        seen = []
        async with share(kafka, group, topic_name, max_poll_records=50) as c:
            async for r in c:
                seen.append(r.offset)
                if len(seen) == 5:
                    break
            await c.commit()  # accepts the 5 the loop saw, not the others
        async with share(kafka, group, topic_name) as d:
            rest = await drain(d, quiet_s=1.0)
    assert sorted(seen + [r.offset for r in rest]) == list(range(50))
    assert {r.delivery_count for r in rest} == {2}


# -- subscriptions ------------------------------------------------------------------------


async def test_subscribe_before_the_topic_exists(kafka: Any, topic_name: str) -> None:
    group = f"s-{topic_name}"
    await configure_share_group(kafka.bootstrap_servers, group)
    async with asyncio.timeout(40):
        async with share(kafka, group, topic_name) as c:
            assert await c.getmany(timeout_ms=1000) == {}
            # the consumer's metadata requests may have auto-created it already
            with contextlib.suppress(AdminBatchError):
                await create_topic(kafka.bootstrap_servers, topic_name, partitions=1)
            await fill(kafka.bootstrap_servers, topic_name, 1, 10)
            got = await take(c, 10)
    assert sorted(r.offset for r in got) == list(range(10))


async def test_unsubscribe_then_subscribe_again(kafka: Any, topic_name: str) -> None:
    group = await setup(kafka, topic_name, 1, 30)
    async with asyncio.timeout(40):
        async with share(kafka, group, topic_name, max_poll_records=10) as c:
            first = await take(c, 10)
            c.unsubscribe()
            assert c.subscription() == frozenset()
            await asyncio.sleep(1.5)  # the leave goes out
            assert c.assignment() == frozenset()
            c.subscribe([topic_name])
            second = await take(c, 10)
            # and at once, racing the leave heartbeat
            c.unsubscribe()
            await asyncio.sleep(0.05)
            c.subscribe([topic_name])
            third = await take(c, 10)
    offsets = [r.offset for r in first + second + third]
    assert sorted(offsets) == list(range(30))


async def test_a_failing_deserializer_releases_that_record_only(
    kafka: Any, topic_name: str
) -> None:
    group = await setup(kafka, topic_name, 1, 0)
    async with Admin(bootstrap_servers=kafka.bootstrap_servers):
        pass
    from aiokproto.producer import Producer

    async with Producer(bootstrap_servers=kafka.bootstrap_servers) as p:
        await p.send_batch(topic_name, [b"1", b"2", b"bad", b"4", b"5"], partition=0)

    def value(v: bytes | None) -> int:
        assert v is not None
        return int(v)

    async with asyncio.timeout(30):
        async with share(kafka, group, topic_name, value_deserializer=value) as c:
            got: list[ShareRecord] = []
            error = None
            while error is None or len(got) < 4:
                try:
                    for rs in (await c.getmany(timeout_ms=300)).values():
                        got.extend(rs)
                except RecordDeserializationError as exc:
                    error = exc
            assert sorted(r.value for r in got) == [1, 2, 4, 5]
            assert error.offset == 2 and isinstance(error.cause, ValueError)
            # released: it comes back (and fails again) with delivery_count 2
            with pytest.raises(RecordDeserializationError) as again:
                while True:
                    await c.getmany(timeout_ms=300)
            assert again.value.offset == 2


async def test_the_topic_deleted_while_consuming(kafka: Any, topic_name: str) -> None:
    group = await setup(kafka, topic_name, 2, 200)
    async with asyncio.timeout(40):
        async with share(kafka, group, topic_name, max_poll_records=50) as c:
            await take(c, 50)
            async with Admin(bootstrap_servers=kafka.bootstrap_servers) as admin:
                await admin.delete_topics([topic_name])
            end = time.monotonic() + 3
            while time.monotonic() < end:
                await c.getmany(timeout_ms=200)  # no error, no hang
            began = time.monotonic()
        assert time.monotonic() - began < 5


async def test_a_fourth_member_joins_mid_stream(kafka: Any, topic_name: str) -> None:
    group = await setup(kafka, topic_name, 2, 3000)
    got: dict[str, list[tuple[int, int]]] = {}
    done = asyncio.Event()

    async def work(name: str, c: ShareConsumer) -> None:
        got[name] = []
        while not done.is_set():
            for tp, rs in (await c.getmany(timeout_ms=200, max_records=100)).items():
                got[name].extend((tp.partition, r.offset) for r in rs)
            await asyncio.sleep(0.01)
            if sum(map(len, got.values())) >= 6000:
                done.set()

    async with asyncio.timeout(60):
        cs = [share(kafka, group, topic_name, max_poll_records=100) for _ in range(4)]
        for c in cs[:3]:
            await c.start()
        try:
            workers = [asyncio.create_task(work(str(i), c)) for i, c in enumerate(cs[:3])]
            while sum(map(len, got.values())) < 1000:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
            await cs[3].start()
            workers.append(asyncio.create_task(work("3", cs[3])))
            await asyncio.gather(*workers)
        finally:
            await asyncio.gather(*(c.stop() for c in cs))
    counts = Counter(x for rs in got.values() for x in rs)
    assert len(counts) == 6000
    assert not [x for x, n in counts.items() if n > 1]


async def test_a_record_that_waited_past_its_lock_is_never_handed_out(
    kafka: Any, topic_name: str
) -> None:
    """Expected: a record a member acquired (its fetch runs ahead of the application)
    but did not hand out before the acquisition lock ran out is dropped: the broker
    took it back and may have given it to another member. Observed: getmany() handed
    out the stale copy (delivery_count 1) while the other member held it (delivery
    count 2), so two members worked on one record; this is also why
    test_renew_keeps_a_short_lock failed 4 runs in 5 (the other member's fetch had
    acquired the record first)."""
    group = await setup(kafka, topic_name, 1, 1, lock_ms=2000)
    async with asyncio.timeout(60):
        b = share(kafka, group, topic_name, acknowledgement_mode="explicit")
        async with b:
            while not b._fetcher.buffer:  # noqa: ASYNC110 - acquired ahead of any poll, not handed out
                await asyncio.sleep(0.05)
            await asyncio.sleep(2.5)  # past the 2 s lock
            a = share(kafka, group, topic_name, acknowledgement_mode="explicit")
            async with a:
                (record,) = await take(a, 1)
                assert (record.offset, record.delivery_count) == (0, 2)
                assert await b.getmany(timeout_ms=1500) == {}
                a.acknowledge(record, "accept")
                assert await a.commit() == {TopicPartition(topic_name, 0): None}
            assert await b.commit() == {}  # nothing of b's was acknowledged


async def test_renew_keeps_a_short_lock(kafka: Any, topic_name: str) -> None:
    group = await setup(kafka, topic_name, 1, 1, lock_ms=2000)
    async with asyncio.timeout(40):
        a = share(kafka, group, topic_name, acknowledgement_mode="explicit")
        b = share(kafka, group, topic_name, acknowledgement_mode="explicit")
        async with a, b:
            (record,) = await take(a, 1)
            assert a.acquisition_lock_timeout_ms == 2000
            stolen: list[ShareRecord] = []

            async def other() -> None:
                while True:
                    for rs in (await b.getmany(timeout_ms=200)).values():
                        for r in rs:
                            stolen.append(r)
                            b.acknowledge(r, "release")

            thief = asyncio.create_task(other())
            try:
                for _ in range(6):  # 6 s: three lock durations
                    a.acknowledge(record, "renew")
                    res = await a.commit()
                    assert all(e is None for e in res.values()), res
                    await asyncio.sleep(1.0)
                assert stolen == []
                a.acknowledge(record, "accept")
                assert await a.commit() == {TopicPartition(topic_name, 0): None}
                await asyncio.sleep(2.5)
                assert stolen == []
            finally:
                thief.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await thief
