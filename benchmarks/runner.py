"""The orchestrator: one broker, every scenario, every client, interleaved and repeated:
warm-up, topics, seeding, one child per (client, scenario, run), broker-side offset
checks.

For each scenario and run the clients go in rotated order (A B C, B C A, ...), each in
its own child process (``benchmarks.child``); each scenario opens with one untimed run
whose result is dropped (see ``Session.settle``). Produce and latency runs get a fresh topic
(so "the end offsets grew by N" is exact, and no run inherits another's log); consume
runs share one topic per scenario, written once by confluent-kafka before the runs.
Every run is validated (``benchmarks.validation``); the raw runs go to the report.
Transactional produce runs are also read back with a read_committed consumer, so a run
counts only if every record was committed.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiokproto import Admin, Consumer, NewTopic, OffsetSpec, TopicPartition
from benchmarks import java_tools, machine
from benchmarks.child import RESULT_MARKER
from benchmarks.clients import ADAPTERS
from benchmarks.scenarios import (
    BATCH_SIZE,
    LINGER_MS,
    TXN_RECORDS,
    Job,
    Scenario,
    job_timeout_s,
    run_order,
)
from benchmarks.validation import check_run

REPO_ROOT = Path(__file__).resolve().parent.parent
SEED_CLIENT = "confluent-kafka"
_STDERR_TAIL = 1500
_READ_BACK_S = 60.0  # at most this long to read a transactional run's topic back

Progress = Callable[[str], None]


@dataclass
class RunOptions:
    scenarios: list[Scenario]
    clients: list[str]
    runs: int = 3
    bootstrap_servers: str | None = None  # None: start a local broker
    quick: bool = False
    warmup_records: int = 300_000
    settle_runs: bool = True  # one untimed run before each scenario's timed ones
    progress: Progress = field(default=lambda msg: print(msg, file=sys.stderr, flush=True))


@dataclass
class Broker:
    bootstrap_servers: str
    info: dict[str, Any]
    stop: Callable[[], None]


def start_broker(bootstrap: str | None) -> Broker:
    """``bootstrap`` (or ``$KAFKA_BOOTSTRAP_SERVERS``) if given, else a local single-node
    KRaft broker with the throughput JVM options (full JIT, G1, 1 GiB heap)."""
    bootstrap = bootstrap or os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if bootstrap:
        return Broker(bootstrap, {"source": "external", "bootstrap": bootstrap}, lambda: None)
    from aiokproto.testing import PLAINTEXT_ONLY, THROUGHPUT_JVM_OPTIONS, LocalKafka

    kafka = LocalKafka(security=PLAINTEXT_ONLY, jvm_options=THROUGHPUT_JVM_OPTIONS)
    kafka.start()
    info = {
        "source": "aiokproto.testing.LocalKafka (single KRaft node, PLAINTEXT)",
        "version": kafka.version,
        "jvm_options": list(THROUGHPUT_JVM_OPTIONS),
        "startup_s": kafka.startup_seconds,
    }
    return Broker(kafka.bootstrap_servers, info, kafka.stop)


async def run_child(job: Job) -> dict[str, Any]:
    """Run one job in a fresh interpreter; never raises: failures become ``error``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env.update(ADAPTERS[job.client].env)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "benchmarks.child", json.dumps(job.to_json()),
        cwd=REPO_ROOT, env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    base = {"client": job.client, "scenario_id": job.scenario.id, "run": job.run,
            "topic": job.topic}
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout=job.timeout_s)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return {**base, "error": f"timed out after {job.timeout_s:.0f}s (killed)"}
    except BaseException:  # Ctrl-C / cancellation: leave no client running behind us
        if proc.returncode is None:
            proc.kill()
            await asyncio.shield(proc.wait())
        raise
    for line in reversed(out.decode("utf-8", "replace").splitlines()):
        if line.startswith(RESULT_MARKER):
            result: dict[str, Any] = json.loads(line[len(RESULT_MARKER) :])
            return result
    tail = err.decode("utf-8", "replace")[-_STDERR_TAIL:]
    return {**base, "error": f"child exited {proc.returncode} without a result: {tail}"}


class Session:
    """One benchmark session against one broker."""

    def __init__(self, opts: RunOptions, bootstrap: str) -> None:
        self.opts = opts
        self.bootstrap = bootstrap
        self.runs: list[dict[str, Any]] = []
        self.unavailable: dict[str, str] = {}  # client -> why it could not run at all
        self.admin_client: Admin | None = None
        self._done = 0
        self._total = sum(
            opts.runs * len(self.clients_for(s)) for s in opts.scenarios
        )

    def clients_for(self, scenario: Scenario) -> list[str]:
        return [c for c in self.opts.clients if ADAPTERS[c].supports(scenario)]

    @property
    def admin(self) -> Admin:
        if self.admin_client is None:
            raise RuntimeError("session not started")
        return self.admin_client

    async def run(self) -> list[dict[str, Any]]:
        if "java-perf" in self.opts.clients:
            try:
                await asyncio.to_thread(java_tools.resolve)
            except Exception as exc:  # reported per run as FAILED, not dropped
                self.unavailable["java-perf"] = f"kafka-tools unavailable: {exc}"
        async with Admin(bootstrap_servers=self.bootstrap) as admin:
            self.admin_client = admin
            if self.opts.warmup_records:
                await self.warm_up()
            for scenario in self.opts.scenarios:
                await self.run_scenario(scenario)
        return self.runs

    async def run_scenario(self, scenario: Scenario) -> None:
        clients = self.clients_for(scenario)
        seed_topic = None
        seed_error = None
        if scenario.kind == "consume":
            seed_topic, seed_error = await self.seed(scenario)
        try:
            if self.opts.settle_runs:
                await self.settle(scenario, clients, seed_topic, seed_error)
            for run in range(self.opts.runs):
                for position, client in enumerate(run_order(clients, run)):
                    record = await self.one_run(scenario, client, run, seed_topic, seed_error)
                    record["order"] = position
                    self.runs.append(record)
                    self._report(record)
        finally:
            if seed_topic is not None:
                await self.delete_topic(seed_topic)

    async def settle(
        self,
        scenario: Scenario,
        clients: list[str],
        seed_topic: str | None,
        seed_error: str | None,
    ) -> None:
        """One run of the first available client, its result dropped. A scenario's first
        timed run otherwise meets a broker still busy with the previous scenario (its
        topics being deleted, a new request mix to compile), and the rotation puts the
        same client first in every scenario: in three make bench runs that opening run
        was on average 1.17x, 1.17x and 1.89x worse than the same client's median, the
        other runs 1.01x to 1.10x."""
        client = next((c for c in clients if c not in self.unavailable), None)
        if client is None:
            return
        self.opts.progress(f"  {scenario.id}: one untimed {client} run first (dropped)")
        await self.one_run(scenario, client, -1, seed_topic, seed_error)

    async def one_run(
        self,
        scenario: Scenario,
        client: str,
        run: int,
        seed_topic: str | None,
        seed_error: str | None,
    ) -> dict[str, Any]:
        base = {"client": client, "scenario_id": scenario.id, "run": run}
        if client in self.unavailable:
            return {**base, "valid": False, "reasons": [self.unavailable[client]]}
        if scenario.kind == "consume":
            if seed_topic is None:
                return {**base, "valid": False, "reasons": [f"no input data: {seed_error}"]}
            job = self.job(client, scenario, run, seed_topic)
            result = await run_child(job)
            reasons = check_run(scenario, result, None)
            return {**result, "valid": not reasons, "reasons": reasons}
        topic = await self.create_topic(scenario, "p" if scenario.kind == "produce" else "l")
        try:
            result = await run_child(self.job(client, scenario, run, topic))
            delta = await self.end_offsets_sum(topic, scenario.partitions)
            if not scenario.txn_records:
                reasons = check_run(scenario, result, delta)
                return {**result, "offsets_delta": delta, "valid": not reasons,
                        "reasons": reasons}
            committed = None
            if not result.get("error"):
                committed = await self.read_committed(topic, scenario.partitions)
            reasons = check_run(scenario, result, delta, committed)
            return {**result, "offsets_delta": delta, "committed_records": committed,
                    "valid": not reasons, "reasons": reasons}
        finally:
            await self.delete_topic(topic)

    def job(self, client: str, scenario: Scenario, run: int, topic: str) -> Job:
        return Job(
            client=client,
            scenario=scenario,
            bootstrap_servers=self.bootstrap,
            topic=topic,
            run=run,
            timeout_s=job_timeout_s(scenario),
            group_id=f"bench-{client}-{uuid.uuid4().hex[:8]}",
        )

    async def warm_up(self) -> None:
        """Push records through the broker before the first measured run: a fresh
        broker JVM is still compiling its hot paths, which would penalise whichever
        client happens to go first."""
        for compression in ("none", "zstd"):
            warm = Scenario("produce", 100, self.opts.warmup_records, 1, "1", compression)
            topic = await self.create_topic(warm, "w")
            try:
                result = await run_child(
                    Job(SEED_CLIENT, warm, self.bootstrap, topic, -1, job_timeout_s(warm))
                )
                if not result.get("error"):
                    consume = Scenario("consume", 100, warm.records)
                    await run_child(Job(SEED_CLIENT, consume, self.bootstrap, topic, -1,
                                        job_timeout_s(consume), group_id=f"warm-{topic}"))
            finally:
                await self.delete_topic(topic)
        if any(s.txn_records for s in self.opts.scenarios):
            await self.warm_up_transactions()
        self.opts.progress(f"  broker warmed up with {self.opts.warmup_records} records")

    async def warm_up_transactions(self) -> None:
        """The first transactional producer makes the broker create its transaction
        state log, and the commit path is still cold: both before the measured runs."""
        warm = Scenario("produce", 100, 50 * TXN_RECORDS, 1, "all", txn_records=TXN_RECORDS)
        topic = await self.create_topic(warm, "w")
        try:
            await run_child(Job(SEED_CLIENT, warm, self.bootstrap, topic, -1,
                                job_timeout_s(warm)))
        finally:
            await self.delete_topic(topic)

    async def seed(self, scenario: Scenario) -> tuple[str | None, str | None]:
        """The consume scenario's input: N records written once by confluent-kafka with
        the scenario's compression, checked like any produce run."""
        topic = await self.create_topic(scenario, "c")
        writer = Scenario("produce", scenario.value_size, scenario.records,
                          scenario.partitions, "1", scenario.compression)
        job = Job(SEED_CLIENT, writer, self.bootstrap, topic, -1, job_timeout_s(writer))
        result = await run_child(job)
        delta = await self.end_offsets_sum(topic, scenario.partitions)
        reasons = check_run(writer, result, delta)
        if reasons:
            await self.delete_topic(topic)
            return None, f"seeding with {SEED_CLIENT} failed: {'; '.join(reasons)}"
        self.opts.progress(f"  seeded {topic}: {scenario.records} records")
        return topic, None

    async def create_topic(self, scenario: Scenario, prefix: str) -> str:
        name = f"bench-{prefix}-{uuid.uuid4().hex[:12]}"
        await self.admin.create_topics(
            [NewTopic(name, num_partitions=scenario.partitions, replication_factor=1)]
        )
        # every partition has a leader before a client looks
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                await self.end_offsets_sum(name, scenario.partitions, strict=True)
                break
            except Exception:
                await asyncio.sleep(0.1)
        return name

    async def end_offsets_sum(
        self, topic: str, partitions: int, *, strict: bool = False
    ) -> int | None:
        specs = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)}
        try:
            offsets = await self.admin.list_offsets(specs)
        except Exception:
            if strict:
                raise
            return None
        return sum(r.offset for r in offsets.values())

    async def read_committed(self, topic: str, partitions: int) -> int | None:
        """How many records a read_committed consumer finds in ``topic``: it reads until
        its position reaches every partition's end offset (past the last commit marker);
        None if it cannot within ``_READ_BACK_S`` (say, a transaction left open)."""
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        count = 0
        try:
            ends = await self.admin.list_offsets({tp: OffsetSpec.latest() for tp in tps})
            async with Consumer(bootstrap_servers=self.bootstrap, group_id=None,
                                isolation_level="read_committed",
                                auto_offset_reset="earliest") as consumer:
                consumer.assign(tps)
                deadline = time.monotonic() + _READ_BACK_S
                while time.monotonic() < deadline:
                    batch = await consumer.getmany(timeout_ms=500, max_records=10_000)
                    count += sum(len(records) for records in batch.values())
                    positions = [await consumer.position(tp) for tp in tps]
                    if all(pos >= ends[tp].offset for pos, tp in zip(positions, tps, strict=True)):
                        return count
        except Exception as exc:
            self.opts.progress(f"  (could not read {topic} back: {exc})")
        return None

    async def delete_topic(self, topic: str) -> None:
        try:
            await self.admin.delete_topics([topic])
        except Exception as exc:  # a leftover topic only costs disk
            self.opts.progress(f"  (could not delete {topic}: {exc})")

    def _report(self, record: dict[str, Any]) -> None:
        self._done += 1
        status = "ok" if record["valid"] else "FAILED: " + "; ".join(record["reasons"])[:200]
        figure = ""
        if record["valid"] and record.get("elapsed_s"):
            scenario = next(s for s in self.opts.scenarios if s.id == record["scenario_id"])
            if "latency" in record:
                figure = f"p99 {record['latency']['p99_ms']:.1f} ms "
            else:
                count = record.get("measured_records", scenario.records)
                figure = f"{count / record['elapsed_s']:,.0f} msg/s "
        self.opts.progress(
            f"[{self._done}/{self._total}] {record['scenario_id']} run {record['run'] + 1} "
            f"{record['client']}: {figure}{status}"
        )


def run_session(opts: RunOptions) -> dict[str, Any]:
    """Start (or find) the broker, run everything, return the raw results document."""
    began = time.monotonic()
    opts.progress("starting Kafka..." if not (opts.bootstrap_servers or os.environ.get(
        "KAFKA_BOOTSTRAP_SERVERS")) else "using the given Kafka")
    broker = start_broker(opts.bootstrap_servers)
    try:
        environment = machine.describe(broker.info)  # before the runs: load at start
        opts.progress(f"Kafka at {broker.bootstrap_servers}")
        session = Session(opts, broker.bootstrap_servers)
        runs = asyncio.run(session.run())
    finally:
        broker.stop()
    return {
        "meta": {
            **environment,
            "quick": opts.quick,
            "runs_per_scenario": opts.runs,
            "settle_runs": opts.settle_runs,
            "duration_s": round(time.monotonic() - began, 1),
            "load_avg_at_end": list(os.getloadavg()),
            "settings": {
                "linger_ms": LINGER_MS,
                "linger_ms_latency": 0,
                "batch_size": BATCH_SIZE,
                "enable_idempotence": False,
                "transactions": f"produce txn scenarios: {TXN_RECORDS} records per "
                "transaction, each committed before the next begins; acks=all and "
                "idempotence on (transactions need them); a run counts only if a "
                "read_committed consumer reads every record back",
                "keys": "none (the client's default partitioner spreads records)",
                "values": "half random characters, half repeated text (~2:1 with zstd)",
                "mb": "10^6 bytes of record values",
                "cpu": "user+system CPU seconds of the client process during the measured "
                "phase (all threads), per million records; java-perf: whole JVM",
                "rss": "peak resident set size of the client process (ru_maxrss)",
                "consume_timing": "from the first poll that returned records to the last "
                "record; that first batch is left out of the count (client start-up is "
                "reported as startup_s in the JSON)",
                "latency": "from the intended send time of a fixed-rate schedule to the "
                "consumer in the same process receiving it; blocking clients wait for a "
                "send time with time.sleep, asyncio clients with a timer fd their event "
                "loop watches (an asyncio timer alone wakes up to 1 ms late; before "
                "2026-11-24 they yielded to the loop in a busy wait, which kept a CPU "
                "busy that the broker needed); both wake tens of microseconds late, and "
                "that counts as latency",
            },
            "client_notes": {name: ADAPTERS[name].note for name in opts.clients},
            "unavailable": session.unavailable,
        },
        "scenarios": [s.to_json() for s in opts.scenarios],
        "runs": runs,
    }
