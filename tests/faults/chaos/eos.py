"""Support for the exactly-once fault tests: a read_committed read-back with our own
consumer, the removal of a SIGKILLed process's group member, and a supervised child
process (the ``examples/exactly_once.py`` service)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from aiokproto import Admin, AdminBatchError, Consumer
from aiokproto.cluster.coordinators import GROUP
from aiokproto.errors import GroupIdNotFoundError, KafkaError, UnknownMemberIdError, for_code
from aiokproto.protocol.messages.leave_group import (
    LeaveGroupRequest,
    LeaveGroupRequestMemberIdentity,
)
from aiokproto.structs import TopicPartition

ROOT = Path(__file__).resolve().parents[3]


#: how long read_committed waits for the markers of transactions already committed
MARKERS_WAIT_S = 30.0


async def read_committed(
    bootstrap: str, topic: str, partitions: int, timeout_s: float
) -> dict[int, list[tuple[int, bytes | None, bytes]]]:
    """``{partition: [(offset, key, value), ...]}`` of every committed record, read with
    aiokproto's consumer at ``isolation_level="read_committed"`` from the log start up to
    the last stable offset, once it reaches the high watermark (at most
    ``MARKERS_WAIT_S``; after that, as it is then).

    ``commit_transaction()`` returns when the coordinator has logged the commit; the
    markers that make its records readable are written to the partitions after that.
    Taking the last stable offset at once missed a just-committed transaction when the
    markers were late (a loaded machine, a coordinator restarted just before)."""
    out: dict[int, list[tuple[int, bytes | None, bytes]]] = {p: [] for p in range(partitions)}
    async with (
        Consumer(
            bootstrap_servers=bootstrap, isolation_level="read_committed", max_poll_records=10_000
        ) as consumer,
        Consumer(bootstrap_servers=bootstrap) as uncommitted,
    ):
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        deadline = time.monotonic() + timeout_s
        settle = time.monotonic() + min(MARKERS_WAIT_S, timeout_s / 2)
        while True:
            ends = await consumer.end_offsets(tps)
            if ends == await uncommitted.end_offsets(tps) or time.monotonic() >= settle:
                break
            await asyncio.sleep(0.2)
        while True:
            behind = [tp for tp in tps if await consumer.position(tp) < ends[tp]]
            if not behind:
                return out
            if time.monotonic() >= deadline:
                got = {p: len(v) for p, v in out.items()}
                raise AssertionError(
                    f"reading {topic} read_committed took over {timeout_s:.0f} s; "
                    f"read {got}, last stable offsets {ends}"
                )
            for tp, records in (await consumer.getmany(timeout_ms=500)).items():
                out[tp.partition].extend((r.offset, r.key, bytes(r.value or b"")) for r in records)


async def evict_members(admin: Admin, group: str, timeout_s: float = 30.0) -> list[str]:
    """LeaveGroup on behalf of every member of ``group`` (what Java's
    ``Admin.removeMembersFromConsumerGroup`` does). Called only while no live process
    is in the group: the dead member of a SIGKILLed process would otherwise hold the
    next instance's join for the whole session timeout (45 s). Returns the member ids
    removed."""
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            try:
                desc = (await admin.describe_consumer_groups([group]))[group]
            except AdminBatchError as exc:
                if isinstance(exc.errors.get(group), GroupIdNotFoundError):
                    return []  # killed before it ever joined: nobody to remove
                raise
            members = [m.member_id for m in desc.members]
            if not members:
                return []
            node = (await admin.cluster.coordinators.find(GROUP, group)).node_id
            conn = await admin.cluster.connection(node)
            version = conn.version_for(LeaveGroupRequest)
            if version < 3:
                raise AssertionError(f"LeaveGroup v{version} cannot remove other members")
            request = LeaveGroupRequest(
                group_id=group,
                members=[
                    LeaveGroupRequestMemberIdentity(member_id=m, reason="SIGKILLed by the test")
                    for m in members
                ],
            )
            response = await conn.send(request, version)
            codes = [response.error_code, *(m.error_code for m in response.members)]
            bad = [c for c in codes if c and c != UnknownMemberIdError.errno]
            if not bad:
                return members
            last = for_code(bad[0])(f"LeaveGroup for {group!r}")
            admin.cluster.coordinators.invalidate(GROUP, group)
        except KafkaError as exc:
            last = exc
            admin.cluster.coordinators.invalidate(GROUP, group)
        await asyncio.sleep(0.5)
    raise AssertionError(f"could not remove the dead members of {group!r}: {last!r}")


@dataclass
class ChildRun:
    """One run of the service: how it ended and what it printed."""

    number: int
    started: float
    stdout: Path
    stderr: Path
    proc: subprocess.Popen[bytes]
    ended: float | None = None
    killed: bool = False
    kill_note: str = ""
    _files: list[IO[bytes]] = field(default_factory=list, repr=False)

    @property
    def returncode(self) -> int | None:
        return self.proc.poll()

    def output(self) -> str:
        return self.stdout.read_text(errors="replace")

    def errors_tail(self, lines: int = 30) -> str:
        return "\n".join(self.stderr.read_text(errors="replace").splitlines()[-lines:])

    def close_files(self) -> None:
        for f in self._files:
            f.close()
        self._files.clear()


def start_child(argv: list[str], log_dir: Path, number: int) -> ChildRun:
    """Start ``python argv...`` in the repository root, unbuffered (a SIGKILL must not
    lose what it printed), output into ``log_dir/run-<n>.{out,err}``."""
    out_path = log_dir / f"run-{number}.out"
    err_path = log_dir / f"run-{number}.err"
    out = out_path.open("wb")
    err = err_path.open("wb")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, *argv], cwd=ROOT, stdout=out, stderr=err, env=env,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    return ChildRun(number, time.monotonic(), out_path, err_path, proc, _files=[out, err])


def sigkill(run: ChildRun) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(run.proc.pid, signal.SIGKILL)
    run.proc.wait(timeout=30)
    run.killed = True
    run.ended = time.monotonic()
    run.close_files()


async def wait_exit(run: ChildRun, timeout_s: float) -> int | None:
    """The child's return code, or None if it was still running after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while run.proc.poll() is None:
        if time.monotonic() >= deadline:
            return None
        await asyncio.sleep(0.1)
    if run.ended is None:
        run.ended = time.monotonic()
    run.close_files()
    return run.proc.returncode


def offsets_sum(offsets: dict[Any, Any]) -> int:
    return sum(int(getattr(v, "offset", v)) for v in offsets.values())
