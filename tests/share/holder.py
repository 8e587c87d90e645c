"""A share group member that acquires one batch, writes its offsets and then holds it
without acknowledging, until it is killed: ``python -m tests.share.holder BOOTSTRAP
TOPIC GROUP OUT``. Writes ``"<partition> <offset>"`` per held record, then ``ready``."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from aiokproto.share import ShareConsumer


async def main(bootstrap: str, topic: str, group: str, out: str) -> None:
    async with ShareConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        acknowledgement_mode="explicit",
        max_poll_records=50,
    ) as sc:
        batch = {}
        while not batch:
            batch = await sc.getmany(timeout_ms=500)
        lines = [f"{tp.partition} {r.offset}\n" for tp, rs in batch.items() for r in rs]
        Path(out).write_text("".join(lines) + "ready\n", encoding="ascii")  # noqa: ASYNC240
        await asyncio.sleep(3600)  # held, never acknowledged: SIGKILL ends it


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
