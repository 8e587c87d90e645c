"""``ParallelConsumer`` refuses bad options and misuse with a clear typed error before
any I/O (its behaviour against a broker: tests/parallel/)."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from typing import Any

import pytest

from aiokproto import Consumer, ParallelConsumer
from aiokproto.errors import IllegalStateError, KafkaConfigError
from aiokproto.structs import ConsumerRecord, OffsetAndMetadata, TopicPartition


def consumer(**extra: Any) -> Consumer[bytes | None, bytes | None]:
    options: dict[str, Any] = {
        "bootstrap_servers": "127.0.0.1:1",
        "group_id": "g",
        "enable_auto_commit": False,
        **extra,
    }
    return Consumer("t", **options)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"ordering": "keys"}, "ordering must be one of"),
        ({"max_concurrency": 0}, "max_concurrency must be an int >= 1"),
        ({"max_concurrency": True}, "max_concurrency must be an int"),
        ({"max_queued_total": 0}, "max_queued_total must be an int >= 1 or None"),
        ({"commit_interval_ms": 0}, "commit_interval_ms"),
        ({"retries": -1}, "retries must be an int >= 0"),
        ({"on_failure": "ignore"}, "on_failure must be one of"),
        ({"on_failure": "dead_letter"}, "needs dead_letter_producer"),
        ({"dead_letter_topic": "dlt"}, "only with on_failure='dead_letter'"),
        ({"revoke_timeout_ms": -5}, "revoke_timeout_ms"),
    ],
)
def test_bad_options_are_refused(options: dict[str, Any], match: str) -> None:
    with pytest.raises(KafkaConfigError, match=match):
        ParallelConsumer(consumer(), **options)


def test_the_consumer_must_leave_commits_to_it() -> None:
    with pytest.raises(KafkaConfigError, match="enable_auto_commit=False"):
        ParallelConsumer(consumer(enable_auto_commit=True))
    with pytest.raises(KafkaConfigError, match="needs a Consumer with group_id"):
        ParallelConsumer(Consumer("t", bootstrap_servers="127.0.0.1:1"))
    with pytest.raises(KafkaConfigError, match="needs an aiokproto Consumer"):
        ParallelConsumer(object())  # type: ignore[arg-type]


async def handler(record: object) -> None:
    return None


async def test_run_needs_async_with_and_runs_once() -> None:
    pc = ParallelConsumer(consumer())
    with pytest.raises(IllegalStateError, match="async with ParallelConsumer"):
        await pc.run(handler)
    with pytest.raises(KafkaConfigError, match="handler must be callable"):
        await pc.run(42)  # type: ignore[arg-type]
    async with pc:
        pc._stop_requested = True  # a stop() before run(): run() returns at once
        await pc.run(handler)
        assert "stopped" in repr(pc)
    with pytest.raises(IllegalStateError, match="already used"):
        async with pc:
            pass


async def test_one_parallel_consumer_per_consumer_at_a_time() -> None:
    """Two at once on one consumer would share its records, and each would commit the
    safe offset of its own records only: past records the other has not finished."""
    c = consumer()
    async with ParallelConsumer(c):
        with pytest.raises(IllegalStateError, match="already has a ParallelConsumer"):
            async with ParallelConsumer(c):
                pass
    async with ParallelConsumer(c):  # once the first is done, another may follow
        pass


async def test_metrics_belong_to_the_one_entered_and_do_not_pile_up() -> None:
    """A ParallelConsumer per run (one after another on one consumer, as a supervisor
    loop does) leaves nothing behind in the consumer's metrics; one refused (another
    is entered) does not take over the running one's metrics."""
    c = consumer()
    registry = c._registry
    families = len(registry._families)
    for _ in range(3):
        async with ParallelConsumer(c):
            assert len(registry._families) == families + 1
        assert len(registry._families) == families
    async with ParallelConsumer(c) as running:
        running.processed = 7
        refused = ParallelConsumer(c)
        with pytest.raises(IllegalStateError):
            async with refused:
                pass
        assert c.metrics().value("processed-total", "parallel-consumer-metrics") == 7


class FakeBroker:
    """The consumer's side a ParallelConsumer uses, without sockets: ``getmany`` hands
    out each partition's log from its position (a few records a partition, as
    fetches do), ``pause``/``resume``/``seek``/``commit`` act on this state, and
    ``revoke``/``reassign`` play a rebalance through the chained listener."""

    def __init__(self, logs: dict[TopicPartition, list[object]], rnd: random.Random) -> None:
        self.logs = logs
        self.rnd = rnd
        self.pos = dict.fromkeys(logs, 0)
        self.assigned = set(logs)
        self.revoking: set[TopicPartition] = set()
        self.paused: set[TopicPartition] = set()
        self.committed: dict[TopicPartition, int] = {}
        self.on_commit: Callable[[dict[TopicPartition, int]], None] = lambda offsets: None
        self.consumer = c = consumer()
        c.getmany = self.getmany  # type: ignore[method-assign,assignment]
        c.assignment = lambda: frozenset(self.assigned)  # type: ignore[method-assign]
        c.paused = lambda: frozenset(self.paused)  # type: ignore[method-assign]
        c.pause = lambda *tps: self.paused.update(tps)  # type: ignore[method-assign]
        c.resume = lambda *tps: self.paused.difference_update(tps)  # type: ignore[method-assign]
        c.seek = self.pos.__setitem__  # type: ignore[method-assign,assignment]
        c.commit = self.commit  # type: ignore[method-assign,assignment]

    async def commit(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        await asyncio.sleep(0)
        plain = {tp: om.offset for tp, om in offsets.items()}
        self.on_commit(plain)
        self.committed.update(plain)

    async def getmany(self, timeout_ms: int = 0, max_records: int = 1) -> dict[Any, Any]:
        await asyncio.sleep(0)
        out: dict[TopicPartition, list[ConsumerRecord[Any, None]]] = {}
        room = max_records
        tps = [tp for tp in self.logs if tp in self.assigned - self.paused - self.revoking]
        self.rnd.shuffle(tps)
        for tp in tps:
            at, log = self.pos[tp], self.logs[tp]
            n = min(room, len(log) - at, self.rnd.randint(1, 20))
            if n > 0:
                out[tp] = [
                    ConsumerRecord(tp.topic, tp.partition, o, 0, 0, log[o], None, ())
                    for o in range(at, at + n)
                ]
                self.pos[tp] = at + n
                room -= n
            if not room:
                break
        if not out:
            await asyncio.sleep(timeout_ms / 1000)
        return out

    async def revoke(self, pc: ParallelConsumer[Any, Any], tps: set[TopicPartition]) -> None:
        self.revoking = tps  # (the consumer stops handing them out first)
        assert pc._listener is not None
        await pc._listener.on_partitions_revoked(frozenset(tps))
        self.assigned -= tps
        self.paused -= tps
        self.revoking = set()

    def reassign(self, tps: set[TopicPartition]) -> None:
        for tp in tps:  # a new owner starts from the committed offset
            self.pos[tp] = self.committed.get(tp, 0)
        self.assigned |= tps


def _lane(ordering: str, tp: TopicPartition, key: object) -> object:
    try:
        hash(key)
    except TypeError:
        return tp
    return tp if ordering == "partition" else (tp, key)


@pytest.mark.parametrize(
    ("ordering", "options"),
    [
        # a total bound of 1 below max_concurrency: a fetch of one record at a time
        ("key", {"max_queued_total": 1, "max_concurrency": 8, "fetch_max_records": 1}),
        # one partition at its own bound of 1 while the others are empty or slow
        ("partition", {"max_queued_per_partition": 1, "max_queued_total": 2}),
        ("unordered", {"max_queued_total": 3, "max_concurrency": 50}),
        ("key", {"max_queued_total": 40, "max_concurrency": 200, "fetch_max_records": 7}),
        # the queues near their bound with records ready: the fetch waits for a chunk
        ("key", {"max_queued_total": 12, "max_concurrency": 4, "fetch_max_records": 5}),
    ],
)
async def test_tiny_bounds_never_leave_workers_waiting_on_the_fetch(
    ordering: str, options: dict[str, Any]
) -> None:
    """The fetch loop waits for room for a chunk only while enough records can start:
    with bounds smaller than the concurrency, a chunk of one, a partition at its bound,
    it never waits out its poll while workers take records."""
    rnd = random.Random(7)
    keys: list[Any] = [b"a", b"b", None, {"u": 1}] + [b"k%d" % i for i in range(20)]
    tps = [TopicPartition("t", p) for p in range(3)]
    broker = FakeBroker({tp: [rnd.choice(keys) for _ in range(200)] for tp in tps}, rnd)
    done: dict[TopicPartition, int] = dict.fromkeys(tps, 0)
    running: set[object] = set()
    async with ParallelConsumer(broker.consumer, ordering=ordering, **options) as pc:  # type: ignore[arg-type]

        async def handle(record: ConsumerRecord[Any, Any]) -> None:
            tp = TopicPartition(record.topic, record.partition)
            lane = _lane(ordering, tp, record.key)
            assert ordering == "unordered" or lane not in running
            running.add(lane)
            await asyncio.sleep(0.002 if record.offset % 50 == 0 else 0)  # a slow one now and then
            running.discard(lane)
            done[tp] += 1
            if sum(done.values()) == 600:
                await pc.stop()

        waits: list[float] = []
        wait_for_room = pc._wait_for_room

        async def timed(loop: asyncio.AbstractEventLoop) -> None:
            began = time.monotonic()
            await wait_for_room(loop)
            waits.append(time.monotonic() - began)

        pc._wait_for_room = timed  # type: ignore[method-assign]
        await asyncio.wait_for(pc.run(handle), 20)
    # (a wait runs its whole poll, 100 ms, only if no worker took a record meanwhile)
    assert sum(w >= 0.095 for w in waits) <= 3, waits
    assert broker.committed == dict.fromkeys(tps, 200)


@pytest.mark.parametrize("ordering", ["key", "partition", "unordered"])
async def test_revokes_mid_run_with_lanes_running_and_reused(ordering: str) -> None:
    """Partitions revoked and assigned again, over and over, and moved back by seek()
    from handlers, while their keys' lanes run, end and are reused (revoke_timeout_ms
    short enough to cancel some handlers):
    no record of a partition starts between its revoke and its new assignment, a key
    never runs twice at once, a commit never passes a record that has not finished,
    and every record finishes."""
    rnd = random.Random(ordering)
    keys: list[Any] = [b"a", b"b", None, {"u": 1}] + [b"k%d" % i for i in range(6)]
    tps = [TopicPartition("t", p) for p in range(3)]
    broker = FakeBroker({tp: [rnd.choice(keys) for _ in range(80)] for tp in tps}, rnd)
    finished: dict[TopicPartition, set[int]] = {tp: set() for tp in tps}
    gone: set[TopicPartition] = set()
    running: set[object] = set()
    problems: list[object] = []

    def check_commit(offsets: dict[TopicPartition, int]) -> None:
        for tp, offset in offsets.items():
            if not finished[tp].issuperset(range(offset)):
                problems.append(("commit past an unfinished record", tp, offset))

    broker.on_commit = check_commit
    all_done = asyncio.Event()
    async with ParallelConsumer(
        broker.consumer,
        ordering=ordering,  # type: ignore[arg-type]
        max_concurrency=6,
        max_queued_total=10,
        commit_interval_ms=5,
        revoke_timeout_ms=3,
    ) as pc:

        async def handle(record: ConsumerRecord[Any, Any]) -> None:
            tp = TopicPartition(record.topic, record.partition)
            if tp in gone:
                problems.append(("started after its revoke", tp, record.offset))
            lane = _lane(ordering, tp, record.key)
            if ordering != "unordered":
                if lane in running:
                    problems.append(("key running twice", lane, record.offset))
                running.add(lane)
            try:
                await asyncio.sleep(rnd.choice([0, 0, 0, 0.001, 0.004]))
            finally:
                running.discard(lane)
            finished[tp].add(record.offset)
            if rnd.random() < 0.02 and tp in broker.assigned and not all_done.is_set():
                broker.consumer.seek(tp, rnd.randrange(record.offset + 1))  # taken again
            if all(len(done) == 80 for done in finished.values()):
                all_done.set()

        run = asyncio.create_task(pc.run(handle))
        while not all_done.is_set():
            await asyncio.sleep(rnd.random() * 0.02)
            some = set(rnd.sample(tps, rnd.randint(1, 2)))
            await broker.revoke(pc, some)
            gone |= some
            await asyncio.sleep(rnd.random() * 0.005)
            gone -= some
            broker.reassign(some)
        for _ in range(500):  # records taken again after a late seek() finish too
            if broker.committed == broker.pos == dict.fromkeys(tps, 80):
                break
            await asyncio.sleep(0.01)
        await pc.stop()
        await asyncio.wait_for(run, 10)
    assert problems == []
    assert broker.committed == dict.fromkeys(tps, 80)


async def test_a_revoke_that_frees_the_total_resumes_the_paused_partitions() -> None:
    """A partition paused at its fair share of the total, its records held behind one
    busy key, may fetch again once a revoke drops another partition's records and the
    total is down to half its bound: at once, not at the next commit
    (commit_interval_ms, here a minute), since no record is taken meanwhile to check."""
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    held: list[object] = [*[b"s"] * 21, *[b"x"] * 30]
    logs: dict[TopicPartition, list[object]] = {a: held, b: [b"b"] * 21}
    broker = FakeBroker(logs, random.Random(1))
    gate = asyncio.Event()
    others = 0
    async with ParallelConsumer(
        broker.consumer,
        max_queued_total=40,
        max_concurrency=10,
        commit_interval_ms=60_000,
        revoke_timeout_ms=10,
    ) as pc:

        async def handle(record: ConsumerRecord[Any, Any]) -> None:
            nonlocal others
            if record.key == b"x":
                others += 1
            else:
                await gate.wait()  # the first of each held key holds its lane

        run = asyncio.create_task(pc.run(handle))
        try:
            for _ in range(300):
                if {a, b} <= pc._paused:
                    break
                await asyncio.sleep(0.01)
            assert {a, b} <= broker.paused and pc._sched.queued(a) == 20
            await broker.revoke(pc, {b})  # its 20 queued are dropped: the total is 20
            for _ in range(100):
                if others == 30:
                    break
                await asyncio.sleep(0.01)
            assert others == 30 and a not in broker.paused
        finally:
            gate.set()
        await pc.stop()
        await asyncio.wait_for(run, 10)


@pytest.mark.parametrize("how", ["cancel", "stop from a handler"])
async def test_the_chunk_wait_ends_at_a_cancel_or_a_stop(how: str) -> None:
    """The fetch loop waiting for room for a chunk (queues near their bound, records
    ready, every worker busy): cancelling run() or a handler's stop() ends it at once,
    the handlers end, and what finished is committed."""
    tp = TopicPartition("t", 0)
    log: list[object] = [b"k%d" % (i % 20) for i in range(100)]
    broker = FakeBroker({tp: log}, random.Random(3))
    gate = asyncio.Event()
    done: list[int] = []
    woken: list[bool] = []
    room: asyncio.Future[None] | None = None
    async with ParallelConsumer(
        broker.consumer, max_concurrency=2, max_queued_total=12, fetch_max_records=5
    ) as pc:

        async def handle(record: ConsumerRecord[Any, Any]) -> None:
            if record.offset == 0:
                done.append(0)
                return
            await gate.wait()
            done.append(record.offset)
            if how != "cancel":
                await pc.stop()
                woken.append(room is not None and room.done())  # at once, not after a poll

        run = asyncio.create_task(pc.run(handle))
        for _ in range(200):
            if pc._room is not None:
                break
            await asyncio.sleep(0.005)
        room = pc._room
        assert room is not None and pc.in_flight == 2  # waiting for room
        if how == "cancel":
            run.cancel()
            with pytest.raises(asyncio.CancelledError):
                await run
        else:
            gate.set()
            await asyncio.wait_for(run, 5)
            assert woken == [True, True]
        assert not pc._workers and pc._room is None
    assert broker.committed == {tp: 1 if how == "cancel" else 3}
