"""Exactly once under faults: the transactional producer and the consume-transform-produce
service of ``examples/exactly_once.py``.

1. The service is SIGKILLed at random moments (during its start, mid-transaction, right
   around a commit) and restarted with the same transactional id, then left to finish.
   A read_committed consumer must find every input's output exactly once, and the
   group's committed offsets must be the input's end offsets.
   Slice: 5,000 inputs, 2 kills. Full (``AIOKPROTO_FAULTS=full``): 100,000 inputs, 5 kills.

2. On the 3-node cluster, a transactional producer runs transactions (records to an RF 3,
   min ISR 2 topic plus ``send_offsets_to_transaction``) while the broker that is the
   transaction coordinator of its transactional id is SIGKILLed mid-transaction and
   right after ``commit_transaction()`` was called. Every commit must succeed or raise a
   typed ``KafkaError`` (a ``KafkaTimeoutError`` is answered by calling it again, any
   other error by aborting); read_committed must then show exactly the transactions
   whose commit returned, each record once, and none of the aborted ones.
   Slice: 2 kills. Full: 6 kills.

The seed of the random choices is printed (``AIOKPROTO_FAULTS_SEED`` replays it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import re
import signal
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from aiokproto import Admin, NewTopic, Producer
from aiokproto.cluster.coordinators import TRANSACTION
from aiokproto.errors import KafkaError, KafkaTimeoutError
from aiokproto.structs import TopicPartition
from aiokproto.testing import LocalKafka
from tests.faults.chaos import evidence
from tests.faults.chaos.eos import (
    ChildRun,
    evict_members,
    offsets_sum,
    read_committed,
    sigkill,
    start_child,
    wait_exit,
)
from tests.faults.chaos.injector import ISR_TIMEOUT_S, RESTART_TIMEOUT_S, Timeline, heal
from tests.faults.chaos.observer import ClusterView

if TYPE_CHECKING:
    from tests.faults.conftest import FaultScale

PARTITIONS = 3
ABORT_LINE = re.compile(r"^transaction aborted .*$", re.MULTILINE)
STOPPED_LINE = re.compile(r"^stopped: committed (\d+) inputs", re.MULTILINE)

# -- 1. the consume-transform-produce service under SIGKILL ---------------------------

IDLE_EXIT_S = 8.0  # the service ends once nothing arrived for this long


async def _committed(admin: Admin, group: str, topic: str) -> dict[int, int]:
    try:
        offsets = await admin.list_consumer_group_offsets(group, require_stable=False)
    except KafkaError:
        return {}
    return {tp.partition: om.offset for tp, om in offsets.items() if tp.topic == topic}


BACKLOG_SHARE = 0.3  # of the inputs, produced before the first run (full transactions)


def _payment(run_id: str, i: int) -> bytes:
    return json.dumps({"run": run_id, "id": i, "amount_cents": 500 + i % 9_000}).encode()


async def _feed(
    bootstrap: str,
    topic: str,
    run_id: str,
    first: int,
    stop: int,
    seconds: float,
    last_sent: list[float] | None = None,
) -> None:
    """Produce inputs ``first..stop-1`` evenly over ``seconds`` (0: at once);
    ``last_sent[0]`` is when the last input was sent."""
    async with Producer(bootstrap_servers=bootstrap, linger_ms=20) as producer:
        began = time.monotonic()
        count = stop - first
        for n, i in enumerate(range(first, stop)):
            await producer.send(topic, _payment(run_id, i), key=b"acct-%d" % (i % 50))
            if last_sent is not None:
                last_sent[0] = time.monotonic()
            if seconds and n % 50 == 49:
                ahead = began + seconds * (n + 1) / count - time.monotonic()
                if ahead > 0:
                    await asyncio.sleep(ahead)
        await producer.flush(timeout_ms=120_000)


async def test_exactly_once_service_survives_sigkills(
    kafka: Any,
    fault_scale: FaultScale,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    total = fault_scale.pick(5_000, 100_000)
    min_kills = fault_scale.pick(2, 5)
    feed_s = fault_scale.pick(10, 60)  # the rest of the inputs arrive while it is killed
    seed = evidence.seed()
    rng = random.Random(seed)
    print(f"seed {seed}")
    bootstrap = kafka.bootstrap_servers
    suffix = uuid.uuid4().hex[:10]
    source, sink = f"eos-in-{suffix}", f"eos-out-{suffix}"
    group, txn_id = f"eos-group-{suffix}", f"eos-txn-{suffix}"
    run_id = uuid.uuid4().hex[:8]
    timeline = Timeline()
    began = time.monotonic()
    backlog = int(total * BACKLOG_SHARE)
    argv = [
        "examples/exactly_once.py", "serve", "--bootstrap", bootstrap,
        "--input", source, "--output", sink, "--group", group,
        "--transactional-id", txn_id, "--batch", "500",
        "--idle-exit-s", str(IDLE_EXIT_S),
    ]  # fmt: skip
    runs: list[ChildRun] = []
    kill_points: list[dict[str, Any]] = []
    evicted = 0
    extra_runs = 0
    async with Admin(bootstrap_servers=bootstrap) as admin:
        await admin.create_topics(
            [
                NewTopic(source, num_partitions=PARTITIONS, replication_factor=1),
                NewTopic(sink, num_partitions=PARTITIONS, replication_factor=1),
            ]
        )
        await _feed(bootstrap, source, run_id, 0, backlog, 0)
        timeline.note(f"produced a backlog of {backlog} inputs")
        last_sent = [time.monotonic()]
        feeding = asyncio.create_task(
            _feed(bootstrap, source, run_id, backlog, total, feed_s, last_sent)
        )
        try:
            # Kill runs until the feed is over (at least min_kills times). A run dies a
            # random time after its start (during the start itself: InitProducerId, the
            # group join; or while it works), or a random moment after a commit was seen.
            kill_until = time.monotonic() + feed_s + fault_scale.pick(60, 300)
            while len(kill_points) < min_kills or not feeding.done():
                if time.monotonic() > kill_until:
                    raise AssertionError(f"the kill phase took too long: {kill_points[-3:]}")
                run = start_child(argv, tmp_path, len(runs))
                runs.append(run)
                at_start = offsets_sum(await _committed(admin, group, source))
                # once the feed is over a run may have nothing left to commit: waiting
                # for its commit would outlast IDLE_EXIT_S, so it is killed on a timer
                if feeding.done() or rng.random() < 0.6:
                    mode = "timed"
                    await asyncio.sleep(rng.uniform(0.3, 3.0))
                else:
                    mode = "after a commit"
                    wait_until = time.monotonic() + 15
                    while time.monotonic() < wait_until and run.returncode is None:
                        if offsets_sum(await _committed(admin, group, source)) > at_start:
                            break
                        await asyncio.sleep(0.05)
                    else:
                        mode = "no commit seen"
                    await asyncio.sleep(rng.uniform(0.0, 0.25))
                if run.returncode == 0:
                    ended = run.ended or time.monotonic()
                    if feeding.done() and ended - run.started >= IDLE_EXIT_S - 1.0:
                        # nothing was left to do (its start on a starved box outlasted
                        # the timer): the run rightly idled out; the next one is killed
                        timeline.note(f"run {run.number} idled out: nothing left to do")
                        continue
                    if ended - last_sent[0] >= IDLE_EXIT_S - 1.0:
                        # the feeder itself sent nothing for the idle time (a starved
                        # test process on a loaded box): the run rightly idled out
                        timeline.note(f"run {run.number} idled out: the feed stalled")
                        continue
                if run.returncode is not None:
                    raise AssertionError(
                        f"run {run.number} ended by itself (rc {run.returncode}) before its "
                        f"kill\n{run.output()[-2000:]}\n{run.errors_tail()}"
                    )
                await asyncio.to_thread(sigkill, run)
                done = offsets_sum(await _committed(admin, group, source))
                point = {
                    "run": run.number,
                    "mode": mode,
                    "after_s": round((run.ended or 0) - run.started, 2),
                    "committed": [at_start, done],
                }
                kill_points.append(point)
                timeline.note(f"SIGKILL: {point}")
                evicted += len(await evict_members(admin, group))
            await feeding
            # the last run: left alone until it has nothing more to do
            while True:
                run = start_child(argv, tmp_path, len(runs))
                runs.append(run)
                timeline.note(f"run {run.number} started (to the end)")
                rc = await wait_exit(run, fault_scale.pick(180, 900))
                if rc is None:
                    await asyncio.to_thread(sigkill, run)
                    raise AssertionError(f"the last run did not end by itself\n{run.errors_tail()}")
                assert rc == 0, f"run {run.number} failed (rc {rc})\n{run.errors_tail()}"
                timeline.note(f"run {run.number} ended: {run.output().strip()[-200:]}")
                done = offsets_sum(await _committed(admin, group, source))
                # a run ends after IDLE_EXIT_S without input, counted from its start: a
                # slow group join can end it early (the example's rule, not a defect)
                if done >= total or extra_runs >= 2:
                    break
                extra_runs += 1
            committed = await _committed_stable(admin, group, source)
            ends = {
                tp.partition: off
                for tp, off in (
                    await _end_offsets(
                        bootstrap, [TopicPartition(source, p) for p in range(PARTITIONS)]
                    )
                ).items()
            }
        finally:
            if not feeding.done():
                feeding.cancel()
                await asyncio.gather(feeding, return_exceptions=True)
            for run in runs:
                if run.returncode is None:
                    await asyncio.to_thread(sigkill, run)
    elapsed = time.monotonic() - began

    output = await read_committed(bootstrap, sink, PARTITIONS, fault_scale.pick(120, 600))
    seen: Counter[int] = Counter()
    foreign = 0
    keyless = 0
    for records in output.values():
        for _, key, value in records:
            fee = json.loads(value)
            if fee.get("run") != run_id:
                foreign += 1
                continue
            seen[fee["id"]] += 1
            if key is None:
                keyless += 1
    missing = [i for i in range(total) if seen[i] == 0]
    twice = sorted(i for i, n in seen.items() if n > 1)
    aborts = [line for run in runs for line in ABORT_LINE.findall(run.output())]
    said = [int(m) for run in runs for m in STOPPED_LINE.findall(run.output())]
    facts = {
        "seed": seed,
        "inputs": total,
        "kills": len(kill_points),
        "kill_modes": dict(Counter(str(k["mode"]) for k in kill_points)),
        "kill_points": kill_points,
        "runs": len(runs),
        "extra_final_runs": extra_runs,
        "dead_members_removed": evicted,
        "seconds": round(elapsed, 1),
        "outputs_read": sum(len(v) for v in output.values()),
        "distinct_inputs_in_output": len(seen),
        "missing": len(missing),
        "duplicated": len(twice),
        "foreign": foreign,
        "committed_offsets": committed,
        "input_end_offsets": ends,
        "aborts_in_child_stdout": len(aborts),
        "abort_lines": aborts[:5],
        "committed_by_runs_that_ended": said,
    }
    details = "  timeline:\n" + timeline.render()
    if missing or twice:
        details += f"\n  missing (first 20): {missing[:20]}\n  twice (first 20): {twice[:20]}"
    evidence.emit(capsys, "exactly-once service under SIGKILL", facts, details)

    assert len(kill_points) >= min_kills
    assert sum(ends.values()) == total, ends
    assert not missing, f"{len(missing)} inputs have no output, e.g. {missing[:10]}"
    assert not twice, f"{len(twice)} inputs have more than one output, e.g. {twice[:10]}"
    assert foreign == 0 and keyless == 0
    assert committed == ends, f"committed offsets {committed} != input end offsets {ends}"


async def _end_offsets(bootstrap: str, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
    from aiokproto import Consumer

    async with Consumer(bootstrap_servers=bootstrap) as consumer:
        return await consumer.end_offsets(tps)


async def _committed_stable(admin: Admin, group: str, topic: str) -> dict[int, int]:
    offsets = await admin.list_consumer_group_offsets(group, require_stable=True)
    return {tp.partition: om.offset for tp, om in offsets.items() if tp.topic == topic}


# -- 2. the transaction coordinator killed mid-transaction and mid-commit ----------------

TXN_RECORDS = 30  # per transaction, spread over the partitions
# shorter than a coordinator fail-over (6 s broker session, election, loading): some
# calls time out, and the test calls commit_transaction() again as documented
MAX_BLOCK_MS = 8_000
COMMIT_ATTEMPTS = 8  # commit_transaction() calls after KafkaTimeoutError, at most
# one call may flush (max_block_ms) and then send EndTxn (max_block_ms)
CALL_BOUND_S = 2 * MAX_BLOCK_MS / 1000 + 30
AFTER_LAST_KILL = 5  # transactions on the healed cluster, all of which must commit


class CallHung(Exception):
    """A client call that outlived ``CALL_BOUND_S`` (raised by ``_bounded``, never by
    the client: ``KafkaTimeoutError`` is also a ``TimeoutError``)."""


async def _bounded(call: Any, what: str) -> Any:
    """Await ``call`` within ``CALL_BOUND_S``; its own exceptions pass through."""
    task = asyncio.ensure_future(call)
    done, _ = await asyncio.wait({task}, timeout=CALL_BOUND_S)
    if not done:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        raise CallHung(f"{what} outlived {CALL_BOUND_S:.0f} s")
    return task.result()


@dataclass
class TxnRecord:
    number: int
    phase: str  # "plain", "mid" (killed mid-transaction), "commit" (killed in the commit)
    outcome: str = "open"  # committed, aborted, unresolved (the producer had to go)
    errors: list[str] = field(default_factory=list)
    commit_calls: int = 0
    seconds: float = 0.0


def _value(t: int, i: int) -> bytes:
    return b"%d:%d" % (t, i)


class CoordinatorKiller:
    """SIGKILLs the transaction coordinator of a transactional id and restarts it in the
    background (after ``down_s``), waiting for full ISR of the watched topics."""

    def __init__(
        self, cluster: LocalKafka, view: ClusterView, admin: Admin, txn_id: str,
        watched: list[str], timeline: Timeline,
    ) -> None:  # fmt: skip
        self.cluster = cluster
        self.view = view
        self.admin = admin
        self.txn_id = txn_id
        self.watched = watched
        self.timeline = timeline
        self.restarting: asyncio.Task[None] | None = None
        self.killed: list[dict[str, Any]] = []

    @property
    def idle(self) -> bool:
        return self.restarting is None or self.restarting.done()

    async def coordinator(self, producer: Producer) -> int:
        """FindCoordinator(TRANSACTION) asked afresh (our admin client's cache is
        dropped first); the producer's own cached answer is noted for the timeline."""
        coordinators = self.admin.cluster.coordinators
        coordinators.invalidate(TRANSACTION, self.txn_id)
        node = (await coordinators.find(TRANSACTION, self.txn_id)).node_id
        client = producer._client
        cached = client.coordinators.cached(TRANSACTION, self.txn_id) if client else None
        self.timeline.note(
            f"transaction coordinator of {self.txn_id}: node {node} "
            f"(producer's cache: {cached.node_id if cached else None})"
        )
        return node

    async def kill(self, node: int, down_s: float, what: str, **note: Any) -> None:
        pid = self.cluster.node(node).pid
        if pid is not None:  # at once, from the event loop: the moment matters
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        await asyncio.to_thread(self.cluster.kill_node, node)  # reaps it
        self.timeline.note(f"SIGKILL node {node} ({what}) {note or ''}")
        self.killed.append({"node": node, "what": what, "down_s": round(down_s, 1), **note})
        self.restarting = asyncio.create_task(self._restart(node, down_s))

    async def _restart(self, node: int, down_s: float) -> None:
        await asyncio.sleep(down_s)
        self.timeline.note(f"restart node {node}")
        began = time.monotonic()
        await asyncio.to_thread(self.cluster.restart_node, node, RESTART_TIMEOUT_S)
        self.timeline.note(f"node {node} ready after {time.monotonic() - began:.1f} s")
        isr_s = await asyncio.to_thread(self.view.wait_healthy, self.watched, ISR_TIMEOUT_S)
        self.timeline.note(f"ISR full after {isr_s:.1f} s more")


class TxnLoop:
    """Runs numbered transactions, recording how each ended."""

    def __init__(
        self, bootstrap: str, txn_id: str, topic: str, source: str, group: str,
        timeline: Timeline, rng: random.Random,
    ) -> None:  # fmt: skip
        self.bootstrap = bootstrap
        self.txn_id = txn_id
        self.topic = topic
        self.source = source
        self.group = group
        self.timeline = timeline
        self.rng = rng
        self.producer: Producer | None = None
        self.producers = 0
        self.txns: list[TxnRecord] = []
        self.hung: list[str] = []  # a call that outlived its bound: a defect
        self.untyped: list[str] = []  # an exception that is not a KafkaError: a defect

    async def producer_ready(self) -> Producer:
        attempts = 0
        while self.producer is None:
            attempts += 1
            producer = Producer(
                bootstrap_servers=self.bootstrap,
                transactional_id=self.txn_id,
                max_block_ms=MAX_BLOCK_MS,
                request_timeout_ms=10_000,
                retry_backoff_ms=100,
                retry_backoff_max_ms=1_000,
                linger_ms=5,
            )
            try:
                await _bounded(producer.start(), "start()")
            except KafkaTimeoutError as exc:
                # InitProducerId while the coordinator is still moving: try again
                self.timeline.note(f"start() attempt {attempts}: {exc!r}"[:300])
                await _bounded(producer.stop(), "stop()")
                if attempts >= COMMIT_ATTEMPTS:
                    raise
                continue
            self.producer = producer
            self.producers += 1
            txn = producer._txn
            self.timeline.note(
                f"producer {self.producers} started (transactions v{2 if txn and txn.v2 else 1})"
            )
        return self.producer

    async def drop_producer(self, why: str) -> None:
        producer, self.producer = self.producer, None
        if producer is not None:
            self.timeline.note(f"producer {self.producers} closed: {why}")
            try:
                await _bounded(producer.stop(timeout_ms=10_000), "stop()")
            except KafkaError:
                pass
            except CallHung as exc:
                self.hung.append(f"producer {self.producers} ({why}): {exc}")
            except Exception as exc:
                self.untyped.append(f"stop() of producer {self.producers} raised {exc!r}")

    async def run(self, number: int, phase: str, killer: CoordinatorKiller) -> TxnRecord:
        record = TxnRecord(number, phase)
        self.txns.append(record)
        began = time.monotonic()
        try:
            await self._run(record, killer)
        finally:
            record.seconds = round(time.monotonic() - began, 2)
            if record.outcome != "committed" or phase != "plain":
                self.timeline.note(
                    f"txn {number} ({phase}): {record.outcome} after {record.seconds} s, "
                    f"{record.commit_calls} commit call(s), errors {record.errors}"
                )
        return record

    async def _run(self, record: TxnRecord, killer: CoordinatorKiller) -> None:
        t, phase, rng = record.number, record.phase, self.rng
        producer = await self.producer_ready()
        try:
            await producer.begin_transaction()
            kill_at = rng.randrange(1, TXN_RECORDS) if phase == "mid" else -1
            for i in range(TXN_RECORDS):
                if i == kill_at:
                    if rng.random() < 0.5:
                        await _bounded(producer.flush(), "flush()")
                    node = await killer.coordinator(producer)
                    await killer.kill(node, rng.uniform(1.0, 8.0), f"mid-transaction {t}")
                await producer.send(
                    self.topic, _value(t, i), key=b"k%d" % i, partition=i % PARTITIONS
                )
            offsets = {TopicPartition(self.source, p): t + 1 for p in range(PARTITIONS)}
            await _bounded(
                producer.send_offsets_to_transaction(offsets, self.group),
                "send_offsets_to_transaction()",
            )
            node = -1
            if phase == "commit":
                if rng.random() < 0.5:
                    # everything delivered first: the commit's first request is EndTxn
                    await _bounded(producer.flush(), "flush()")
                node = await killer.coordinator(producer)
        except KafkaError as exc:
            record.errors.append(f"before commit: {type(exc).__name__}: {exc}"[:300])
            await self._abort(record, producer)
            return
        except CallHung as exc:
            self.hung.append(f"txn {t}: {exc}")
            await self._abort(record, producer)
            return
        except Exception as exc:
            self.untyped.append(f"txn {t}: before the commit: {exc!r}")
            record.outcome = "unresolved"
            await self.drop_producer("an untyped error")
            return
        if phase == "commit":
            commit = asyncio.create_task(producer.commit_transaction())
            first: asyncio.Task[None] | None = commit
            txn = producer._txn
            assert txn is not None
            if rng.random() < 0.8:
                # the moment the EndTxn task starts (the commit's own flush is over), then
                # 0-5 ms: an EndTxn takes a few ms, so the coordinator dies before, while
                # or just after it writes PrepareCommit (busy polling: a timer is too slow)
                when = "EndTxn task started"
                until = time.monotonic() + CALL_BOUND_S
                while not commit.done() and time.monotonic() < until:
                    if txn._ending is not None and not txn._ending.done():
                        break
                    await asyncio.sleep(0)
                lag = rng.uniform(0.0, 0.005)
            else:
                when = "commit called"
                lag = rng.uniform(0.0, 0.03)
            stop_at = time.monotonic() + lag
            while True:
                if time.monotonic() >= stop_at:
                    break
                await asyncio.sleep(0)
            await killer.kill(
                node,
                rng.uniform(1.0, 8.0),
                f"in commit of transaction {t}",
                moment=f"{when} + {lag * 1000:.0f} ms",
                commit_done_before_kill=commit.done(),
            )
        else:
            first = None
        await self._commit(record, producer, first)

    async def _commit(
        self, record: TxnRecord, producer: Producer, first: asyncio.Task[None] | None
    ) -> None:
        for _ in range(COMMIT_ATTEMPTS):
            record.commit_calls += 1
            call = first or asyncio.create_task(producer.commit_transaction())
            first = None
            try:
                await _bounded(call, "commit_transaction()")
            except KafkaTimeoutError as exc:
                record.errors.append(f"commit: KafkaTimeoutError: {exc}"[:300])
                continue  # the outcome is pending: calling again finishes it
            except KafkaError as exc:
                record.errors.append(f"commit: {type(exc).__name__}: {exc}"[:300])
                await self._abort(record, producer)
                return
            except CallHung as exc:
                self.hung.append(f"txn {record.number}: {exc}")
                record.outcome = "unresolved"
                await self.drop_producer("commit_transaction() hung")
                return
            except Exception as exc:
                self.untyped.append(f"txn {record.number}: commit raised {exc!r}")
                record.outcome = "unresolved"
                await self.drop_producer("commit_transaction() raised an untyped error")
                return
            record.outcome = "committed"
            return
        self.hung.append(
            f"txn {record.number}: {COMMIT_ATTEMPTS} commit_transaction() calls all timed out"
        )
        record.outcome = "unresolved"
        await self.drop_producer("the commit never finished")

    async def _abort(self, record: TxnRecord, producer: Producer) -> None:
        for _ in range(COMMIT_ATTEMPTS):
            try:
                await _bounded(producer.abort_transaction(), "abort_transaction()")
            except KafkaTimeoutError as exc:
                record.errors.append(f"abort: KafkaTimeoutError: {exc}"[:300])
                continue
            except KafkaError as exc:
                # fatal (fenced...): the producer must go; the next InitProducerId with
                # this transactional id settles the transaction one way or the other
                record.errors.append(f"abort: {type(exc).__name__}: {exc}"[:300])
                record.outcome = "unresolved"
                await self.drop_producer(f"abort failed: {type(exc).__name__}")
                return
            except CallHung as exc:
                self.hung.append(f"txn {record.number}: {exc}")
                record.outcome = "unresolved"
                await self.drop_producer("abort_transaction() hung")
                return
            except Exception as exc:
                self.untyped.append(f"txn {record.number}: abort raised {exc!r}")
                record.outcome = "unresolved"
                await self.drop_producer("abort_transaction() raised an untyped error")
                return
            record.outcome = "aborted"
            return
        self.hung.append(f"txn {record.number}: {COMMIT_ATTEMPTS} aborts all timed out")
        record.outcome = "unresolved"
        await self.drop_producer("the abort never finished")


@pytest.mark.cluster
async def test_transaction_coordinator_killed_mid_transaction_and_mid_commit(
    kafka_cluster: LocalKafka,
    topic_name: str,
    fault_scale: FaultScale,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    kills = fault_scale.pick(2, 6)
    budget_s = fault_scale.pick(300, 1_200)
    seed = evidence.seed()
    rng = random.Random(seed)
    print(f"seed {seed}")
    phases = ["mid", "commit"] if rng.random() < 0.5 else ["commit", "mid"]
    plan = [phases[k % 2] for k in range(kills)]
    bootstrap = kafka_cluster.bootstrap_servers
    topic, source = topic_name, f"{topic_name}-in"
    group, txn_id = f"eos-{topic_name}"[:200], f"txn-{topic_name}"[:200]
    async with Admin(bootstrap_servers=bootstrap) as admin:
        await admin.create_topics(
            [
                NewTopic(topic, num_partitions=PARTITIONS, replication_factor=3,
                         topic_configs={"min.insync.replicas": "2"}),
                NewTopic(source, num_partitions=PARTITIONS, replication_factor=3),
            ]
        )  # fmt: skip
        view = ClusterView(bootstrap)
        watched = [topic, source]
        await asyncio.to_thread(view.wait_healthy, watched, 60)
        timeline = Timeline()
        killer = CoordinatorKiller(kafka_cluster, view, admin, txn_id, watched, timeline)
        loop = TxnLoop(bootstrap, txn_id, topic, source, group, timeline, rng)
        began = time.monotonic()
        after_heal: list[TxnRecord] = []
        phase_error: BaseException | None = None
        with evidence.client_log(tmp_path / "client.log") as client_log:
            try:
                async with asyncio.timeout(budget_s):
                    await loop.producer_ready()
                    # the internal topics are watched too, once they exist
                    watched += ["__transaction_state", "__consumer_offsets"]
                    t = 0
                    next_kill = rng.randint(3, 8)
                    while plan or not killer.idle or len(after_heal) < AFTER_LAST_KILL:
                        phase = "plain"
                        if plan and killer.idle and t >= next_kill:
                            phase = plan.pop(0)
                            next_kill = t + rng.randint(2, 6)
                        healed = not plan and killer.idle and phase == "plain"
                        record = await loop.run(t, phase, killer)
                        if healed:
                            after_heal.append(record)
                        if loop.hung or loop.untyped:
                            break
                        t += 1
            except (TimeoutError, KafkaError, AssertionError, CallHung) as exc:
                phase_error = exc
                timeline.note(f"transaction loop failed: {exc!r}"[:400])
            finally:
                await loop.drop_producer("end of the run")
                if killer.restarting is not None:
                    try:
                        await asyncio.wait_for(killer.restarting, RESTART_TIMEOUT_S + 60)
                    except Exception as exc:
                        timeline.note(f"restart failed: {exc!r}"[:400])
                await asyncio.to_thread(heal, kafka_cluster)
        elapsed = time.monotonic() - began

        output = await read_committed(bootstrap, topic, PARTITIONS, 120)
        committed_offsets = await _committed_stable(admin, group, source)

    by_txn: dict[int, Counter[int]] = {}
    order: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    foreign = 0
    for p, records in output.items():
        for _, _, value in records:
            try:
                t_s, i_s = value.split(b":")
                t_v, i_v = int(t_s), int(i_s)
            except ValueError:
                foreign += 1
                continue
            by_txn.setdefault(t_v, Counter())[i_v] += 1
            if not order[p] or order[p][-1] != t_v:
                order[p].append(t_v)
    outcomes = {r.number: r for r in loop.txns}
    lost = [t for t, r in outcomes.items() if r.outcome == "committed" and t not in by_txn]
    partial = [t for t, seen in by_txn.items() if set(seen) != set(range(TXN_RECORDS))]
    twice = [t for t, seen in by_txn.items() if any(n > 1 for n in seen.values())]
    aborted_visible = [t for t, r in outcomes.items() if r.outcome == "aborted" and t in by_txn]
    unknown = [t for t in by_txn if t not in outcomes]
    unresolved = {
        t: ("visible" if t in by_txn else "absent")
        for t, r in outcomes.items()
        if r.outcome == "unresolved"
    }
    out_of_order = [p for p, ts in order.items() if ts != sorted(ts)]
    visible = sorted(by_txn)
    want_offsets = {p: visible[-1] + 1 for p in range(PARTITIONS)} if visible else {}
    failed_after_heal = [r.number for r in after_heal if r.outcome != "committed"]
    counts = Counter(r.outcome for r in loop.txns)
    facts = {
        "seed": seed,
        "transactions": len(loop.txns),
        "outcomes": dict(counts),
        "coordinator_kills": killer.killed,
        "killed_transactions": [
            {
                "txn": r.number,
                "phase": r.phase,
                "outcome": r.outcome,
                "commit_calls": r.commit_calls,
                "seconds": r.seconds,
                "errors": [e[:160] for e in r.errors],
            }
            for r in loop.txns
            if r.phase != "plain" or r.errors
        ],
        "producers": loop.producers,
        "seconds": round(elapsed, 1),
        "records_read": sum(len(v) for v in output.values()),
        "lost_committed_txns": lost,
        "partial_txns": partial,
        "duplicated_txns": twice,
        "aborted_but_visible": aborted_visible,
        "unresolved": unresolved,
        "foreign": foreign + len(unknown),
        "out_of_order_partitions": out_of_order,
        "committed_offsets": committed_offsets,
        "offsets_of_last_visible_txn": want_offsets,
        "after_heal_not_committed": failed_after_heal,
        "hung_calls": loop.hung,
        "untyped_errors": loop.untyped,
        "phase_error": repr(phase_error) if phase_error else None,
        "client_log": str(client_log),
    }
    evidence.emit(
        capsys, "transaction coordinator killed mid-transaction and mid-commit", facts,
        "  timeline:\n" + timeline.render(),
    )  # fmt: skip

    assert phase_error is None, phase_error
    assert not loop.hung, loop.hung
    assert not loop.untyped, loop.untyped
    assert len(killer.killed) == kills
    assert not lost, f"transactions whose commit returned but are not visible: {lost}"
    assert not partial, f"transactions partly visible: {partial}"
    assert not twice, f"transactions with records visible twice: {twice}"
    assert not aborted_visible, f"aborted transactions visible: {aborted_visible}"
    assert foreign == 0 and not unknown
    assert not out_of_order, out_of_order
    assert not failed_after_heal, failed_after_heal
    assert committed_offsets == want_offsets, (committed_offsets, want_offsets)


async def test_evicting_the_members_of_a_group_that_never_formed_is_a_no_op(kafka: Any) -> None:
    # a service killed before it joined leaves no group behind: nothing to remove
    async with Admin(bootstrap_servers=kafka.bootstrap_servers) as admin:
        group = f"never-formed-{time.monotonic_ns()}"
        assert await asyncio.wait_for(evict_members(admin, group, timeout_s=10), 15) == []
