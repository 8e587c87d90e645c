"""Real network partitions under idempotent produce, transactions and group consumption.

Three KRaft nodes (b1..b3) and the clients (one child process, ``workload.py``) each sit
in a network namespace of their own, joined by a bridge in a switch namespace
(``netns.py``). While the workloads run, the test cuts and heals links there:

1. a broker cut from the controller quorum (its controller port, both ways), still
   reachable by clients and replicas;
2. the leader of input partition 0 cut from its followers (both ways), still
   reachable by the client;
3. the client cut from that partition's leader, not from the others;
4. asymmetric: what the leader sends to its followers dropped, the other way open;
5. a flapping link between the client and a leader (cut and healed every second);
6. random loss on every link (and ``tc netem`` delay where the kernel has netem).

After the heal, the history the workload wrote is judged by ``checker.py``: no lost,
duplicated or reordered record, no aborted or premature read, no skip; the figures are
printed. Slice (``make test``): about 60 s with one hold of each fault kind but 4 and 6
shortened. Full (``AIOKPROTO_FAULTS=full``): longer holds, 10 flaps, three rounds.
The whole test skips, saying why, without root, ``ip``/``tc``/``nft`` or nftables.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

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


class Faults:
    """Cuts and heals on a schedule, each step written to the timeline."""

    def __init__(self, net: netns.Network, kafka: NetnsKafka, run_dir: Path, seed: int) -> None:
        self.net = net
        self.kafka = kafka
        self.run_dir = run_dir
        self.rng = random.Random(seed)
        self.began = time.monotonic()
        self.timeline: list[str] = []
        self.kinds: list[str] = []

    def note(self, text: str) -> None:
        self.timeline.append(f"{time.monotonic() - self.began:7.1f}s {text}")

    def leader(self, topic: str = "input", partition: int = 0) -> str:
        try:
            found = json.loads((self.run_dir / "leaders.json").read_text())
            node = found[topic][str(partition)]
        except (OSError, ValueError, KeyError):
            node = None
        if node is None:  # unknown right now: any broker will do
            return self.rng.choice(BROKERS)
        return self.kafka.host_of(int(node))

    def hold(self, kind: str, what: str, seconds: float, cut: Callable[[], None]) -> None:
        cut()
        self.kinds.append(kind)
        self.note(f"{kind}: {what} ({', '.join(self.net.rules)})")
        time.sleep(seconds)
        self.net.heal()
        self.note(f"healed {kind}")

    def round(self, hold_s: float, settle_s: float, flaps: int, loss_pct: int) -> None:
        net = self.net
        victim = self.rng.choice(BROKERS)
        others = [b for b in BROKERS if b != victim]
        self.hold(
            "controller-isolation",
            f"{victim} cut from the quorum's port {CONTROLLER_PORT}",
            hold_s,
            lambda: net.partition([victim], others, port=CONTROLLER_PORT),
        )
        time.sleep(settle_s)
        leader = self.leader()
        followers = [b for b in BROKERS if b != leader]
        self.hold(
            "leader-from-followers",
            f"leader {leader} cut from {followers}",
            hold_s,
            lambda: net.partition([leader], followers),
        )
        time.sleep(settle_s)
        leader = self.leader()
        self.hold(
            "client-from-leader",
            f"client cut from leader {leader} only",
            hold_s,
            lambda: net.partition([CLIENT], [leader]),
        )
        time.sleep(settle_s)
        leader = self.leader("output", 1)
        followers = [b for b in BROKERS if b != leader]
        self.hold(
            "asymmetric",
            f"{leader} -> {followers} dropped, the other way open",
            hold_s,
            lambda: net.partition([leader], followers, one_way=True),
        )
        time.sleep(settle_s)
        target = self.leader("input", 2)
        for flap in range(flaps):
            self.hold(
                "flapping",
                f"client <-> {target}, flap {flap + 1}/{flaps}",
                1.0,
                lambda: net.partition([CLIENT], [target]),
            )
            time.sleep(1.0)
        time.sleep(settle_s)
        missing = net.netem_missing()
        if missing is None:
            net.delay(40, 20)
            self.note("netem: 40 ms +- 20 ms on every host")
        else:
            self.note(f"no delay: {missing}")
        self.hold("loss", f"{loss_pct}% of frames dropped", hold_s, lambda: net.lossy(loss_pct))
        net.undelay()
        time.sleep(settle_s)


@pytest.mark.cluster
def test_partitions_under_produce_transactions_and_group_consumption(
    fault_scale: FaultScale, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seed = evidence.seed()
    rounds = fault_scale.pick(1, 3)
    hold_s = fault_scale.pick(4, 12)
    settle_s = fault_scale.pick(2, 6)
    flaps = fault_scale.pick(3, 10)
    began = time.monotonic()
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    with netns.Network([*BROKERS, CLIENT]) as net:
        kafka = NetnsKafka(net, BROKERS, CLIENT, tmp_path / "kafka")
        child: subprocess.Popen[bytes] | None = None
        try:
            kafka.start()
            log = (tmp_path / "workload.log").open("wb")
            child = subprocess.Popen(
                [*net.exec_argv(CLIENT), sys.executable, "-m", "tests.faults.partitions.workload",
                 "--bootstrap", kafka.bootstrap_servers, "--dir", str(run_dir),
                 "--max-seconds", str(fault_scale.pick(240, 1_200))],
                cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
            netns.wait_until(
                lambda: (run_dir / "ready").exists() or child.poll() is not None, 90, "workload"
            )
            faults = Faults(net, kafka, run_dir, seed)
            time.sleep(settle_s)  # traffic on a healthy cluster first
            for _ in range(rounds):
                faults.round(hold_s, settle_s, flaps, loss_pct=fault_scale.pick(5, 10))
            faults.note("all healed: stop")
            (run_dir / "stop").touch()
            code = child.wait(timeout=fault_scale.pick(240, 1_200))
            log.close()
            output = (tmp_path / "workload.log").read_text(errors="replace")
            assert code == 0, f"workload exit {code}:\n{output[-3000:]}\n{kafka.log_tail()}"
        finally:
            if child is not None and child.poll() is None:
                child.kill()
                child.wait(timeout=10)
            kafka.stop()
    data = json.loads((run_dir / "history.json").read_text())
    report = check(History.from_json(data))
    elapsed = time.monotonic() - began
    with capsys.disabled():
        print(
            f"\n[partitions] seed {seed}, {rounds} round(s), {net.cuts_made} cuts "
            f"({len(faults.kinds)} holds: {', '.join(sorted(set(faults.kinds)))}), "
            f"cluster start {kafka.startup_seconds:.1f} s, total {elapsed:.0f} s, "
            f"{len(data['errors'])} client errors seen\n{report.summary()}"
        )
        print("\n".join(faults.timeline))
    assert report.clean, report.summary() + "\n" + "\n".join(data["errors"][-20:])
