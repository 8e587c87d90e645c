"""Fault injection on a ``LocalKafka``: SIGKILL and restart nodes, with a timeline.

Blocking, like the harness it drives; call from a thread (``asyncio.to_thread``).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from dataclasses import dataclass, field

from aiokproto.testing import LocalKafka
from tests.faults.chaos.observer import ClusterView, ObserverError

# A SIGKILLed node replays its logs before it answers; on a busy 2-core box that takes
# seconds, and catching up to a full ISR a few more.
RESTART_TIMEOUT_S = 120.0
ISR_TIMEOUT_S = 120.0


@dataclass
class Timeline:
    """What the injector did and when (seconds since the timeline began), for reports."""

    began: float = field(default_factory=time.monotonic)
    events: list[tuple[float, str]] = field(default_factory=list)

    def note(self, what: str) -> None:
        self.events.append((time.monotonic() - self.began, what))

    def render(self, last: int = 400) -> str:
        return "\n".join(f"  {t:8.2f}s {what}" for t, what in self.events[-last:])


@dataclass(frozen=True)
class Bounce:
    node: int
    down_s: float  # from SIGKILL until the restarted JVM was launched
    restart_s: float  # launch until the node and its peers saw each other
    isr_s: float  # from then until every watched partition had a full ISR


class Injector:
    """Kills and restarts nodes of ``cluster``; ``healthy_topics`` are waited for after
    each restart (leader present, full ISR) so the next kill cannot cost min ISR."""

    def __init__(self, cluster: LocalKafka, view: ClusterView, timeline: Timeline) -> None:
        self.cluster = cluster
        self.view = view
        self.timeline = timeline
        self.bounces: list[Bounce] = []

    def bounce(self, node: int, down_s: float, healthy_topics: list[str]) -> Bounce:
        """SIGKILL ``node``, leave it down ``down_s``, restart it, wait for full ISR."""
        self.timeline.note(f"SIGKILL node {node}")
        killed = time.monotonic()
        self.cluster.kill_node(node)
        time.sleep(down_s)
        self.timeline.note(f"leaders while node {node} is down: {self._leaders(healthy_topics)}")
        self.timeline.note(f"restart node {node}")
        launched = time.monotonic()
        self.cluster.restart_node(node, timeout=RESTART_TIMEOUT_S)
        ready = time.monotonic()
        self.timeline.note(f"node {node} ready after {ready - launched:.1f} s")
        isr_s = self.view.wait_healthy(healthy_topics, ISR_TIMEOUT_S)
        self.timeline.note(f"ISR full after {isr_s:.1f} s more")
        done = Bounce(node, launched - killed, ready - launched, isr_s)
        self.bounces.append(done)
        return done

    def freeze(self, node: int, frozen_s: float, healthy_topics: list[str]) -> Bounce:
        """SIGSTOP ``node`` for ``frozen_s``, then SIGCONT and wait for full ISR.

        Unlike a SIGKILL, a frozen broker keeps its sockets open: requests already sent
        to it stay pending (until the client's request timeout) while the controller
        fences it and moves leadership: the "old leader still owes an answer" case."""
        pid = self.cluster.node(node).pid
        if pid is None:
            raise ObserverError(f"node {node} has no process to freeze")
        self.timeline.note(f"SIGSTOP node {node}")
        began = time.monotonic()
        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(frozen_s)
            # asked of the other nodes: librdkafka would wait for the frozen one
            others = ",".join(n.bootstrap() for n in self.cluster.nodes if n.node_id != node)
            leaders = self._leaders(healthy_topics, ClusterView(others))
            self.timeline.note(f"leaders while node {node} is frozen: {leaders}")
        finally:
            os.kill(pid, signal.SIGCONT)
        resumed = time.monotonic()
        self.timeline.note(f"SIGCONT node {node}")
        self.cluster.wait_for_brokers(
            [n.node_id for n in self.cluster.nodes], timeout=RESTART_TIMEOUT_S
        )
        ready = time.monotonic()
        isr_s = self.view.wait_healthy(healthy_topics, ISR_TIMEOUT_S)
        self.timeline.note(f"ISR full {ready - resumed + isr_s:.1f} s after SIGCONT")
        done = Bounce(node, resumed - began, ready - resumed, isr_s)
        self.bounces.append(done)
        return done

    def _leaders(self, topics: list[str], view: ClusterView | None = None) -> str:
        """``topic partition:leader/ISR size ...`` for a timeline note (-1: no leader)."""
        parts = []
        for topic in topics:
            try:
                views = sorted((view or self.view).partitions(topic).items())
                states = " ".join(f"{p}:{v.leader}/{len(v.isr)}" for p, v in views)
                parts.append(f"{topic[:24]} {states}")
            except Exception as exc:  # only a note; a broker may be answering slowly
                parts.append(f"{topic[:24]} {exc!r}")
        return "; ".join(parts)

    def kill_all(self) -> None:
        for node in self.cluster.nodes:
            if node.is_running:
                node.kill()
        self.timeline.note("SIGKILL every node")

    def restore_all(self, timeout: float = RESTART_TIMEOUT_S) -> float:
        """Start every stopped node together and wait until all see each other.

        ``restart_node`` cannot do this one node at a time: a lone KRaft voter has no
        quorum, so the first node never becomes ready while the others are down.
        """
        began = time.monotonic()
        stopped = [n for n in self.cluster.nodes if not n.is_running]
        if not stopped:
            return 0.0
        for node in stopped:
            node.launch()
        everyone = [n.node_id for n in self.cluster.nodes]
        deadline = began + timeout
        for node in self.cluster.nodes:
            node.wait_ready(everyone, timeout=max(1.0, deadline - time.monotonic()))
        self.cluster.wait_for_brokers(everyone, timeout=max(1.0, deadline - time.monotonic()))
        took = time.monotonic() - began
        self.timeline.note(f"nodes {[n.node_id for n in stopped]} back after {took:.1f} s")
        return took


def heal(cluster: LocalKafka) -> None:
    """After a test: every node running again. The fixture's own healing restarts nodes
    one by one, which cannot work when more than one is down. A failure here is printed,
    not raised, so that it does not hide the test's own outcome."""
    injector = Injector(cluster, ClusterView(cluster.bootstrap_servers), Timeline())
    try:
        injector.restore_all()
    except Exception as exc:
        print(f"healing the cluster failed: {exc!r}", file=sys.stderr)
