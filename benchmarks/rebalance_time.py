"""How long a consumer group takes to settle after a member joins or leaves.

Three group set-ups with the same topic, load and members:

* ``classic-eager``: classic protocol, ``RangeAssignor`` (eager: every member gives up
  everything, then the group is assigned anew),
* ``classic-coop``: classic protocol, ``CooperativeStickyAssignor`` (only what moves is
  revoked, in a second round),
* ``consumer``: KIP-848 (``group_protocol="consumer"``), the broker's assignor.

Per case a fresh 12-partition topic gets records at a steady rate. Per run a fresh
group of 3 members consumes it with ``getmany`` loops that commit every 0.5 s and in
``on_partitions_revoked``; once it has settled a 4th member starts (*join*), and once
that has settled the first member stops (*leave*). For each event:

* **settle**: from ``start()`` / ``stop()`` until every partition is owned by exactly one
  live member, the assignment is balanced and no member is revoking, and it stays so
  (``SETTLE_S`` without any change ends the wait; ownership is sampled every 10 ms);
* **pause**: the longest stretch in that window in which a partition that kept its
  owner had no records handed out (the stop-the-world part), clipped at the start, but
  a stretch still open when the group settles runs on to the next record;
* **moved**: partitions whose owner after differs from the owner before.

Runs go case by case in rotated order (A B C, B C A, ...); medians of ``--runs`` runs.
Members learn of a rebalance at their next heartbeat, so before each event a run waits
an extra delay spread evenly over 5 s across the runs (``phase_delay``): the median is
then not that of one heartbeat phase.
The broker and the classic members keep Kafka's defaults (heartbeats: 5 s for KIP-848
groups, 3 s for classic members) unless ``--heartbeat-ms`` sets both.

    .venv/bin/python -m benchmarks.rebalance_time [--runs 3] [--heartbeat-ms N]

A single-node Kafka 4.3.1 is started (``aiokproto.testing.LocalKafka``). The Markdown
table goes to stdout; ``benchmarks/results/rebalance-<UTC time>.json`` gets every run
(ownership timelines included), ``.log`` next to it aiokproto's INFO log.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import datetime
import json
import logging
import os
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from aiokproto import (
    Admin,
    Consumer,
    ConsumerRebalanceListener,
    ConsumerRecord,
    ConsumerStoppedError,
    KafkaError,
    NewTopic,
    Producer,
    TopicPartition,
)
from aiokproto.admin import ConfigResource, ConfigResourceType
from aiokproto.consumer.group import CooperativeStickyAssignor, GroupConfig, RangeAssignor
from aiokproto.consumer.group.assignors import Assignor
from benchmarks import machine
from benchmarks.scenarios import run_order
from benchmarks.stats import spread

RESULTS_DIR = Path(__file__).parent / "results"
KAFKA_VERSION = "4.3.1"
PARTITIONS = 12
MEMBERS = 3  # before the join; a 4th joins, then one of the first three leaves
RATE_PER_PARTITION = 20  # records/s: modest, yet a record every 50 ms shows any pause
VALUE = b"v" * 100
COMMIT_EVERY_S = 0.5
SAMPLE_S = 0.01
BASELINE_S = 2.0  # steady consumption before each event (its pauses: the noise floor)
SETTLE_S = 2.0  # no ownership change for this long after a final state ends the wait
# Members learn of a rebalance at their next heartbeat, and a group's members heartbeat
# in step (their timers restart when a rebalance ends): the settle time depends on
# where in the heartbeat interval an event lands. Runs wait an extra delay spread
# evenly over the longest interval before each event, so the median is not one phase.
DEFAULT_PHASE_SPAN_S = 5.0  # the broker's group.consumer.heartbeat.interval.ms default
EVENT_TIMEOUT_S = 40.0  # a KIP-848 join can take two 5 s heartbeats; far above that
FORM_TIMEOUT_S = 60.0  # the first three members settling, before anything is measured

# Kafka's own defaults, for the fairness note (Java consumer; broker 4.x).
KAFKA_DEFAULTS = {
    "classic member heartbeat.interval.ms": 3000,
    "classic member session.timeout.ms": 45000,
    "broker group.consumer.heartbeat.interval.ms": 5000,
    "broker group.consumer.session.timeout.ms": 45000,
    "broker group.initial.rebalance.delay.ms": 3000,
}
BROKER_KEYS = (
    "group.consumer.heartbeat.interval.ms",
    "group.consumer.min.heartbeat.interval.ms",
    "group.consumer.session.timeout.ms",
    "group.consumer.assignors",
    "group.initial.rebalance.delay.ms",
)


@dataclass(frozen=True)
class Case:
    key: str
    label: str
    group_protocol: str
    assignor: type[Assignor] | None  # classic only; KIP-848 groups use the broker's


CASES = (
    Case("classic-eager", "classic, eager (range)", "classic", RangeAssignor),
    Case("classic-coop", "classic, cooperative-sticky", "classic", CooperativeStickyAssignor),
    Case("consumer", "consumer (KIP-848)", "consumer", None),
)
EVENTS = ("join", "leave")


# -- pure parts: ownership, gaps, summaries ------------------------------------------------


class MemberView(NamedTuple):
    """What one live member owns of the topic, and whether it is giving some back."""

    assigned: frozenset[int]
    revoking: bool


Views = Mapping[str, MemberView]
Timeline = Sequence[tuple[float, Views]]


def is_final(views: Views, partitions: int) -> bool:
    """Every partition owned by exactly one live member, owned counts balanced (differ by
    at most one, as every assignor here makes them for one topic), nobody revoking."""
    if not views or any(v.revoking for v in views.values()):
        return False
    counts = [len(v.assigned) for v in views.values()]
    if max(counts) - min(counts) > 1 or sum(counts) != partitions:
        return False
    owned: set[int] = set()
    for v in views.values():
        owned |= v.assigned
    return owned == set(range(partitions))


def owners(views: Views) -> dict[int, str]:
    """partition -> member (for a final state, where each partition has one owner)."""
    return {p: name for name, v in views.items() for p in v.assigned}


def moved_partitions(before: Mapping[int, str], after: Mapping[int, str]) -> set[int]:
    """Partitions whose owner differs (or that only one side has)."""
    return {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}


def state_at(timeline: Timeline, t: float) -> Views:
    """The ownership sampled last at or before ``t`` (empty before the first sample)."""
    out: Views = {}
    for when, views in timeline:
        if when > t:
            break
        out = views
    return out


def settled_at(
    timeline: Timeline, t0: float, until: float, partitions: int
) -> tuple[float | None, int]:
    """When the group settled in ``(t0, until]`` (the change that made the final state
    it was in at ``until``; None if that state is not final) and how many final states
    it passed through and left before that (flaps)."""
    window = [(when, views) for when, views in timeline if t0 < when <= until]
    finals = [when for when, views in window if is_final(views, partitions)]
    if not window or not is_final(window[-1][1], partitions):
        return None, len(finals)
    return window[-1][0], len(finals) - 1


def longest_gap(times: Sequence[float], start: float, end: float, observed_until: float) -> float:
    """Longest stretch without a handout that overlaps ``[start, end]``, given one
    partition's sorted handout times: clipped at ``start`` (what came before is not
    the event's doing), but a stretch still open at ``end`` runs to the next handout
    (or to ``observed_until``): the pause lasts until records flow again."""
    prev = start
    worst = 0.0
    for t in times:
        if t <= start:
            continue
        worst = max(worst, t - prev)
        if t >= end:
            return worst
        prev = t
    return max(worst, observed_until - prev)


def duplicates_and_skips(offsets: Iterable[int]) -> tuple[int, int]:
    """Offsets of one partition handed out more than once, and offsets between the
    first and the last handed out that never were."""
    seen: set[int] = set()
    dups = 0
    for o in offsets:
        if o in seen:
            dups += 1
        seen.add(o)
    if not seen:
        return 0, 0
    return dups, max(seen) - min(seen) + 1 - len(seen)


def analyse_event(
    timeline: Timeline,
    handouts: Mapping[int, Sequence[float]],
    revocations: Sequence[tuple[float, int]],
    t0: float,
    done: float,
    observed_until: float,
    partitions: int = PARTITIONS,
) -> dict[str, Any]:
    """Settle time, pause and moved partitions of one event that began at ``t0`` and
    was waited for until ``done``; records were watched until ``observed_until``.
    ``revocations`` are (time, how many partitions) of on_partitions_revoked calls."""
    before_views = state_at(timeline, t0)
    steady = is_final(before_views, partitions)
    before = owners(before_views)
    baseline = max(
        (
            longest_gap([t for t in handouts.get(p, ()) if t <= t0], t0 - BASELINE_S, t0, t0)
            for p in before
        ),
        default=0.0,
    )
    settled, flaps = settled_at(timeline, t0, done, partitions)
    out: dict[str, Any] = {
        "steady_before": steady,
        "settle_s": None if settled is None else round(settled - t0, 3),
        "flaps": flaps,
        "baseline_gap_ms": round(baseline * 1000, 1),
        "revoked": sum(
            n for when, n in revocations if t0 <= when <= (done if settled is None else settled)
        ),
        "owners_before": {str(p): m for p, m in sorted(before.items())},
    }
    if settled is None:
        out.update(moved=None, pause_ms=None, handover_ms=None, owners_after=None)
        return out
    after = owners(state_at(timeline, settled))
    moved = moved_partitions(before, after)
    kept = sorted(set(range(partitions)) - moved)

    def worst(ps: Iterable[int]) -> float | None:
        gaps = [longest_gap(handouts.get(p, ()), t0, settled, observed_until) for p in ps]
        return round(max(gaps) * 1000, 1) if gaps else None

    out.update(
        moved=len(moved),
        kept=kept,
        pause_ms=worst(kept),
        handover_ms=worst(sorted(moved)),
        owners_after={str(p): m for p, m in sorted(after.items())},
    )
    return out


def phase_delay(run: int, runs: int, span_s: float) -> float:
    """The extra wait before each event of run ``run`` of ``runs``, spread evenly over
    ``span_s`` (stratified: 3 runs already cover the interval). The leave waits as long
    as the join: with a KIP-848 group the heartbeat timers run on from before the join,
    so the leave's phase follows from both waits, and equal ones (2d mod span) still
    spread evenly where waits adding up to a constant would land every run alike."""
    return round(span_s * (run + 0.5) / runs, 3)


def median_or_none(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def summarize(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (case, event) of the cases that ran: medians over the runs that
    settled."""
    rows = []
    for case in CASES:
        mine = [r for r in runs if r["case"] == case.key]
        if not mine:
            continue
        for event in EVENTS:
            results = [r["events"][event] for r in mine if event in r.get("events", {})]
            settled = [e for e in results if e["settle_s"] is not None]
            row: dict[str, Any] = {
                "case": case.key,
                "label": case.label,
                "event": event,
                "runs": len(mine),
                "settled": len(settled),
            }
            if settled:
                row["settle_s"] = dataclasses.asdict(spread([e["settle_s"] for e in settled]))
                for key in ("pause_ms", "handover_ms", "moved", "revoked", "baseline_gap_ms"):
                    row[key] = median_or_none([e[key] for e in settled])
            rows.append(row)
    return rows


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f}"


def _count(value: float | None) -> str:
    return "n/a" if value is None else f"{value:g}"


def render_table(rows: Sequence[dict[str, Any]]) -> str:
    lines = [
        "| group set-up | event | settle s: median (min-max) | pause of unmoved "
        "partitions ms | partitions moved | partitions revoked | handover of moved "
        "partitions ms | baseline gap ms | settled |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        runs = f"{row['settled']}/{row['runs']}"
        if not row["settled"]:
            lines.append(f"| {row['label']} | {row['event']} | did not settle | | | | | | {runs} |")
            continue
        s = row["settle_s"]
        lines.append(
            f"| {row['label']} | {row['event']} | {s['median']:.2f} ({s['low']:.2f}-"
            f"{s['high']:.2f}) | {_ms(row['pause_ms'])} | {_count(row['moved'])} | "
            f"{_count(row['revoked'])} | {_ms(row['handover_ms'])} | "
            f"{_ms(row['baseline_gap_ms'])} | {runs} |"
        )
    return "\n".join(lines)


def render(doc: dict[str, Any]) -> str:
    meta = doc["meta"]
    m = meta.get("machine", {})
    settings = meta["settings"]
    broker = settings["broker"]
    classic = settings["classic_member"]
    lines = [
        "## Consumer group rebalance time (aiokproto)",
        "",
        f"{PARTITIONS} partitions, {RATE_PER_PARTITION} records/s each; {MEMBERS} members, "
        "then a 4th joins (join), then the first leaves with stop() (leave). Medians of "
        f"{meta['runs']} runs per case (cases interleaved).",
        "",
        render_table(doc["summary"]),
        "",
        "- settle: from start()/stop() until every partition has exactly one live owner, "
        "the assignment is balanced and no member is revoking (sampled every "
        f"{SAMPLE_S * 1000:.0f} ms; it then stayed so for {SETTLE_S:.0f} s)",
        "- pause: the longest stretch in that window without a record handed out, over "
        "partitions that kept their owner; handover: the same over partitions that moved; "
        f"baseline: the longest gap over all partitions in the {BASELINE_S:.0f} s before "
        "the event",
        "- heartbeats set the pace: a member learns of a rebalance at its next heartbeat "
        "(classic: every heartbeat_interval_ms; KIP-848: every "
        "group.consumer.heartbeat.interval.ms, and new partitions only come in a heartbeat "
        "answer), so each run waits an extra delay before each event, spread evenly over "
        f"{meta['settings']['phase_span_s']:g} s across the runs",
        "- here every member runs in one process, and classic members heartbeat in step "
        "(their timers restart together when a rebalance ends): eager members learn of a "
        "rebalance together and revoke-to-reassign is short; members that learn at "
        "different times would keep their partitions paused for the difference",
        "- members: getmany(timeout_ms=100) loops, commit() every "
        f"{COMMIT_EVERY_S} s and in on_partitions_revoked, enable_auto_commit=False, "
        "auto_offset_reset=latest; all in one process with the producer",
        "",
        "Settings (fairness: each protocol at its defaults unless --heartbeat-ms):",
        "",
        f"- classic members (aiokproto): heartbeat_interval_ms={classic['heartbeat_interval_ms']}"
        f", session_timeout_ms={classic['session_timeout_ms']}, rebalance timeout "
        f"{classic['rebalance_timeout_ms']} ms (Kafka's Java defaults: heartbeat 3000, "
        "session 45000)",
        "- broker: "
        + ", ".join(
            f"{k}={v['value']}{' (default)' if v['default'] else ''}" for k, v in broker.items()
        )
        + " (Kafka's defaults: group.consumer.heartbeat.interval.ms=5000, "
        "group.consumer.session.timeout.ms=45000, group.initial.rebalance.delay.ms=3000; "
        "the initial delay only holds back the first join of an empty classic group, "
        "not the events measured here)",
        f"- Kafka {meta['kafka'].get('version')} single node on the same machine: "
        f"{m.get('cpu_model')}, {m.get('cores')} cores; load average at start "
        f"{m.get('load_avg_at_start')}, at end {meta.get('load_avg_at_end')}; took "
        f"{meta.get('duration_s')} s",
    ]
    odd = doc.get("oddities") or []
    if odd:
        lines += ["", "Odd things seen:", "", *(f"- {o}" for o in odd)]
    return "\n".join(lines) + "\n"


# -- live parts: members, ownership sampling, one run ----------------------------------------


class Recorder:
    """Handouts of every member: partition -> [(monotonic time, offset)]."""

    def __init__(self) -> None:
        self.handouts: dict[int, list[tuple[float, int]]] = {}

    def note(self, now: float, partition: int, records: Sequence[ConsumerRecord]) -> None:
        self.handouts.setdefault(partition, []).extend((now, r.offset) for r in records)

    def times(self) -> dict[int, list[float]]:
        return {p: [t for t, _ in got] for p, got in self.handouts.items()}


class _Listener(ConsumerRebalanceListener):
    def __init__(self, member: Member) -> None:
        self.member = member

    async def on_partitions_revoked(self, revoked: frozenset[TopicPartition]) -> None:
        m = self.member
        m.revocations.append((time.monotonic(), len(revoked)))
        if not revoked:
            return
        m.in_revoke = True
        try:
            # commit what was handed out before the partitions go: the next owner
            # starts where this one stopped, no record is consumed twice
            await m.commit()
        finally:
            m.in_revoke = False


@dataclass
class Member:
    name: str
    consumer: Consumer
    topic: str
    recorder: Recorder
    live: bool = False  # started and not yet stopped: counted as an owner
    in_revoke: bool = False
    revocations: list[tuple[float, int]] = field(default_factory=list)
    commits: int = 0
    errors: list[str] = field(default_factory=list)
    task: asyncio.Task[None] | None = None

    def view(self) -> MemberView:
        group = self.consumer.group_coordinator
        assigned = frozenset(
            tp.partition for tp in self.consumer.assignment() if tp.topic == self.topic
        )
        revoking = self.in_revoke or (group is not None and group.revoking)
        return MemberView(assigned, revoking)

    async def start(self) -> None:
        self.live = True
        await self.consumer.start()
        self.task = asyncio.get_running_loop().create_task(self._consume(), name=self.name)

    async def stop(self) -> None:
        try:
            await self.consumer.stop()
        finally:
            self.live = False
            if self.task is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await self.task

    async def commit(self) -> None:
        try:
            await self.consumer.commit()
            self.commits += 1
        except ConsumerStoppedError:
            pass
        except KafkaError as exc:  # counted: a commit refused in a rebalance is news
            self.errors.append(f"{time.monotonic():.3f} commit: {type(exc).__name__}: {exc}")

    async def _consume(self) -> None:
        c = self.consumer
        next_commit = time.monotonic() + COMMIT_EVERY_S
        while True:
            try:
                batch = await c.getmany(timeout_ms=100)
            except ConsumerStoppedError:
                return
            except KafkaError as exc:  # a group error: keep polling, the sampler sees it
                self.errors.append(f"{time.monotonic():.3f} getmany: {type(exc).__name__}: {exc}")
                await asyncio.sleep(0.1)
                continue
            now = time.monotonic()
            for tp, records in batch.items():
                self.recorder.note(now, tp.partition, records)
            if now >= next_commit:
                next_commit = now + COMMIT_EVERY_S
                await self.commit()


class Sampler:
    """Samples every live member's ownership; keeps the changes (the timeline)."""

    def __init__(self, members: Sequence[Member]) -> None:
        self.members = members
        self.timeline: list[tuple[float, dict[str, MemberView]]] = []

    def sample(self) -> None:
        views = {m.name: m.view() for m in self.members if m.live}
        if not self.timeline or views != self.timeline[-1][1]:
            self.timeline.append((time.monotonic(), views))

    async def run(self) -> None:
        while True:
            self.sample()
            await asyncio.sleep(SAMPLE_S)

    async def wait_settled(self, limit_s: float) -> bool:
        """Until the ownership is final and unchanged for ``SETTLE_S``; False on timeout."""
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            self.sample()
            when, views = self.timeline[-1]
            if is_final(views, PARTITIONS) and time.monotonic() - when >= SETTLE_S:
                return True
            await asyncio.sleep(SAMPLE_S)
        return False


async def produce(producer: Producer, topic: str, stop: asyncio.Event) -> dict[str, int]:
    """One record per partition every 1/RATE s, on a fixed schedule."""
    sent = failed = 0
    pending: list[Any] = []
    interval = 1 / RATE_PER_PARTITION
    next_tick = time.monotonic()
    while not stop.is_set():
        for p in range(PARTITIONS):
            pending.append(await producer.send(topic, VALUE, partition=p))
            sent += 1
        still = []
        for handle in pending:
            if not handle.done():
                still.append(handle)
                continue
            try:
                handle.result()
            except KafkaError:
                failed += 1
        pending = still
        next_tick += interval
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), max(0.0, next_tick - time.monotonic()))
    return {"sent": sent, "failed": failed}


def member_options(case: Case, heartbeat_ms: int | None) -> dict[str, Any]:
    options: dict[str, Any] = {
        "group_protocol": case.group_protocol,
        "enable_auto_commit": False,
        "auto_offset_reset": "latest",
    }
    if case.assignor is not None:
        options["partition_assignment_strategy"] = (case.assignor,)
        if heartbeat_ms is not None:
            options["heartbeat_interval_ms"] = heartbeat_ms
    return options


async def _event(sampler: Sampler, action: Callable[[], Awaitable[None]]) -> dict[str, Any]:
    t0 = time.monotonic()
    await action()
    call_s = time.monotonic() - t0
    ok = await sampler.wait_settled(EVENT_TIMEOUT_S)
    return {"t0": t0, "done": time.monotonic(), "call_s": round(call_s, 3), "waited_settled": ok}


async def run_once(
    case: Case,
    topic: str,
    bootstrap: str,
    run: int,
    heartbeat_ms: int | None,
    delay: float = 0.0,
) -> dict[str, Any]:
    """One group: form it with 3 members, then a join and a leave, each after the extra
    ``delay`` (``phase_delay``)."""
    group_id = f"rebalance-{case.key}-{uuid.uuid4().hex[:8]}"
    recorder = Recorder()
    members: list[Member] = []
    for i in range(MEMBERS + 1):
        consumer = Consumer(
            bootstrap_servers=bootstrap,
            group_id=group_id,
            client_id=f"{group_id}-m{i}",
            **member_options(case, heartbeat_ms),
        )
        member = Member(f"m{i}", consumer, topic, recorder)
        consumer.subscribe([topic], listener=_Listener(member))
        members.append(member)
    sampler = Sampler(members)
    stop_producing = asyncio.Event()
    out: dict[str, Any] = {"case": case.key, "run": run, "group_id": group_id, "events": {}}
    raw: dict[str, dict[str, Any]] = {}
    began = steady_from = time.monotonic()
    async with Producer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
        producing = asyncio.create_task(produce(producer, topic, stop_producing))
        sampling = asyncio.create_task(sampler.run())
        try:
            await asyncio.gather(*(m.start() for m in members[:MEMBERS]))
            formed = await sampler.wait_settled(FORM_TIMEOUT_S)
            out["formed_s"] = round(time.monotonic() - began, 2)
            if not formed:
                out["error"] = f"the first {MEMBERS} members did not settle in {FORM_TIMEOUT_S} s"
            else:
                steady_from = time.monotonic()
                await asyncio.sleep(BASELINE_S + delay)
                raw["join"] = await _event(sampler, members[MEMBERS].start)
                if raw["join"]["waited_settled"]:
                    # settling took SETTLE_S of steady consumption already
                    await asyncio.sleep(max(0.0, BASELINE_S - SETTLE_S) + delay)
                    raw["leave"] = await _event(sampler, members[0].stop)
        finally:
            await asyncio.gather(*(m.stop() for m in members if m.live), return_exceptions=True)
            sampling.cancel()
            stop_producing.set()
            with contextlib.suppress(asyncio.CancelledError):
                await sampling
            out["produced"] = await producing
    ended = time.monotonic()
    times = recorder.times()
    revocations = sorted(r for m in members for r in m.revocations)
    starts = [raw[e]["t0"] for e in EVENTS if e in raw] + [ended]
    for event, until in zip(EVENTS, starts[1:], strict=False):
        if event not in raw:
            continue
        e = raw[event]
        result = analyse_event(sampler.timeline, times, revocations, e["t0"], e["done"], until)
        result["call_s"] = e["call_s"]
        out["events"][event] = result
    if out["events"]:
        dups = skips = 0
        for got in recorder.handouts.values():
            d, s = duplicates_and_skips(o for t, o in got if t >= steady_from)
            dups, skips = dups + d, skips + s
        out["duplicates"], out["skipped"] = dups, skips
    out["commits"] = sum(m.commits for m in members)
    out["errors"] = [f"{m.name}: {e}" for m in members for e in m.errors]
    out["timeline"] = [
        {
            "t_s": round(when - began, 3),
            **{
                name: {"assigned": sorted(v.assigned), "revoking": v.revoking}
                for name, v in views.items()
            },
        }
        for when, views in sampler.timeline
    ]
    for event in EVENTS:
        if event in raw:
            out["events"][event]["t_s"] = round(raw[event]["t0"] - began, 3)
            out["events"][event]["phase_delay_s"] = delay
    return out


def oddities(runs: Sequence[dict[str, Any]]) -> list[str]:
    """What a reader should look at: runs that failed, did not settle, flapped,
    started unsteady, lost or repeated records, or had commits refused."""
    out = []
    for r in runs:
        tag = f"{r['case']} run {r['run'] + 1}"
        if r.get("error"):
            out.append(f"{tag}: {r['error']}")
        for event, e in r.get("events", {}).items():
            if e["settle_s"] is None:
                out.append(f"{tag} {event}: did not settle within {EVENT_TIMEOUT_S:.0f} s")
            if e["flaps"]:
                out.append(
                    f"{tag} {event}: passed {e['flaps']} final-looking state(s) that changed again"
                )
            if not e["steady_before"]:
                out.append(f"{tag} {event}: the group was not settled when the event began")
        if r.get("duplicates") or r.get("skipped"):
            out.append(
                f"{tag}: {r.get('duplicates')} records handed out twice, "
                f"{r.get('skipped')} skipped (after the group first settled)"
            )
        if r.get("errors"):
            out.append(f"{tag}: {len(r['errors'])} commit/poll errors, first: {r['errors'][0]}")
        if r.get("produced", {}).get("failed"):
            out.append(f"{tag}: {r['produced']['failed']} produce failures")
    return out


# -- the session -------------------------------------------------------------------------------


async def broker_settings(bootstrap: str, node_id: int) -> dict[str, dict[str, Any]]:
    resource = ConfigResource(ConfigResourceType.BROKER, str(node_id))
    async with Admin(bootstrap_servers=bootstrap) as admin:
        got = (await admin.describe_configs([resource]))[resource]
    return {
        k: {"value": got[k].value, "default": got[k].is_default} for k in BROKER_KEYS if k in got
    }


async def create_topic(bootstrap: str, name: str) -> None:
    async with Admin(bootstrap_servers=bootstrap) as admin:
        await admin.create_topics([NewTopic(name, num_partitions=PARTITIONS, replication_factor=1)])
        async with asyncio.timeout(30):
            while name not in await admin.list_topics():  # noqa: ASYNC110 - polling
                await asyncio.sleep(0.05)


async def session(
    bootstrap: str, node_id: int, cases: Sequence[Case], runs: int, heartbeat_ms: int | None
) -> dict[str, Any]:
    topics = {c.key: f"rebalance-{c.key}-{uuid.uuid4().hex[:8]}" for c in cases}
    for name in topics.values():
        await create_topic(bootstrap, name)
    results = []
    span_s = DEFAULT_PHASE_SPAN_S if heartbeat_ms is None else heartbeat_ms / 1000
    for run in range(runs):
        for key in run_order([c.key for c in cases], run):
            case = next(c for c in cases if c.key == key)
            began = time.monotonic()
            delay = phase_delay(run, runs, span_s)
            result = await run_once(case, topics[key], bootstrap, run, heartbeat_ms, delay)
            results.append(result)
            events = ", ".join(f"{e} {v['settle_s']} s" for e, v in result["events"].items())
            print(
                f"  {case.key} run {run + 1}: {events or result.get('error')} "
                f"({time.monotonic() - began:.0f} s)",
                file=sys.stderr,
                flush=True,
            )
    defaults = {f.name: f.default for f in dataclasses.fields(GroupConfig)}
    hb = heartbeat_ms or defaults["heartbeat_interval_ms"]
    return {
        "settings": {
            "broker": await broker_settings(bootstrap, node_id),
            "classic_member": {
                "heartbeat_interval_ms": hb,
                "session_timeout_ms": defaults["session_timeout_ms"],
                "rebalance_timeout_ms": defaults["rebalance_timeout_ms"]
                or defaults["max_poll_interval_ms"],
            },
            "heartbeat_override_ms": heartbeat_ms,
            "kafka_defaults": KAFKA_DEFAULTS,
            "partitions": PARTITIONS,
            "records_per_s_per_partition": RATE_PER_PARTITION,
            "commit_every_s": COMMIT_EVERY_S,
            "sample_s": SAMPLE_S,
            "settle_s": SETTLE_S,
            "baseline_s": BASELINE_S,
            "phase_span_s": span_s,
        },
        "topics": topics,
        "runs": results,
    }


def _logging(path: Path) -> None:
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger("aiokproto").setLevel(logging.INFO)
    logging.getLogger("aiokproto").addHandler(handler)
    console = logging.StreamHandler()
    console.setLevel(logging.WARNING)
    logging.getLogger().addHandler(console)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.rebalance_time", description="consumer group rebalance time"
    )
    ap.add_argument("--runs", type=int, default=3, help="runs per case (3)")
    ap.add_argument(
        "--cases",
        default=",".join(c.key for c in CASES),
        help=f"comma-separated subset of: {', '.join(c.key for c in CASES)}",
    )
    ap.add_argument(
        "--heartbeat-ms",
        type=int,
        default=None,
        help="heartbeat interval for both protocols (the broker's "
        "group.consumer.heartbeat.interval.ms and the classic members' "
        "heartbeat_interval_ms); default: each side's own default",
    )
    ap.add_argument("--out-dir", type=Path, default=RESULTS_DIR)
    args = ap.parse_args(argv)
    known = {c.key: c for c in CASES}
    wanted = [k for k in args.cases.split(",") if k]
    if not wanted or any(k not in known for k in wanted):
        ap.error(f"--cases: choose from {', '.join(known)}")
    if args.runs < 1 or (args.heartbeat_ms is not None and args.heartbeat_ms < 100):
        ap.error("--runs must be positive and --heartbeat-ms at least 100")
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    json_path = args.out_dir / f"rebalance-{stamp}.json"
    _logging(json_path.with_suffix(".log"))

    from aiokproto.testing import PLAINTEXT_ONLY, LocalKafka

    overrides: dict[str, str | None] = {}
    if args.heartbeat_ms is not None:
        overrides["group.consumer.heartbeat.interval.ms"] = str(args.heartbeat_ms)
        overrides["group.consumer.min.heartbeat.interval.ms"] = str(min(args.heartbeat_ms, 5000))
    began = time.monotonic()
    print(f"starting Kafka {KAFKA_VERSION}...", file=sys.stderr, flush=True)
    with LocalKafka(version=KAFKA_VERSION, security=PLAINTEXT_ONLY, overrides=overrides) as kafka:
        environment = machine.describe(
            {
                "source": "aiokproto.testing.LocalKafka (single KRaft node, PLAINTEXT)",
                "version": kafka.version,
                "startup_s": kafka.startup_seconds,
            }
        )
        doc = asyncio.run(
            session(
                kafka.bootstrap_servers,
                kafka.nodes[0].node_id,
                [known[k] for k in wanted],
                args.runs,
                args.heartbeat_ms,
            )
        )
    doc["meta"] = {
        **environment,
        "runs": args.runs,
        "cases": wanted,
        "duration_s": round(time.monotonic() - began, 1),
        "load_avg_at_end": list(os.getloadavg()),
        "settings": doc.pop("settings"),
    }
    doc["summary"] = summarize(doc["runs"])
    doc["oddities"] = oddities(doc["runs"])
    json_path.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    print(render(doc))
    print(f"wrote {json_path} (and {json_path.with_suffix('.log').name})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
