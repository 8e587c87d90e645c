"""KIP-848 groups shared with other clients, on the real 4.4.0 broker: aiokproto members
with librdkafka (confluent-kafka) and Java KafkaConsumer members in one
group_protocol="consumer" group, and a classic group upgraded member by member.

Every member commits synchronously after each batch and in its revoke callback, and
members leave cleanly; so each record (partition, offset) is handled exactly once, and
no partition is owned (or handed out) by two members at overlapping times. Members log
to one ``Ledger`` with wall-clock microseconds (the Java member prints its own, the
same clock), so ownership is compared across threads and processes.

Sizes: the fault suite's switch, ``AIOKPROTO_FAULTS=full``, runs 5x the records and
3x the churn (about 3.5 minutes instead of 1).
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import itertools
import os
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pytest

from aiokproto.admin import (
    Admin,
    AlterConfigOp,
    ConfigResource,
    ConfigResourceType,
    NewTopic,
)
from aiokproto.consumer import CommitFailedError, Consumer, ConsumerRebalanceListener
from aiokproto.errors import KafkaError
from aiokproto.producer import Producer
from aiokproto.structs import TopicPartition
from aiokproto.testing.jars import DEFAULT_VERSION, classpath
from tests.faults.conftest import fault_scale_from_env
from tests.javac import compiled

ck = pytest.importorskip("confluent_kafka")

SCALE = fault_scale_from_env()
PARTITIONS = 6
RECORDS = SCALE.pick(30_000, 150_000)  # at least; production goes on until the churn ends
ROUNDS = SCALE.pick(2, 6)  # leave-and-join rounds per kind of member (odd: join first)
CHUNK = 100  # records per produce call, one partition at a time
PAUSE_S = 0.04  # ~2,500 records/s: the members keep up, so churn meets live traffic
JAVA_SOURCE = Path(__file__).parent / "java" / "MixedMember.java"
KAFKA_VERSION = DEFAULT_VERSION  # the main broker version
MEMBER_LIMIT_S = 240  # a thread or process member stops by itself after this


def now_us() -> int:
    return time.time_ns() // 1000


@dataclass
class Ledger:
    """What every member handled and owned, on one wall clock (microseconds)."""

    # (t_us, member, partition, offset)
    handled: list[tuple[int, str, int, int]] = field(default_factory=list)
    # (t_us, member, "assigned" | "revoked" | "lost" | "closed", partitions)
    events: list[tuple[int, str, str, frozenset[int]]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)

    # list.append is atomic: threads (librdkafka members, the Java reader) log directly
    def handle(self, t: int, member: str, partition: int, offset: int) -> None:
        self.handled.append((t, member, partition, offset))
        self.counts[member] += 1

    def event(
        self, member: str, kind: str, partitions: Iterable[int], t: int | None = None
    ) -> None:
        self.events.append((now_us() if t is None else t, member, kind, frozenset(partitions)))

    def revoked_since(self, member: str, t: int) -> bool:
        return any(e[1] == member and e[2] == "revoked" and e[0] >= t for e in self.events)

    def total(self) -> int:
        return len(self.handled)

    def covers(self, ends: dict[int, int]) -> bool:
        seen: dict[int, set[int]] = {}
        for _, _, p, o in list(self.handled):
            seen.setdefault(p, set()).add(o)
        return all(set(range(end)) <= seen.get(p, set()) for p, end in ends.items())

    def intervals(self) -> dict[tuple[str, int], list[tuple[int, int]]]:
        """(member, partition) -> [(from_us, to_us)] it owned the partition."""
        open_: dict[tuple[str, int], int] = {}
        out: dict[tuple[str, int], list[tuple[int, int]]] = {}
        for t, member, kind, parts in sorted(self.events, key=lambda e: e[0]):
            if kind == "closed":
                parts = frozenset(p for m, p in open_ if m == member)
            for p in parts:
                key = (member, p)
                if kind == "assigned":
                    open_.setdefault(key, t)
                elif key in open_:
                    out.setdefault(key, []).append((open_.pop(key), t))
        for key, start in open_.items():
            out.setdefault(key, []).append((start, 1 << 62))
        return out

    def problems(self, ends: dict[int, int]) -> list[str]:
        found: list[str] = []
        by_record: dict[tuple[int, int], list[str]] = {}
        for _, member, p, o in self.handled:
            by_record.setdefault((p, o), []).append(member)
        dupes = {k: v for k, v in by_record.items() if len(v) > 1}
        if dupes:
            sample = sorted(dupes.items())[:10]
            found.append(f"{len(dupes)} records handled more than once, e.g. {sample}")
        missing = [(p, o) for p, end in ends.items() for o in range(end) if (p, o) not in by_record]
        if missing:
            found.append(f"{len(missing)} records never handled, e.g. {missing[:10]}")
        spans = self.intervals()
        by_partition: dict[int, list[tuple[int, int, str]]] = {}
        for (member, p), owned in spans.items():
            by_partition.setdefault(p, []).extend((a, b, member) for a, b in owned)
        for p, owners in sorted(by_partition.items()):
            owners.sort()
            for (_, end1, m1), (start2, _, m2) in itertools.pairwise(owners):
                if end1 > start2:
                    found.append(
                        f"partition {p} owned by {m1} until {end1} and by {m2} from {start2}"
                    )
        starts = {key: [a for a, _ in sorted(v)] for key, v in spans.items()}
        outside: list[tuple[str, int, int, int]] = []
        for t, member, p, o in self.handled:
            owned = sorted(spans.get((member, p), []))
            i = bisect.bisect_right(starts.get((member, p), []), t) - 1
            if i < 0 or not owned[i][0] <= t <= owned[i][1]:
                outside.append((member, p, o, t))
        if outside:
            found.append(f"{len(outside)} records handled while not owned, e.g. {outside[:10]}")
        lost = [e for e in self.events if e[2] == "lost" and e[3]]
        if lost:
            found.append(f"partitions lost (a member was fenced): {lost}")
        if self.errors:
            found.append(f"member errors: {self.errors[:10]}")
        return found


# -- aiokproto members -----------------------------------------------------------------


class LedgerListener(ConsumerRebalanceListener):
    def __init__(self, name: str, ledger: Ledger, consumer: Consumer) -> None:
        self.name = name
        self.ledger = ledger
        self.consumer = consumer

    async def on_partitions_assigned(self, assigned: frozenset[TopicPartition]) -> None:
        self.ledger.event(self.name, "assigned", (tp.partition for tp in assigned))

    async def on_partitions_revoked(self, revoked: frozenset[TopicPartition]) -> None:
        self.ledger.event(self.name, "revoked", (tp.partition for tp in revoked))
        try:  # what was handed out is committed before the next owner starts
            await self.consumer.commit()
        except Exception as exc:
            self.ledger.errors.append(f"{self.name}: commit in on_partitions_revoked: {exc!r}")

    async def on_partitions_lost(self, lost: frozenset[TopicPartition]) -> None:
        self.ledger.event(self.name, "lost", (tp.partition for tp in lost))


class AiokMember:
    """getmany, then a synchronous commit, until told to leave (stop())."""

    def __init__(
        self, name: str, bootstrap: str, group: str, topic: str, ledger: Ledger, **options: Any
    ) -> None:
        defaults: dict[str, Any] = {
            "auto_offset_reset": "earliest",
            "enable_auto_commit": False,
            "default_api_timeout_ms": 20_000,
        }
        self.name = name
        self.ledger = ledger
        self.consumer = Consumer(
            bootstrap_servers=bootstrap, group_id=group, **{**defaults, **options}
        )
        self.consumer.subscribe([topic], listener=LedgerListener(name, ledger, self.consumer))
        self._quit = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.consumer.start()
        self._task = asyncio.ensure_future(self._loop())

    async def _loop(self) -> None:
        c, ledger, name = self.consumer, self.ledger, self.name
        try:
            while not self._quit.is_set():
                batch = await c.getmany(timeout_ms=200)
                t = now_us()  # no await since getmany returned: no revoke in between
                for records in batch.values():
                    for r in records:
                        ledger.handle(t, name, r.partition, r.offset)
                if batch:
                    try:
                        await c.commit()
                    except CommitFailedError as exc:
                        # a revocation during the commit's round trip makes it refuse the
                        # moved partitions, as designed; the revoke listener committed them
                        # (the duplicate check proves it). Refused without a revoke: a bug
                        if not ledger.revoked_since(name, t):
                            ledger.errors.append(f"{name}: commit after a batch: {exc}")
        except Exception as exc:
            ledger.errors.append(f"{name}: consuming failed: {exc!r}")

    async def leave(self) -> None:
        self._quit.set()
        try:
            if self._task is not None:
                async with asyncio.timeout(20):
                    await self._task
        finally:
            await self.consumer.stop()  # revoke (commit in the listener), leave
            self.ledger.event(self.name, "closed", ())


# -- librdkafka members ----------------------------------------------------------------


class ConfluentMember:
    """A confluent_kafka.Consumer (group.protocol=consumer) polling in its own thread."""

    def __init__(self, name: str, bootstrap: str, group: str, topic: str, ledger: Ledger):
        self.name = name
        self.ledger = ledger
        self._config = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
        self._topic = topic
        self._quit = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"member-{name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _commit(self, consumer: Any, why: str) -> None:
        try:
            consumer.commit(asynchronous=False)
        except ck.KafkaException as exc:
            if exc.args[0].code() != ck.KafkaError._NO_OFFSET:  # nothing new: fine
                self.ledger.errors.append(f"{self.name}: commit {why}: {exc}")

    def _run(self) -> None:
        ledger, name = self.ledger, self.name

        def assigned(consumer: Any, tps: list[Any]) -> None:
            ledger.event(name, "assigned", (tp.partition for tp in tps))

        def revoked(consumer: Any, tps: list[Any]) -> None:
            ledger.event(name, "revoked", (tp.partition for tp in tps))
            self._commit(consumer, "on revoke")

        def lost(consumer: Any, tps: list[Any]) -> None:
            ledger.event(name, "lost", (tp.partition for tp in tps))

        consumer = ck.Consumer(self._config)
        try:
            consumer.subscribe([self._topic], on_assign=assigned, on_revoke=revoked, on_lost=lost)
            deadline = time.monotonic() + MEMBER_LIMIT_S
            while not self._quit.is_set() and time.monotonic() < deadline:
                messages = consumer.consume(num_messages=500, timeout=0.2)
                t = now_us()  # callbacks run inside consume(), on this thread
                handed = False
                for m in messages:
                    if m.error() is not None:
                        ledger.errors.append(f"{name}: {m.error()}")
                        continue
                    ledger.handle(t, name, m.partition(), m.offset())
                    handed = True
                if handed:
                    self._commit(consumer, "after a batch")
        except Exception as exc:
            ledger.errors.append(f"{name}: consuming failed: {exc!r}")
        finally:
            try:
                consumer.close()  # on_revoke (commit), then the leave heartbeat
            finally:
                ledger.event(name, "closed", ())

    async def leave(self) -> None:
        self._quit.set()
        await asyncio.to_thread(self._thread.join, 30)
        assert not self._thread.is_alive(), f"{self.name} did not close within 30 s"


# -- Java members ----------------------------------------------------------------------


def compiled_java() -> Path:
    """MixedMember.class, compiled once per source (and Kafka version) under tmp."""
    return compiled(JAVA_SOURCE, KAFKA_VERSION)


class JavaMember:
    """A Java KafkaConsumer (group.protocol=consumer) in a subprocess; its stdout lines
    go to the ledger as they come."""

    def __init__(
        self, name: str, classes: Path, bootstrap: str, group: str, topic: str, ledger: Ledger
    ):
        self.name = name
        self.ledger = ledger
        self._argv = [
            "java",
            "-Xmx256m",
            "-XX:TieredStopAtLevel=1",  # a short-lived client: start fast
            "-XX:+DisplayVMOutputToStderr",  # JVM warnings off the record stream
            "-cp",
            f"{classes}{os.pathsep}{classpath(KAFKA_VERSION)}",
            "MixedMember",
            bootstrap,
            topic,
            group,
            str(MEMBER_LIMIT_S),
        ]
        self.stderr_path = Path(tempfile.mkstemp(prefix=f"aiokproto-{name}-", suffix=".log")[1])
        self.proc: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None
        self.closed = False
        self.other_output: list[str] = []

    def start(self) -> None:
        with self.stderr_path.open("w") as err:
            self.proc = subprocess.Popen(
                self._argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
            )
        self._reader = threading.Thread(target=self._read, name=f"reader-{self.name}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        stdout: IO[str] = self.proc.stdout
        for line in stdout:
            fields = line.split()
            try:
                if len(fields) == 3 and fields[0].isdigit():
                    partition, offset, t = (int(f) for f in fields)
                    self.ledger.handle(t, self.name, partition, offset)
                    continue
                if len(fields) == 3 and fields[0] in ("assigned", "revoked", "lost", "closed"):
                    kind, parts, t_ = fields
                    listed = () if parts == "-" else [int(p) for p in parts.split(",")]
                    self.ledger.event(self.name, kind, listed, int(t_))
                    self.closed |= kind == "closed"
                    continue
            except ValueError:
                pass
            self.other_output.append(line)  # not ours (a logger writing to stdout?)

    async def leave(self) -> None:
        proc = self.proc
        assert proc is not None and proc.stdin is not None
        with contextlib.suppress(OSError):
            proc.stdin.write("stop\n")
            proc.stdin.close()
        code = await asyncio.to_thread(proc.wait, 40)
        if self._reader is not None:
            await asyncio.to_thread(self._reader.join, 10)
        if self.other_output:
            print(f"{self.name}: other stdout lines {self.other_output[:20]}")
        noted = [line for line in self.stderr_tail(400).splitlines() if " ERROR " in line]
        if noted:  # the Java client's own complaints, for the log
            print(f"{self.name}: stderr errors {noted[:10]}")
        assert code == 0 and self.closed, (
            f"{self.name} exited {code} (closed: {self.closed}); other stdout "
            f"{self.other_output[-10:]}; stderr:\n{self.stderr_tail()}"
        )
        self.stderr_path.unlink()  # kept only when something went wrong

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stderr_tail(self, lines: int = 30) -> str:
        text = self.stderr_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])


# -- one run: a topic, its group, paced production, members coming and going ---------

Member = AiokMember | ConfluentMember | JavaMember


async def produce(bootstrap: str, topic: str, at_least: int, done: asyncio.Event) -> int:
    """Paced records, round robin over the partitions, until ``at_least`` and ``done``."""
    sent = 0
    async with Producer(bootstrap_servers=bootstrap, linger_ms=5) as p:
        while sent < at_least or not done.is_set():
            values = [b"%d" % (sent + i) for i in range(CHUNK)]
            await p.send_batch(topic, values, partition=(sent // CHUNK) % PARTITIONS)
            sent += CHUNK
            await asyncio.sleep(PAUSE_S)
        await p.flush()
    return sent


async def group_type(bootstrap: str, group: str) -> str | None:
    async with Admin(bootstrap_servers=bootstrap) as admin:
        listed = await admin.list_consumer_groups()
    return next((g.type for g in listed if g.group_id == group), None)


class Run:
    """A 6-partition topic with records coming in, one group, the members in it."""

    def __init__(self, kafka: Any, topic: str) -> None:
        self.bootstrap: str = kafka.bootstrap_servers
        self.topic = topic
        self.group = f"g-{topic}"
        self.ledger = Ledger()
        self.live: list[Member] = []
        self._churned = asyncio.Event()
        self._producing: asyncio.Task[int] | None = None

    async def __aenter__(self) -> Run:
        async with Admin(bootstrap_servers=self.bootstrap) as admin:
            await admin.create_topics(
                [NewTopic(self.topic, num_partitions=PARTITIONS, replication_factor=1)]
            )
            # a short heartbeat for this group: members hear of a rebalance within 0.5 s,
            # not the broker's default 5 s (needs group.consumer.min.heartbeat.interval.ms)
            resource = ConfigResource(ConfigResourceType.GROUP, self.group)
            try:
                await admin.incremental_alter_configs(
                    {resource: [AlterConfigOp("consumer.heartbeat.interval.ms", "500")]}
                )
            except KafkaError as exc:  # slower, still correct
                print(f"group {self.group}: the broker's default heartbeat interval ({exc})")
        self._producing = asyncio.ensure_future(
            produce(self.bootstrap, self.topic, RECORDS, self._churned)
        )
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._churned.set()
        live, self.live = self.live, []
        for m in live:
            if isinstance(m, JavaMember):
                print(f"--- {m.name} stderr (last lines) ---\n{m.stderr_tail()}")
                m.kill()
            else:
                with contextlib.suppress(Exception):
                    if isinstance(m, AiokMember):
                        async with asyncio.timeout(30):
                            await m.consumer.stop()
                    else:
                        await m.leave()
        producing = self._producing
        if producing is not None and not producing.done():
            producing.cancel()
        with contextlib.suppress(BaseException):
            await producing  # type: ignore[misc]

    async def join(self, member: Member) -> None:
        self.live.append(member)
        if isinstance(member, AiokMember):
            await member.start()
        else:
            member.start()

    async def leave(self, member: Member) -> None:
        self.live.remove(member)
        try:
            await member.leave()
        except BaseException:
            if isinstance(member, JavaMember):
                member.kill()
            raise

    async def until(self, what: str, predicate: Callable[[], bool], limit_s: float) -> None:
        ledger = self.ledger
        try:
            async with asyncio.timeout(limit_s):
                while True:
                    if predicate():
                        return
                    await asyncio.sleep(0.1)
        except TimeoutError:
            pytest.fail(
                f"not within {limit_s} s: {what}; handled {dict(ledger.counts)}, "
                f"errors {ledger.errors[:5]}, last events {ledger.events[-8:]}"
            )

    async def handles(self, member: Member, limit_s: float = 60) -> None:
        await self.until(
            f"{member.name} handles records", lambda: self.ledger.counts[member.name] > 0, limit_s
        )

    async def finish(self) -> None:
        """Stop producing, let everything be handled, everybody leaves; then check the
        ledger and that the group committed every partition up to its end."""
        self._churned.set()
        assert self._producing is not None
        sent = await self._producing
        async with Consumer(bootstrap_servers=self.bootstrap) as c:
            got = await c.end_offsets([TopicPartition(self.topic, p) for p in range(PARTITIONS)])
        ends = {tp.partition: end for tp, end in got.items()}
        assert sum(ends.values()) >= sent >= RECORDS
        await self.until("every record handled", lambda: self.ledger.covers(ends), 90)
        while self.live:
            await self.leave(self.live[0])
        problems = self.ledger.problems(ends)
        print(f"{self.group}: {sum(ends.values())} records; handled by {dict(self.ledger.counts)}")
        for t, who, kind, parts in sorted(self.ledger.events):  # shown when a check fails
            print(f"  {t % 100_000_000:>9} us {who} {kind} {sorted(parts)}")
        assert not problems, "\n".join(problems)
        async with Admin(bootstrap_servers=self.bootstrap) as admin:
            committed = await admin.list_consumer_group_offsets(self.group)
        assert {tp.partition: om.offset for tp, om in committed.items()} == ends

    def aiok(self, name: str, **options: Any) -> AiokMember:
        return AiokMember(name, self.bootstrap, self.group, self.topic, self.ledger, **options)


async def churn(run: Run, other: Callable[[int], Member]) -> None:
    """2 aiokproto members and one ``other``; per round one of each kind leaves and a
    new one joins (and handles records) while records keep coming."""
    made = {"aiok": 0, "other": 0}

    def new(kind: str) -> Member:
        made[kind] += 1
        n = made[kind]
        return run.aiok(f"aiok{n}", group_protocol="consumer") if kind == "aiok" else other(n)

    for kind in ("aiok", "aiok", "other"):
        await run.join(new(kind))
    first = list(run.live)
    await run.until(
        "all three members handle records",
        lambda: all(run.ledger.counts[m.name] > 0 for m in first),
        60,
    )
    for round_ in range(ROUNDS):
        for kind in ("aiok", "other"):
            old = next(m for m in run.live if isinstance(m, AiokMember) == (kind == "aiok"))
            joined = new(kind)
            if round_ % 2 == 0:
                await run.leave(old)
                await run.join(joined)
            else:  # the newcomer joins while the old member leaves: both reconcile at once
                await run.join(joined)
                await run.leave(old)
            await run.handles(joined)  # the newcomer took partitions over


# -- the tests -------------------------------------------------------------------------


def test_the_ledger_finds_doubles_gaps_overlaps_and_strays() -> None:
    # the checks the broker tests rely on, each made to fire once
    clean = Ledger()
    clean.event("a", "assigned", [0], t=10)
    clean.handle(11, "a", 0, 0)
    clean.event("a", "revoked", [0], t=12)
    clean.event("b", "assigned", [0], t=13)
    clean.handle(14, "b", 0, 1)
    clean.event("b", "closed", [], t=15)
    assert clean.problems({0: 2}) == []

    bad = Ledger()
    bad.event("a", "assigned", [0, 1], t=10)
    bad.handle(11, "a", 0, 0)
    bad.handle(12, "a", 1, 0)
    bad.event("b", "assigned", [1], t=13)  # a still owns 1
    bad.handle(14, "b", 1, 0)  # handled twice
    bad.event("a", "revoked", [0, 1], t=15)
    bad.handle(16, "a", 0, 1)  # after a gave 0 up
    bad.event("b", "lost", [1], t=17)
    bad.errors.append("b: commit failed")
    problems = bad.problems({0: 3, 1: 1})
    assert problems[0].startswith("1 records handled more than once, e.g. [((1, 0), ['a', 'b'])]")
    assert problems[1] == "1 records never handled, e.g. [(0, 2)]"
    assert problems[2] == "partition 1 owned by a until 15 and by b from 13"
    assert problems[3] == "1 records handled while not owned, e.g. [('a', 0, 1, 16)]"
    assert problems[4].startswith("partitions lost")
    assert problems[5] == "member errors: ['b: commit failed']"
    assert len(problems) == 6


@pytest.mark.slow
async def test_aiokproto_and_librdkafka_members_share_a_consumer_protocol_group(
    kafka: Any, topic_name: str
) -> None:
    async with asyncio.timeout(SCALE.pick(150, 600)):
        async with Run(kafka, topic_name) as run:

            def rdkafka(n: int) -> Member:
                return ConfluentMember(
                    f"rdkafka{n}", run.bootstrap, run.group, run.topic, run.ledger
                )

            await churn(run, rdkafka)
            await run.finish()
    assert {n.rstrip("0123456789") for n in run.ledger.counts} == {"aiok", "rdkafka"}


@pytest.mark.slow
async def test_aiokproto_and_java_members_share_a_consumer_protocol_group(
    kafka: Any, topic_name: str
) -> None:
    classes = await asyncio.to_thread(compiled_java)
    async with asyncio.timeout(SCALE.pick(150, 600)):
        async with Run(kafka, topic_name) as run:

            def java(n: int) -> Member:
                return JavaMember(
                    f"java{n}", classes, run.bootstrap, run.group, run.topic, run.ledger
                )

            await churn(run, java)
            await run.finish()
    assert {n.rstrip("0123456789") for n in run.ledger.counts} == {"aiok", "java"}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("strategy", "join_first"), [("range", False), ("cooperative-sticky", True)]
)
async def test_a_classic_group_upgrades_to_the_consumer_protocol_member_by_member(
    kafka: Any, topic_name: str, strategy: str, join_first: bool
) -> None:
    # Kafka 4.x converts a classic group when a consumer-protocol member joins it
    # (group.consumer.migration.policy, bidirectional by default); the classic members
    # go on in the converted group until they too are restarted. Eager (range) members
    # restart leave-then-join; cooperative ones see the new member join first.
    classic = {
        "session_timeout_ms": 6000,
        "heartbeat_interval_ms": 500,
        "partition_assignment_strategy": (strategy,),
    }
    async with asyncio.timeout(SCALE.pick(150, 600)):
        async with Run(kafka, topic_name) as run:
            for i in (1, 2, 3):
                await run.join(run.aiok(f"classic{i}", **classic))
            first = list(run.live)
            await run.until(
                "the classic members handle records",
                lambda: all(run.ledger.counts[m.name] > 0 for m in first),
                60,
            )
            types = [await group_type(run.bootstrap, run.group)]
            for i in (1, 2, 3):
                old = run.live[0]
                joined = run.aiok(f"kip848-{i}", group_protocol="consumer")
                if join_first:
                    await run.join(joined)
                    await run.leave(old)
                else:
                    await run.leave(old)
                    await run.join(joined)
                await run.handles(joined)
                types.append(await group_type(run.bootstrap, run.group))
            await run.finish()
            types.append(await group_type(run.bootstrap, run.group))
    assert types == ["classic", "consumer", "consumer", "consumer", "consumer"]
