"""Sequenced load through aiokproto's ``Producer``: every record carries its
(partition, sequence) and its fate lands in a ``Ledger``."""

from __future__ import annotations

import asyncio
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from aiokproto.errors import KafkaError
from aiokproto.producer import DeliveryFuture, Producer
from tests.faults.chaos.ledger import Audit, Failure, Ledger, encode


@dataclass(frozen=True)
class BatchNote:
    """A batch as the producer finished it (evidence when order or offsets are wrong)."""

    first_seq: int  # our sequence of its first record
    base_offset: int  # -1: failed
    producer_sequence: int
    attempts: int
    error: str


@dataclass
class SequencedLoad:
    producer: Producer
    topic: str
    partitions: int
    padding: bytes = b""
    ledger: Ledger = field(init=False)
    send_error: BaseException | None = None  # a send() that raised (stops the load)
    batches: list[list[BatchNote]] = field(init=False)
    _send_times: list[array[float]] = field(init=False)
    _failed_batches: dict[int, object] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.ledger = Ledger(self.partitions)
        self.batches = [[] for _ in range(self.partitions)]
        self._send_times = [array("d") for _ in range(self.partitions)]

    async def send_round(self, per_partition: int) -> None:
        """``per_partition`` records to every partition, interleaved."""
        send = self.producer.send
        offsets = self.ledger.offsets
        for _ in range(per_partition):
            for p in range(self.partitions):
                seq = len(offsets[p])
                handle = await send(self.topic, encode(p, seq, self.padding), partition=p)
                offsets[p].append(-1)
                self._send_times[p].append(time.monotonic())
                handle.add_done_callback(partial(self._settled, p, seq))

    def _settled(self, p: int, seq: int, handle: DeliveryFuture) -> None:
        self.ledger.settled += 1
        error = handle.exception()
        if error is None:
            self.ledger.offsets[p][seq] = handle.result().offset
        else:
            now = time.monotonic()
            after = now - self._send_times[p][seq]
            # the batch (a private field, read for the audit) is kept alive, so its id
            # names it for the whole run: the records of one batch fail together but
            # their callbacks may be spread over a busy loop
            batch = getattr(handle, "_batch", None)
            self._failed_batches[id(batch)] = batch
            self.ledger.failures.append(
                Failure(
                    p, seq, type(error).__name__, str(error)[:300], after, now,
                    -1 if batch is None else id(batch),
                )
            )
        self._note_batch(p, seq, handle, error)

    def _note_batch(
        self, p: int, seq: int, handle: DeliveryFuture, error: BaseException | None
    ) -> None:
        # Private fields, read only for evidence: the first record of each batch.
        batch = getattr(handle, "_batch", None)
        if batch is None or getattr(handle, "_delta", None) != 0:
            return
        base = -1 if error is not None else self.ledger.offsets[p][seq]
        self.batches[p].append(
            BatchNote(
                seq, base, getattr(batch, "sequence", -1), getattr(batch, "attempts", -1),
                "" if error is None else type(error).__name__,
            )
        )

    async def run(
        self,
        keep_going: Callable[[], bool],
        rate: Callable[[], float | None],
        per_partition: int = 50,
    ) -> None:
        """Send rounds while ``keep_going()``; ``rate()`` records/s (None: flat out).

        A ``send()`` that raises (the buffer stayed full for ``max_block_ms``, the
        producer failed) is kept in ``send_error`` and ends the load.
        """
        round_size = per_partition * self.partitions
        while keep_going():
            began = time.monotonic()
            try:
                await self.send_round(per_partition)
            except KafkaError as exc:
                self.send_error = exc
                return
            wanted = rate()
            pause = 0.0 if wanted is None else round_size / wanted - (time.monotonic() - began)
            await asyncio.sleep(max(0.0, pause))

    def send_time(self, partition: int, seq: int) -> float:
        return self._send_times[partition][seq]

    def failure_window(self) -> tuple[float, float] | None:
        """Send times (monotonic) of the first and last failed record."""
        if not self.ledger.failures:
            return None
        times = [self.send_time(f.partition, f.sequence) for f in self.ledger.failures]
        return min(times), max(times)



def batches_around(notes: list[BatchNote], seq: int, span: int = 3) -> list[BatchNote]:
    """The batches just before and after the one holding ``seq``."""
    ordered = sorted(notes, key=lambda b: b.first_seq)
    index = next((i for i, b in enumerate(ordered) if b.first_seq > seq), len(ordered))
    return ordered[max(0, index - span) : index + span]


def batch_evidence(batches: list[list[BatchNote]], result: Audit) -> str:
    """For each partition with a wrong sequence: the producer's batches around the
    first one (their producer sequence and attempts tell a retry from a reorder)."""
    lines = []
    for p in result.partitions:
        wrong = [e for k in ("reordered", "lost", "duplicated") for e in p.examples.get(k, [])]
        if wrong:
            seq = int(wrong[0].split()[1])  # examples read "seq N ..."
            near = "; ".join(str(b) for b in batches_around(batches[p.partition], seq))
            lines.append(f"  batches of partition {p.partition} near seq {seq}: {near}")
    return "\n".join(lines)
