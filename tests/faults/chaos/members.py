"""Consumer-group members as child processes (``tests.faults.chaos.member``): start,
SIGKILL, replace, stop, and merge what they processed."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiokproto.testing import processes
from tests.faults.chaos.ledger import parse_processed

REPO = Path(__file__).resolve().parents[3]
STOP_WAIT_S = 45.0  # the member's own bounds: 10 s for its loop, 20 s for stop()


@dataclass
class Member:
    slot: int
    generation: int  # how many processes this slot has had before this one
    proc: subprocess.Popen[bytes]
    out: Path
    log: Path
    started: float = field(default_factory=time.monotonic)
    killed: bool = False
    exit_code: int | None = None

    @property
    def name(self) -> str:
        return f"member-{self.slot}.{self.generation}"


class MemberPool:
    """Processes of one group; slot ``i`` keeps its ``group_instance_id`` across
    replacements when ``static`` (that is what static membership is for)."""

    def __init__(
        self,
        directory: Path,
        bootstrap: str,
        topic: str,
        group: str,
        assignor: str,
        static: bool,
        session_timeout_ms: int = 10_000,
        parallel: str | None = None,
    ) -> None:
        self.directory = directory
        self.bootstrap = bootstrap
        self.topic = topic
        self.group = group
        self.assignor = assignor
        self.static = static
        self.session_timeout_ms = session_timeout_ms
        self.parallel = parallel  # a ParallelConsumer ordering, or None: getmany loop
        self.live: dict[int, Member] = {}
        self.all: list[Member] = []

    def start(self, slot: int) -> Member:
        generation = sum(1 for m in self.all if m.slot == slot)
        stem = f"member-{slot}.{generation}"
        out, log = self.directory / f"{stem}.processed", self.directory / f"{stem}.log"
        argv = [
            sys.executable, "-m", "tests.faults.chaos.member",
            "--bootstrap", self.bootstrap, "--topic", self.topic, "--group", self.group,
            "--assignor", self.assignor, "--out", str(out), "--log", str(log),
            "--session-timeout-ms", str(self.session_timeout_ms),
        ]  # fmt: skip
        if self.static:
            argv += ["--instance-id", f"chaos-{slot}"]
        if self.parallel:
            argv += ["--parallel", self.parallel]
        # The harness's spawn: killed at interpreter exit and (from the main thread) by
        # the kernel if this process dies, so no member outlives the test run.
        proc = processes.spawn(argv, REPO, self.directory / f"{stem}.stderr")
        member = Member(slot, generation, proc, out, log)
        self.live[slot] = member
        self.all.append(member)
        return member

    def kill(self, slot: int) -> Member:
        member = self.live.pop(slot)
        member.exit_code = processes.kill(member.proc)
        member.killed = True
        return member

    def stop_all(self, wait_s: float = STOP_WAIT_S) -> list[str]:
        """SIGTERM every live member and wait; returns the ones that had to be
        SIGKILLed (their ``Consumer.stop()`` hung)."""
        for member in self.live.values():
            processes.signal_term(member.proc)
        deadline = time.monotonic() + wait_s
        hung = []
        for member in self.live.values():
            try:
                member.exit_code = member.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                processes.forget(member.proc)
            except subprocess.TimeoutExpired:
                member.exit_code = processes.kill(member.proc)
                hung.append(member.name)
        self.live.clear()
        return hung

    def kill_everything(self) -> None:
        """Cleanup: no child may outlive the test."""
        for member in self.all:
            processes.kill(member.proc)
        self.live.clear()

    def crashed(self) -> list[str]:
        """Members that exited on their own while they should have been running."""
        return [
            f"{m.name} exit {m.proc.returncode}"
            for m in self.live.values()
            if m.proc.poll() is not None
        ]

    def processed(self) -> dict[int, Counter[int]]:
        """``{partition: Counter(offset -> times processed)}`` over every process."""
        out: dict[int, Counter[int]] = {}
        for member in self.all:
            if not member.out.exists():
                continue
            for p, offset in parse_processed(member.out.read_text(encoding="ascii")):
                out.setdefault(p, Counter())[offset] += 1
        return out

    def statuses(self) -> dict[str, Any]:
        """Each gracefully stopped member's own counts (``<out>.status``)."""
        out: dict[str, Any] = {}
        for member in self.all:
            status = Path(f"{member.out}.status")
            if status.exists():
                out[member.name] = json.loads(status.read_text(encoding="utf-8"))
        return out

    def log_lines(self, pattern: str, limit: int = 40) -> list[str]:
        """Lines of every member log containing ``pattern`` (evidence)."""
        found = []
        for member in self.all:
            for path in (member.log, member.log.parent / f"{member.name}.stderr"):
                if not path.exists():
                    continue
                for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                    if pattern in line:
                        found.append(f"{member.name}: {line}")
        return found[-limit:]
