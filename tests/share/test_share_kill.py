"""A share consumer SIGKILLed while it holds acquired records: nobody acknowledges them,
so the broker gives them back when their acquisition lock expires and another member
gets them (delivery count 2); none is lost."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

from aiokproto.share import ShareConsumer
from aiokproto.testing import processes
from tests.share.test_share_consumer_broker import setup

REPO = Path(__file__).resolve().parents[2]
LOCK_MS = 2_000


async def test_records_held_by_a_killed_member_come_back_after_the_lock(
    kafka: Any, topic_name: str, tmp_path: Path
) -> None:
    group = await setup(kafka, topic_name, 1, 200, lock_ms=LOCK_MS)
    out = tmp_path / "held.txt"
    argv = [sys.executable, "-m", "tests.share.holder", kafka.bootstrap_servers, topic_name,
            group, str(out)]  # fmt: skip
    proc = processes.spawn(argv, REPO, tmp_path / "holder.stderr")
    try:
        async with asyncio.timeout(60):
            while not (out.exists() and out.read_text().endswith("ready\n")):
                assert proc.poll() is None, (tmp_path / "holder.stderr").read_text()[-2000:]
                await asyncio.sleep(0.1)
        held = {int(line.split()[1]) for line in out.read_text().splitlines()[:-1]}
        assert held
    finally:
        processes.kill(proc)
    killed = time.monotonic()
    seen: dict[int, int] = {}
    came_back_after: float | None = None
    async with asyncio.timeout(60):
        async with ShareConsumer(
            topic_name, bootstrap_servers=kafka.bootstrap_servers, group_id=group
        ) as sc:
            while len(seen) < 200:
                for records in (await sc.getmany(timeout_ms=500)).values():
                    for r in records:
                        assert r.offset not in seen, f"{r.offset} delivered twice to one member"
                        seen[r.offset] = r.delivery_count
                        if r.offset in held and came_back_after is None:
                            came_back_after = time.monotonic() - killed
    assert sorted(seen) == list(range(200))
    # back with delivery count 2: what it handed out, and what it had acquired but not
    # handed out yet (a fetch acquires whole batches, beyond max_poll_records)
    again = {o for o, n in seen.items() if n == 2}
    assert held <= again
    assert set(seen.values()) <= {1, 2}
    print(f"{len(held)} held records came back after {came_back_after:.1f} s (lock {LOCK_MS} ms)")
