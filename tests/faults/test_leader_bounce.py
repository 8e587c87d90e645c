"""Leader bounces under idempotent load.

An idempotent producer (acks=all) sends sequenced records over 6 partitions of an RF 3,
min ISR 2 topic while the leader of a random partition is SIGKILLed and restarted again
and again (after each restart, a preferred leader election hands leadership back, as
Kafka's own auto rebalance would, so leaders also move while the old one is alive).
librdkafka then reads the log: every acknowledged record must be there once, at the
offset the producer reported, in send order, and no send may have failed.

Slice: 50k records, 2 kills. Full (``AIOKPROTO_FAULTS=full``): 1M records, 20 kills.
A second test freezes leaders (SIGSTOP, then SIGCONT) instead: 30k/200k records, 2/6
freezes.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from aiokproto import Admin, NewTopic, Producer
from aiokproto.testing import KafkaHarnessError, LocalKafka
from tests.faults.chaos import evidence
from tests.faults.chaos.injector import Injector, Timeline, heal
from tests.faults.chaos.ledger import Audit, Ledger, audit, audit_partition, encode
from tests.faults.chaos.load import BatchNote, SequencedLoad, batch_evidence
from tests.faults.chaos.observer import ClusterView, ObserverError, read_log

if TYPE_CHECKING:
    from tests.faults.conftest import FaultScale

PARTITIONS = 6
PADDING = b"." * 20  # 30-byte values: many records per batch, many batches per second
MIN_RATE = 1_500.0  # records/s while kills remain, so every kill meets traffic
FIRST_CYCLE_GUESS_S = 25.0


class KillLoop:
    """Kills (or freezes) the leader of a random partition ``kills`` times, one at a
    time, each followed by a preferred leader election."""

    def __init__(
        self,
        injector: Injector,
        view: ClusterView,
        topic: str,
        kills: int,
        rng: random.Random,
        freeze: bool = False,
    ) -> None:
        self.freeze = freeze
        self.injector = injector
        self.view = view
        self.topic = topic
        self.kills = kills
        self.rng = rng
        self.cycle_s: list[float] = []
        self.elections = 0  # partitions whose leader moved by preferred election

    @property
    def done(self) -> int:
        return len(self.cycle_s)

    async def run(self) -> None:
        for _ in range(self.kills):
            began = time.monotonic()
            await asyncio.sleep(self.rng.uniform(1.0, 3.0))  # traffic on a healthy cluster
            partition = self.rng.randrange(PARTITIONS)
            leader = await asyncio.to_thread(self.view.leader_of, self.topic, partition)
            self.injector.timeline.note(f"partition {partition} is led by node {leader}")
            if self.freeze:
                # past the controller's 6 s session: fenced, leadership moves while the
                # producer's requests to the frozen node are still pending
                frozen = self.rng.uniform(7.0, 12.0)
                await asyncio.to_thread(self.injector.freeze, leader, frozen, [self.topic])
            else:
                # Sometimes back before the controller fences it (6 s session), sometimes
                # after the partitions moved to new leaders.
                down = self.rng.uniform(1.0, 10.0)
                await asyncio.to_thread(self.injector.bounce, leader, down, [self.topic])
            # Leadership back to the restarted node while the old leader is alive: the
            # producer's requests to it are answered NOT_LEADER_OR_FOLLOWER mid-flight.
            await asyncio.sleep(self.rng.uniform(0.0, 1.0))
            moved = await asyncio.to_thread(self.view.elect_preferred, self.topic, PARTITIONS)
            self.injector.timeline.note(f"preferred leaders elected for partitions {moved}")
            self.elections += len(moved)
            self.cycle_s.append(time.monotonic() - began)

    def seconds_left(self) -> float:
        per_cycle = statistics.mean(self.cycle_s) if self.cycle_s else FIRST_CYCLE_GUESS_S
        return max(1.0, (self.kills - self.done) * per_cycle)


def test_audit_finds_loss_duplicates_and_reordering() -> None:
    """The checker itself: a log with each kind of defect is reported as such."""
    offsets = [0, 1, 2, 3, 4]  # what the producer said
    log = [(0, encode(0, 0)), (1, encode(0, 2)), (2, encode(0, 1)), (3, encode(0, 2))]
    got = audit_partition(0, offsets, [], log)
    assert (got.lost, got.duplicated, got.reordered) == (2, 1, 1)  # seq 3, 4 lost
    assert got.misreported == 2  # seq 1 and 2 swapped places
    clean = audit_partition(0, [0, 1], [], [(0, encode(0, 0)), (1, encode(0, 1))])
    assert Audit([clean]).clean
    ledger = Ledger(1)
    ledger.offsets[0].extend([0, -1])  # seq 1 never settled
    assert not audit(ledger, {0: [(0, encode(0, 0))]}).clean
    notes = [[BatchNote(0, 0, 0, 1, ""), BatchNote(2, 2, 2, 3, ""), BatchNote(4, -1, 4, 2, "E")]]
    assert "BatchNote(first_seq=2" in batch_evidence(notes, Audit([got]))


@pytest.mark.cluster
async def test_leader_bounces_under_idempotent_load(
    kafka_cluster: LocalKafka,
    topic_name: str,
    fault_scale: FaultScale,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    await _bounce_under_load(
        kafka_cluster,
        topic_name,
        total=fault_scale.pick(50_000, 1_000_000),
        kills=fault_scale.pick(2, 20),
        budget_s=fault_scale.pick(400, 2_400),  # the whole produce phase, kills included
        freeze=False,
        log_dir=tmp_path,
        capsys=capsys,
    )


@pytest.mark.cluster
async def test_frozen_leaders_under_idempotent_load(
    kafka_cluster: LocalKafka,
    topic_name: str,
    fault_scale: FaultScale,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The same audit with SIGSTOP instead of SIGKILL: a frozen leader keeps its
    connections, so requests sent to it stay pending while leadership moves on."""
    await _bounce_under_load(
        kafka_cluster,
        topic_name,
        total=fault_scale.pick(30_000, 200_000),
        kills=fault_scale.pick(2, 6),
        budget_s=fault_scale.pick(400, 1_200),
        freeze=True,
        log_dir=tmp_path,
        capsys=capsys,
    )


async def _bounce_under_load(
    kafka_cluster: LocalKafka,
    topic_name: str,
    *,
    total: int,
    kills: int,
    budget_s: int,
    freeze: bool,
    log_dir: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    seed = evidence.seed()
    bootstrap = kafka_cluster.bootstrap_servers
    async with Admin(bootstrap_servers=bootstrap) as admin:
        await admin.create_topics(
            [
                NewTopic(
                    topic_name,
                    num_partitions=PARTITIONS,
                    replication_factor=3,
                    topic_configs={"min.insync.replicas": "2"},
                )
            ]
        )
    view = ClusterView(bootstrap)
    await asyncio.to_thread(view.wait_healthy, [topic_name], 60)
    timeline = Timeline()
    injector = Injector(kafka_cluster, view, timeline)
    loop = KillLoop(injector, view, topic_name, kills, random.Random(seed), freeze)
    began = time.monotonic()
    flush_error: BaseException | None = None
    overran = False
    phase_error: BaseException | None = None
    with evidence.client_log(log_dir / "client.log") as client_log:
        try:
            async with Producer(
                bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=5
            ) as producer:
                load = SequencedLoad(producer, topic_name, PARTITIONS, PADDING)
                killer = asyncio.create_task(loop.run())

                def keep_going() -> bool:
                    return not (killer.done() and load.ledger.sent >= total)

                def rate() -> float | None:
                    if killer.done():
                        return None  # the rest flat out
                    left = max(0, total - load.ledger.sent)
                    return max(MIN_RATE, left / loop.seconds_left())

                try:
                    async with asyncio.timeout(budget_s):
                        await load.run(keep_going, rate, per_partition=10)
                        await killer  # a harness failure (node never back) raises here
                except TimeoutError:
                    overran = True  # reported below with everything else
                except (ObserverError, KafkaHarnessError) as exc:  # cluster did not heal: reported
                    phase_error = exc
                finally:
                    killer.cancel()
                try:
                    await producer.flush(timeout_ms=180_000)
                except Exception as exc:  # a stall: reported with what is unsettled
                    flush_error = exc
        finally:
            await asyncio.to_thread(heal, kafka_cluster)
    produce_s = time.monotonic() - began

    log = await asyncio.to_thread(read_log, bootstrap, topic_name, PARTITIONS, 300)
    result = audit(load.ledger, log)
    facts = {
        "seed": seed,
        "records": result.summary(),
        "fault": "SIGSTOP" if freeze else "SIGKILL",
        "kills_survived": len(injector.bounces),
        "kills_planned": kills,
        "preferred_leader_moves": loop.elections,
        "errors": len(load.ledger.failures),
        "error_types": sorted({f.error for f in load.ledger.failures}),
        "send_error": repr(load.send_error) if load.send_error else None,
        "flush_error": repr(flush_error) if flush_error else None,
        "batches_retried": sum(b.attempts > 1 for bs in load.batches for b in bs),
        "produce_s": round(produce_s, 1),
        "overran_budget_s": budget_s if overran else None,
        "phase_error": repr(phase_error) if phase_error else None,
        "bounces": [
            f"node {b.node}: down {b.down_s:.1f}s, restart {b.restart_s:.1f}s, "
            f"isr {b.isr_s:.1f}s"
            for b in injector.bounces
        ],
        "client_log": str(client_log),
    }
    details = result.evidence()
    for failure in load.ledger.failures[:5]:
        details += f"\n  failed: {failure}"
    details += "\n" + batch_evidence(load.batches, result)
    details += "\n  timeline:\n" + timeline.render()
    title = "frozen leaders" if freeze else "leader bounces"
    evidence.emit(capsys, f"{title} under idempotent load", facts, details)

    assert phase_error is None, phase_error
    assert not overran, f"the produce phase took over {budget_s} s"
    assert load.send_error is None, load.send_error
    assert flush_error is None, flush_error
    assert len(injector.bounces) == kills
    assert load.ledger.sent >= total
    assert not load.ledger.failures, load.ledger.failures[:5]
    assert result.clean, result.summary()
    assert result.total("acknowledged") == load.ledger.sent
