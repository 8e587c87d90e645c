"""One consumer-group member as its own OS process, for the group-churn test.

    python -m tests.faults.chaos.member --bootstrap HOST:PORT --topic T --group G \
        --assignor range --out processed.txt [--instance-id ID] [--log member.log]

``--assignor consumer`` joins with group_protocol="consumer" (KIP-848) instead.
``--parallel ORDERING`` handles records with a ``ParallelConsumer`` (up to 50 at once,
random latencies, its own safe commits) instead of the getmany loop.

It processes records (a short sleep), appends ``"<partition> <offset>"`` per record to
``--out`` (flushed), and only then commits the next offsets: a SIGKILL at any point can
cause reprocessing, never a skip. SIGTERM stops it gracefully (LeaveGroup unless
static). At exit it writes ``<out>.status`` (JSON counts) and exits 0; 4 when the
poll loop was stuck in a client call or ``Consumer.stop()`` did not return in time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import random
import signal
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from aiokproto import Consumer, ConsumerRebalanceListener, ParallelConsumer, TopicPartition
from aiokproto.consumer import CommitFailedError
from aiokproto.errors import KafkaError, UnreleasedInstanceIdError

log = logging.getLogger("chaos.member")

LOOP_EXIT_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 20.0
EXIT_STOP_HUNG = 4


def _names(partitions: frozenset[TopicPartition]) -> str:
    return ",".join(str(tp.partition) for tp in sorted(partitions)) or "-"


class Recorder(ConsumerRebalanceListener):
    """Logs every rebalance callback: the timeline the test reads when offsets are wrong."""

    def __init__(self) -> None:
        self.owned: set[TopicPartition] = set()
        self.rebalances = 0

    async def on_partitions_revoked(self, revoked: frozenset[TopicPartition]) -> None:
        self.owned -= revoked
        log.info("revoked %s", _names(revoked))

    async def on_partitions_assigned(self, assigned: frozenset[TopicPartition]) -> None:
        self.owned |= assigned
        self.rebalances += 1
        log.info("assigned %s, now own %s", _names(assigned), _names(frozenset(self.owned)))

    async def on_partitions_lost(self, lost: frozenset[TopicPartition]) -> None:
        self.owned -= lost
        log.info("lost %s", _names(lost))


async def run(args: argparse.Namespace, out: TextIO) -> dict[str, Any]:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    counts: dict[str, Any] = {
        "processed": 0, "commits": 0, "commit_failed": 0, "errors": {},
        "loop_stuck": False, "stop_hung": False,
    }  # fmt: skip
    options: dict[str, Any] = {
        "bootstrap_servers": args.bootstrap,
        "group_id": args.group,
        "enable_auto_commit": False,
        # The group's offsets were committed (0) before any member started: a member
        # that cannot find them jumps to the end and the audit counts the skipped ones.
        "auto_offset_reset": "latest",
        # Longer than any rebalance the churn causes: a commit() that waits for one
        # must not cost the member its membership (that defect has its own test).
        "max_poll_interval_ms": 120_000,
        "max_poll_records": 200,
    }
    if args.assignor == "consumer":
        # KIP-848: the broker assigns; session and heartbeat are group configs
        options["group_protocol"] = "consumer"
    else:
        options["partition_assignment_strategy"] = (args.assignor,)
        options["session_timeout_ms"] = args.session_timeout_ms
        options["heartbeat_interval_ms"] = max(500, args.session_timeout_ms // 5)
    if args.instance_id:
        options["group_instance_id"] = args.instance_id
    recorder = Recorder()
    consumer = Consumer(**options)
    await consumer.start()
    consumer.subscribe([args.topic], listener=recorder)
    log.info("started: %s", {k: v for k, v in options.items() if k != "bootstrap_servers"})
    if args.parallel:
        consume = _consume_parallel(
            consumer, out, args.process_ms / 1000, counts, stop, args.parallel
        )
    else:
        consume = _consume(
            consumer, out, args.process_ms / 1000, counts, stop, args.topic, recorder
        )
    work = asyncio.create_task(consume)
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait([work, stopping], return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    try:
        # the loop ends at its next turn; a call that does not return is a finding
        await asyncio.wait_for(asyncio.shield(work), LOOP_EXIT_TIMEOUT_S)
    except TimeoutError:
        counts["loop_stuck"] = True
        log.error(
            "the poll loop was still inside a client call %.0f s after SIGTERM; cancelling it",
            LOOP_EXIT_TIMEOUT_S,
        )
        work.cancel()
        await asyncio.gather(work, return_exceptions=True)
    log.info("stopping after %s", counts)
    began = time.monotonic()
    try:
        await asyncio.wait_for(consumer.stop(), STOP_TIMEOUT_S)
    except TimeoutError:
        counts["stop_hung"] = True
        log.error("Consumer.stop() did not return within %.0f s", STOP_TIMEOUT_S)
    log.info("stopped in %.1f s", time.monotonic() - began)
    counts["rebalances"] = recorder.rebalances
    return counts


async def _consume(
    consumer: Consumer,
    out: TextIO,
    pause: float,
    counts: dict[str, Any],
    stop: asyncio.Event,
    topic: str,
    listener: ConsumerRebalanceListener,
) -> None:
    """Poll, "process" (sleep), record, then commit; until ``stop`` is set."""
    while not stop.is_set():
        try:
            got = await consumer.getmany(timeout_ms=500)
        except UnreleasedInstanceIdError:
            # KIP-848: the SIGKILLed process this one replaces still holds the static
            # instance id until its session expires; the way back is to subscribe again
            counts["instance_id_waits"] = counts.get("instance_id_waits", 0) + 1
            log.info("the instance id is still held; subscribing again in 1 s")
            await asyncio.sleep(1.0)
            consumer.subscribe(consumer.subscription() or [topic], listener=listener)
            continue
        except KafkaError as exc:
            _count(counts, "getmany", exc)
            log.warning("getmany raised %r", exc, exc_info=True)
            await asyncio.sleep(0.5)
            continue
        if not got:
            continue
        await asyncio.sleep(pause)  # the "processing"
        out.write("".join(f"{tp.partition} {r.offset}\n" for tp, rs in got.items() for r in rs))
        out.flush()  # processed is on record before the commit says so
        counts["processed"] += sum(len(rs) for rs in got.values())
        offsets = {tp: rs[-1].offset + 1 for tp, rs in got.items()}
        try:
            await consumer.commit(offsets)
            counts["commits"] += 1
        except CommitFailedError as exc:
            counts["commit_failed"] += 1
            log.info("commit of %s failed: %s", offsets, exc)
        except KafkaError as exc:
            _count(counts, "commit", exc)
            log.warning("commit of %s raised %r", offsets, exc, exc_info=True)


async def _consume_parallel(
    consumer: Consumer,
    out: TextIO,
    pause: float,
    counts: dict[str, Any],
    stop: asyncio.Event,
    ordering: Any,
) -> None:
    """A ParallelConsumer: each record "processed" (a random sleep up to 2 x
    ``pause``), then recorded; its commits are its own (safe offsets only)."""
    rnd = random.Random()

    async def handle(record: Any) -> None:
        await asyncio.sleep(rnd.random() * 2 * pause)
        out.write(f"{record.partition} {record.offset}\n")
        out.flush()  # processed is on record before any commit covers it
        counts["processed"] += 1

    async with ParallelConsumer(
        consumer, ordering=ordering, max_concurrency=50, commit_interval_ms=200
    ) as pc:
        runner = asyncio.create_task(pc.run(handle))
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait([runner, stopping], return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        await pc.stop()
        try:
            await runner
        except KafkaError as exc:
            _count(counts, "parallel", exc)
            log.warning("ParallelConsumer.run raised %r", exc, exc_info=True)


def _count(counts: dict[str, Any], where: str, exc: BaseException) -> None:
    errors: dict[str, int] = counts["errors"]
    key = f"{where}:{type(exc).__name__}"
    errors[key] = errors.get(key, 0) + 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--assignor", required=True)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--instance-id", default=None)
    parser.add_argument("--log", type=Path, default=None)
    parser.add_argument("--session-timeout-ms", type=int, default=10_000)
    parser.add_argument("--process-ms", type=int, default=20)
    parser.add_argument("--parallel", choices=("key", "partition", "unordered"), default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(
        filename=args.log,
        level=logging.INFO,
        format="%(asctime)s.%(msecs)03d %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    for name in ("aiokproto.consumer", "aiokproto.cluster"):
        logging.getLogger(name).setLevel(logging.DEBUG)
    try:
        # Blocking writes on purpose: a record is on file before its offset is committed.
        with open(args.out, "a", encoding="ascii") as out:
            counts = asyncio.run(run(args, out))
    except BaseException:
        log.exception("member failed")
        raise
    Path(f"{args.out}.status").write_text(json.dumps(counts), encoding="utf-8")
    return EXIT_STOP_HUNG if counts["stop_hung"] or counts["loop_stuck"] else 0


if __name__ == "__main__":
    sys.exit(main())
