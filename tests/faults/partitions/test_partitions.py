"""Real network partitions under idempotent produce, transactions and group consumption.

Three KRaft nodes (b1..b3) and the clients (one child process, ``workload.py``) each sit
in a network namespace of their own, joined by a bridge in a switch namespace
(``netns.py``). While the workloads run, the test cuts and heals links there:

1. a broker cut from the controller quorum (its controller port, both ways), still
   reachable by clients and replicas;
2. a partition leader cut from its followers (both ways), still reachable by the client;
3. the client cut from a partition's leader, not from the other brokers;
4. asymmetric: what a leader sends to its followers is dropped, the other way is open;
5. a flapping link between the client and a leader (cut and healed every second);
6. a slow link (``tc tbf``, 256 kbit/s) out of a leader;
7. random loss on every link, with ``tc netem`` delay where the kernel has netem (the
   timeline says when it has not).

After the heal, the history the workload wrote is judged by ``checker.py``: no lost,
duplicated or reordered record, no aborted or premature read, no skip; the figures and
the timeline (with the leader moves each fault caused) are printed. Slice (``make
test``): one round, the first two faults held 7 s (past the brokers' 6 s session: the
broker is fenced, leaders move), the others 3 s, about 60 s in all with the cluster
start. Full (``AIOKPROTO_FAULTS=full``): three rounds, 14 s and 8 s holds, 10 flaps.
The test skips, saying why, without root, ``ip``/``tc``/``nft`` or nftables.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from aiokproto.testing import processes
from aiokproto.testing.discovery import local_jars_possible
from tests.faults.chaos import evidence
from tests.faults.partitions import netns
from tests.faults.partitions.checker import History, check
from tests.faults.partitions.cluster import CONTROLLER_PORT, ROOT, NetnsKafka

if TYPE_CHECKING:
    from tests.faults.conftest import FaultScale

REASON = netns.unsupported()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")

BROKERS = ["b1", "b2", "b3"]
CLIENT = "client"


@dataclass(frozen=True)
class Plan:
    """How long each fault is held. ``long_s`` outlasts the brokers' 6 s session and the
    consumers' 10 s one: the controller fences a broker, leaders and groups move."""

    rounds: int
    long_s: float
    short_s: float
    settle_s: float
    flaps: int
    loss_pct: int


SLICE = Plan(rounds=1, long_s=7.0, short_s=3.0, settle_s=1.0, flaps=2, loss_pct=5)
FULL = Plan(rounds=3, long_s=14.0, short_s=8.0, settle_s=5.0, flaps=10, loss_pct=10)


class Faults:
    """Cuts and heals on a schedule, each step (and where the leaders are) written to
    the timeline."""

    def __init__(self, net: netns.Network, kafka: NetnsKafka, run_dir: Path, seed: int) -> None:
        self.net = net
        self.kafka = kafka
        self.run_dir = run_dir
        self.rng = random.Random(seed)
        self.began = time.monotonic()
        self.timeline: list[str] = []
        self.kinds: list[str] = []
        self.leader_moves = 0
        self._last_leaders: dict[str, str] = {}

    def note(self, text: str) -> None:
        self.timeline.append(f"{time.monotonic() - self.began:7.1f}s {text}")

    def leaders(self) -> dict[str, str]:
        """``"input/0"`` -> the host leading it, as the workload last saw it."""
        try:
            found = json.loads((self.run_dir / "leaders.json").read_text())
        except (OSError, ValueError):
            return {}
        return {
            f"{topic}/{p}": self.kafka.host_of(int(node)) if node is not None else "none"
            for topic, parts in found.items()
            for p, node in sorted(parts.items())
        }

    def leader(self, topic: str = "input", partition: int = 0) -> str:
        host = self.leaders().get(f"{topic}/{partition}", "none")
        return host if host in BROKERS else self.rng.choice(BROKERS)

    def hold(self, kind: str, what: str, seconds: float, cut: Callable[[], None]) -> None:
        cut()
        self.kinds.append(kind)
        self.note(f"{kind}: {what} [{', '.join(self.net.rules)}] for {seconds:.0f} s")
        time.sleep(seconds)
        self.net.heal()
        self.net.unshape()
        now = self.leaders()
        moved = [f"{k} {self._last_leaders[k]}->{v}" for k, v in now.items()
                 if self._last_leaders.get(k, v) != v]  # fmt: skip
        self.leader_moves += len(moved)
        self._last_leaders = now
        self.note(f"healed {kind}; leaders moved since the last heal: {moved or 'none'}")

    def round(self, plan: Plan) -> None:
        net = self.net
        self._last_leaders = self._last_leaders or self.leaders()
        victim = self.rng.choice(BROKERS)
        others = [b for b in BROKERS if b != victim]
        self.hold(
            "controller-isolation",
            f"{victim} cut from the quorum's port {CONTROLLER_PORT}",
            plan.long_s,
            lambda: net.partition([victim], others, port=CONTROLLER_PORT),
        )
        time.sleep(plan.settle_s)
        leader = self.leader()
        followers = [b for b in BROKERS if b != leader]
        self.hold(
            "leader-from-followers",
            f"input/0's leader {leader} cut from {followers}",
            plan.long_s,
            lambda: net.partition([leader], followers),
        )
        time.sleep(plan.settle_s)
        leader = self.leader("output", 0)
        self.hold(
            "client-from-leader",
            f"client cut from output/0's leader {leader} only",
            plan.short_s,
            lambda: net.partition([CLIENT], [leader]),
        )
        time.sleep(plan.settle_s)
        leader = self.leader("output", 1)
        followers = [b for b in BROKERS if b != leader]
        self.hold(
            "asymmetric",
            f"what output/1's leader {leader} sends to {followers} dropped, not the reverse",
            plan.short_s,
            lambda: net.partition([leader], followers, one_way=True),
        )
        time.sleep(plan.settle_s)
        target = self.leader("input", 2)
        for flap in range(plan.flaps):
            self.hold(
                "flapping",
                f"client <-> input/2's leader {target}, flap {flap + 1}/{plan.flaps}",
                1.0,
                lambda: net.partition([CLIENT], [target]),
            )
            time.sleep(1.0)
        time.sleep(plan.settle_s)
        slow = self.leader("input", 1)
        self.hold(
            "slow-link",
            f"input/1's leader {slow} sends at 256 kbit/s",
            plan.short_s,
            lambda: net.throttle(slow, 256),
        )
        time.sleep(plan.settle_s)
        missing = net.netem_missing()

        def lossy() -> None:
            if missing is None:
                net.delay(40, 20)
            net.lossy(plan.loss_pct)

        delay = "40 +- 20 ms netem delay everywhere" if missing is None else f"no delay ({missing})"
        self.hold("loss", f"{plan.loss_pct}% of frames dropped, {delay}", plan.short_s, lossy)
        time.sleep(plan.settle_s)


@pytest.mark.cluster
def test_partitions_under_produce_transactions_and_group_consumption(
    fault_scale: FaultScale,
    kafka_version: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    pytestconfig: pytest.Config,
) -> None:
    if pytestconfig.getoption("--unit", default=False):
        pytest.skip("--unit: this test starts a Kafka cluster of its own")
    if not local_jars_possible(kafka_version):
        pytest.skip(f"Kafka {kafka_version} needs Java 17+ and its jars cached (or Maven)")
    seed = evidence.seed()
    plan = FULL if fault_scale.full else SLICE
    began = time.monotonic()
    run_dir = tmp_path / "run"
    run_dir.mkdir()

    def workload_log() -> str:
        return (tmp_path / "workload.log").read_text(errors="replace")[-3000:]

    with netns.Network([*BROKERS, CLIENT]) as net:
        kafka = NetnsKafka(net, BROKERS, CLIENT, tmp_path / "kafka", kafka_version)
        child: subprocess.Popen[bytes] | None = None
        try:
            kafka.start()
            # spawn: the child dies with this process (PDEATHSIG) and at its exit
            child = processes.spawn(
                [*net.exec_argv(CLIENT), sys.executable, "-m", "tests.faults.partitions.workload",
                 "--bootstrap", kafka.bootstrap_servers, "--dir", str(run_dir),
                 "--max-seconds", str(fault_scale.pick(240, 1_200))],
                ROOT, tmp_path / "workload.log",
            )  # fmt: skip
            netns.wait_until(
                lambda: (run_dir / "ready").exists() or child.poll() is not None,
                120,
                "the workloads' first acknowledged record, committed transaction and read",
            )
            assert child.poll() is None, f"workload exited:\n{workload_log()}"
            faults = Faults(net, kafka, run_dir, seed)
            time.sleep(plan.settle_s)  # traffic on a healthy cluster first
            for _ in range(plan.rounds):
                faults.round(plan)
            faults.note("all healed: stop")
            (run_dir / "stop").touch()
            code = child.wait(timeout=fault_scale.pick(240, 1_200))
            assert code == 0, f"workload exit {code}:\n{workload_log()}\n{kafka.log_tail()}"
        finally:
            if child is not None:
                processes.kill(child)
            kafka.stop()
    data = json.loads((run_dir / "history.json").read_text())
    report = check(History.from_json(data))
    elapsed = time.monotonic() - began
    with capsys.disabled():
        print(
            f"\n[partitions] seed {seed}, {plan.rounds} round(s), {net.cuts_made} cuts, "
            f"{len(faults.kinds)} holds ({', '.join(sorted(set(faults.kinds)))}), "
            f"{faults.leader_moves} leader moves, "
            f"cluster start {kafka.startup_seconds:.1f} s, total {elapsed:.0f} s, "
            f"{len(data['errors'])} client errors seen\n{report.summary()}"
        )
        print("\n".join(faults.timeline))
        print("client errors (first 10):\n  " + "\n  ".join(data["errors"][:10]))
    assert report.clean, report.summary() + "\n" + "\n".join(data["errors"][-20:])
    # The same history with one acknowledged record taken out of the log: caught.
    history = History.from_json(data)
    partition = next(p for p, rows in history.input_log.items() if rows)
    history.input_log[partition].pop()
    assert check(history).counts["lost"] >= 1
