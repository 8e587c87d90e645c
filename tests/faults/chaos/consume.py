"""A group consumer loop (aiokproto ``Consumer``) that records every offset it is
handed and everything the API raised, for the outage test and the soak."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field

from aiokproto import Consumer, TopicPartition
from aiokproto.consumer import CommitFailedError
from aiokproto.errors import KafkaError, KafkaTimeoutError


@dataclass
class TrackingConsumer:
    """Runs ``getmany`` + commit-after-processing until ``stop()``; nothing it sees is
    judged here, only recorded."""

    consumer: Consumer
    seen: dict[int, Counter[int]] = field(default_factory=dict)
    # (seconds since start, "getmany"/"commit", error repr): what the application saw
    raised: list[tuple[float, str, str]] = field(default_factory=list)
    commits: int = 0
    commit_timeouts: int = 0
    commit_failed: int = 0
    records: int = 0
    last_record_at: float = 0.0
    _stopping: bool = False
    _began: float = field(default_factory=time.monotonic)

    def next_offsets(self) -> dict[int, int]:
        """Per partition: one past the highest offset handed out so far."""
        return {p: max(c) + 1 for p, c in self.seen.items() if c}

    def stop(self) -> None:
        self._stopping = True

    async def run(self, commit_every: int = 1) -> None:
        consumer = self.consumer
        batches = 0
        pending: dict[TopicPartition, int] = {}
        while not self._stopping:
            try:
                got = await consumer.getmany(timeout_ms=300)
            except KafkaError as exc:
                self._note("getmany", exc)
                await asyncio.sleep(0.5)  # a retry loop, as an application would have
                continue
            if not got:
                continue
            for tp, recs in got.items():
                counts = self.seen.setdefault(tp.partition, Counter())
                for r in recs:
                    counts[r.offset] += 1
                self.records += len(recs)
                pending[tp] = recs[-1].offset + 1
            self.last_record_at = time.monotonic()
            batches += 1
            if batches % commit_every:
                continue
            try:
                await consumer.commit(pending)
                self.commits += 1
            except CommitFailedError:
                self.commit_failed += 1  # partitions moved: they will be read again
            except KafkaTimeoutError:
                self.commit_timeouts += 1  # a typed timeout (brokers down): allowed
            except KafkaError as exc:
                self._note("commit", exc)
            pending = {}

    def _note(self, where: str, exc: BaseException) -> None:
        self.raised.append((round(time.monotonic() - self._began, 2), where, repr(exc)[:300]))
