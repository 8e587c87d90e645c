"""The clients of a partition run, as a child process inside the client namespace
(``ip netns exec <client> python -m tests.faults.partitions.workload``).

Three workloads at once, every outcome written down with the time it was seen:

- an idempotent producer (acks=all) writing ``v<n>`` to partition ``n % 3`` of ``input``;
- a consume-transform-produce service (group ``svc``, read_committed, a transactional
  producer): each input ``v`` becomes ``v@<transaction number>`` on the same partition of
  ``output``, with the input offsets sent to the transaction;
- two group consumers (group ``readers``, read_committed) reading ``output``.

The test talks to it through files in ``--dir``: this process writes ``ready`` once a
record was acknowledged, a transaction committed and a record read, ``leaders.json``
(partition leaders) every second, and at the end ``history.json`` (checker.History's
JSON); the test writes ``stop`` when every fault has healed. Then the producer stops,
the service and the readers drain to the end of their input, a read_committed consumer
reads both topics whole, and this process exits. Every wait is bounded; past
``--max-seconds`` it exits with status 3.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from aiokproto import Admin, NewTopic, Producer
from aiokproto.consumer import Consumer, ConsumerRebalanceListener
from aiokproto.errors import KafkaError
from aiokproto.structs import TopicPartition
from tests.faults.chaos.eos import read_committed

PARTITIONS = 3
INPUT, OUTPUT = "input", "output"
DRAIN_S = 90.0
CALL_S = 30.0  # any single client call


def _write(path: Path, data: Any) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


class Run:
    def __init__(self, bootstrap: str, directory: Path, rate: float) -> None:
        self.bootstrap = bootstrap
        self.dir = directory
        self.rate = rate
        self.sends: list[dict[str, Any]] = []
        self.txns: list[dict[str, Any]] = []
        self.reads: list[dict[str, Any]] = []
        self.errors: list[str] = []  # client errors seen (expected under faults)
        self.txn_number = 0
        self.acked = self.committed = 0
        self.progress = asyncio.Event()  # set at each ack, commit and read
        self.served = False
        self.draining = False

    def note(self, where: str, exc: BaseException) -> None:
        self.errors.append(f"{time.monotonic():.1f} {where}: {type(exc).__name__}: {exc}")

    @property
    def stopped(self) -> bool:
        return (self.dir / "stop").exists()

    # -- the idempotent producer -------------------------------------------------------

    async def produce(self) -> None:
        async with Producer(
            bootstrap_servers=self.bootstrap,
            acks="all",
            enable_idempotence=True,
            linger_ms=5,
            max_block_ms=20_000,
            request_timeout_ms=10_000,
        ) as producer:
            pending: list[tuple[dict[str, Any], Any]] = []
            n = 0
            while not self.stopped:
                partition, value = n % PARTITIONS, f"v{n}"
                entry: dict[str, Any] = {"partition": partition, "value": value, "offset": None}
                self.sends.append(entry)
                try:
                    handle = await producer.send(INPUT, value.encode(), partition=partition)
                    pending.append((entry, handle))
                except KafkaError as exc:
                    self.note("send", exc)
                n += 1
                if len(pending) >= 50:
                    await self._settle(pending)
                await asyncio.sleep(1 / self.rate)
            await self._settle(pending)

    async def _settle(self, pending: list[tuple[dict[str, Any], Any]]) -> None:
        for entry, handle in pending:
            try:
                meta = await asyncio.wait_for(handle, 150.0)  # past delivery.timeout.ms
                entry["offset"] = meta.offset
                self.acked += 1
                self.progress.set()
            except (KafkaError, TimeoutError) as exc:
                self.note(f"delivery of {entry['value']}", exc)
        pending.clear()

    # -- consume-transform-produce -----------------------------------------------------

    async def serve(self) -> None:
        while not (self.draining and await self._service_done()):
            try:
                await self._serve_once()
            except (KafkaError, TimeoutError) as exc:
                self.note("service (starting over with new clients)", exc)
                await asyncio.sleep(1.0)
        self.served = True  # the output is complete: the readers may finish

    async def _serve_once(self) -> None:
        """One consumer and transactional producer until the drain ends (returns) or a
        transaction fails (raises: new clients start from the committed offsets)."""
        async with (
            Consumer(
                INPUT,
                bootstrap_servers=self.bootstrap,
                group_id="svc",
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                isolation_level="read_committed",
                session_timeout_ms=10_000,
            ) as consumer,
            Producer(
                bootstrap_servers=self.bootstrap,
                transactional_id="svc-tx",
                transaction_timeout_ms=30_000,
                max_block_ms=20_000,
                request_timeout_ms=10_000,
            ) as producer,
        ):
            while True:
                if self.draining and await self._service_done():
                    return
                batch = await asyncio.wait_for(
                    consumer.getmany(timeout_ms=300, max_records=100), CALL_S
                )
                if not batch:
                    continue
                self.txn_number += 1  # never reused: an output value names its attempt
                number = self.txn_number
                txn: dict[str, Any] = {
                    "number": number,
                    "inputs": [
                        [tp.partition, r.offset, r.value.decode()]
                        for tp, recs in batch.items()
                        for r in recs
                        if r.value is not None
                    ],
                    "outputs": [],
                    "commit_called": None,
                    "outcome": "unknown",
                }
                self.txns.append(txn)
                try:
                    await producer.begin_transaction()
                    for partition, _, value in txn["inputs"]:
                        out = f"{value}@{number}"
                        txn["outputs"].append([partition, out])
                        await producer.send(OUTPUT, out.encode(), partition=partition)
                    await asyncio.wait_for(
                        producer.send_offsets_to_transaction(
                            {tp: recs[-1].offset + 1 for tp, recs in batch.items()},
                            consumer.group_metadata(),
                        ),
                        CALL_S,
                    )
                except (KafkaError, TimeoutError) as exc:
                    self.note(f"transaction {number}", exc)
                    await asyncio.wait_for(producer.abort_transaction(), CALL_S)
                    txn["outcome"] = "aborted"
                    # Start over from the group's committed offsets (new clients).
                    raise KafkaError(f"transaction {number} aborted") from exc
                txn["commit_called"] = time.monotonic()
                # Any failure from here leaves the outcome unknown: the log decides.
                await asyncio.wait_for(producer.commit_transaction(), CALL_S)
                txn["outcome"] = "committed"
                self.committed += 1
                self.progress.set()

    async def _service_done(self) -> bool:
        """Did the service commit offsets up to the end of the input?"""
        return await self._group_at_end("svc", INPUT)

    async def _group_at_end(self, group: str, topic: str) -> bool:
        try:
            async with Admin(bootstrap_servers=self.bootstrap) as admin:
                tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
                committed = await asyncio.wait_for(
                    admin.list_consumer_group_offsets(group, tps), CALL_S
                )
                ends = await self._ends(tps)
        except (KafkaError, TimeoutError):
            return False
        return all(committed.get(tp) is not None and committed[tp].offset >= ends[tp] for tp in tps)

    async def _ends(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        async with Consumer(
            bootstrap_servers=self.bootstrap, isolation_level="read_committed"
        ) as c:
            return await asyncio.wait_for(c.end_offsets(tps), CALL_S)

    # -- group consumers of the output -------------------------------------------------

    async def read(self, member: str) -> None:
        session = 0

        class Sessions(ConsumerRebalanceListener):
            async def on_partitions_assigned(self, assigned: frozenset[TopicPartition]) -> None:
                nonlocal session
                session += 1

            async def on_partitions_revoked(self, revoked: frozenset[TopicPartition]) -> None:
                nonlocal session
                session += 1

        while True:
            try:
                async with Consumer(
                    bootstrap_servers=self.bootstrap,
                    group_id="readers",
                    enable_auto_commit=False,
                    auto_offset_reset="earliest",
                    isolation_level="read_committed",
                    session_timeout_ms=10_000,
                ) as consumer:
                    consumer.subscribe([OUTPUT], listener=Sessions())
                    while not (self.served and await self._group_at_end("readers", OUTPUT)):
                        batch = await asyncio.wait_for(consumer.getmany(timeout_ms=300), CALL_S)
                        now = time.monotonic()
                        if batch:
                            self.progress.set()
                        for tp, recs in batch.items():
                            for r in recs:
                                self.reads.append(
                                    {
                                        "member": member,
                                        "session": session,
                                        "partition": tp.partition,
                                        "offset": r.offset,
                                        "value": (r.value or b"").decode(),
                                        "at": now,
                                    }
                                )
                        # while draining, also with nothing new: the position moves
                        # past the last transaction's marker without a record
                        if batch or self.served:
                            await asyncio.wait_for(consumer.commit(), CALL_S)
                    return
            except (KafkaError, TimeoutError) as exc:
                self.note(f"reader {member} (rejoining)", exc)
                session += 1
                await asyncio.sleep(1.0)

    # -- leaders, for the test to choose whom to cut -----------------------------------

    async def report_leaders(self, admin: Admin) -> None:
        while True:
            with contextlib.suppress(KafkaError, TimeoutError):
                found = await asyncio.wait_for(admin.describe_topics([INPUT, OUTPUT]), 10.0)
                _write(
                    self.dir / "leaders.json",
                    {
                        str(name): {p.partition: p.leader for p in d.partitions}
                        for name, d in found.items()
                    },
                )
            await asyncio.sleep(1.0)

    # -- the run -----------------------------------------------------------------------

    async def main(self) -> None:
        async with Admin(bootstrap_servers=self.bootstrap) as admin:
            await admin.create_topics(
                [
                    NewTopic(t, PARTITIONS, 3, topic_configs={"min.insync.replicas": "2"})
                    for t in (INPUT, OUTPUT)
                ]
            )
            leaders = asyncio.create_task(self.report_leaders(admin))
            producer = asyncio.create_task(self.produce())
            service = asyncio.create_task(self.serve())
            readers = [asyncio.create_task(self.read(f"r{i}")) for i in (1, 2)]
            # Faults start once all three workloads flow: a record acknowledged, a
            # transaction committed and a record read.
            while not (self.acked and self.committed and self.reads):
                self.progress.clear()
                await self.progress.wait()
            (self.dir / "ready").touch()
            await producer
            self.draining = True
            await asyncio.wait_for(asyncio.gather(service, *readers), DRAIN_S)
            leaders.cancel()
            tps = [TopicPartition(INPUT, p) for p in range(PARTITIONS)]
            svc = await admin.list_consumer_group_offsets("svc", tps)
            out_tps = [TopicPartition(OUTPUT, p) for p in range(PARTITIONS)]
            rdr = await admin.list_consumer_group_offsets("readers", out_tps)
        logs = {}
        for topic in (INPUT, OUTPUT):
            got = await read_committed(self.bootstrap, topic, PARTITIONS, 60.0)
            logs[topic] = {p: [[o, v.decode()] for o, _, v in rows] for p, rows in got.items()}
        _write(
            self.dir / "history.json",
            {
                "sends": self.sends,
                "txns": self.txns,
                "reads": self.reads,
                "input_log": logs[INPUT],
                "output_log": logs[OUTPUT],
                "service_committed": {tp.partition: m.offset for tp, m in svc.items() if m},
                "readers_committed": {tp.partition: m.offset for tp, m in rdr.items() if m},
                "errors": self.errors,
            },
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--rate", type=float, default=150.0, help="input records/s")
    parser.add_argument("--max-seconds", type=float, required=True)
    args = parser.parse_args(argv)
    run = Run(args.bootstrap, args.dir, args.rate)
    try:
        asyncio.run(asyncio.wait_for(run.main(), args.max_seconds))
    except TimeoutError:
        print(f"workload still running after {args.max_seconds:.0f}s", file=sys.stderr)
        print("\n".join(run.errors[-20:]), file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
