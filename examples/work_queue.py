"""A work queue on a share group: a pool of workers takes jobs from one topic, each job
acquired by one worker at a time and acknowledged on its own.

    .venv/bin/python examples/work_queue.py

The demo starts a local single-node Kafka (unless KAFKA_BOOTSTRAP_SERVERS names a
cluster), produces a batch of jobs to a new ``jobs-...`` topic, and runs four workers in one share
group until every job is settled. A job is:

- ``ok``: processed, then acknowledged with "accept";
- ``busy``: cannot be handled right now, so "release": it comes back (to any worker)
  with its delivery count raised, and is processed on a later delivery;
- ``poison``: can never be processed, so "reject": it is never delivered again.

At the end the demo checks that every ok and busy job was accepted exactly once, that
every busy job came back with delivery count 2, and that no poison job was delivered
twice. Workers are plain tasks; with more processes, run more of them with the same
group id: the broker shares the partitions' records among all of them.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections import Counter

from aiokproto.admin import Admin, AlterConfigOp, ConfigResource, ConfigResourceType, NewTopic
from aiokproto.producer import Producer
from aiokproto.share import ShareConsumer, ShareRecord
from aiokproto.testing import PLAINTEXT_ONLY, LocalKafka

TOPIC = "jobs"
JOBS = 600
WORKERS = 4


def kind_of(job: int) -> str:
    return "poison" if job % 50 == 7 else "busy" if job % 10 == 3 else "ok"


class Ledger:
    def __init__(self) -> None:
        self.accepted: Counter[int] = Counter()
        self.rejected: Counter[int] = Counter()
        self.released: Counter[int] = Counter()
        self.by_worker: Counter[str] = Counter()

    def settled(self) -> int:
        return len(self.accepted) + len(self.rejected)


async def worker(
    name: str, bootstrap: str, topic: str, group: str, ledger: Ledger, done: asyncio.Event
) -> None:
    async with ShareConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        acknowledgement_mode="explicit",
        max_poll_records=25,
    ) as jobs:
        while not done.is_set():
            batch = await jobs.getmany(timeout_ms=200)
            for records in batch.values():
                for record in records:
                    handle(name, jobs, record, ledger)
            if batch:
                await jobs.commit()  # the acknowledgements, now rather than at the next poll
            if ledger.settled() >= JOBS:
                done.set()


def handle(name: str, jobs: ShareConsumer, record: ShareRecord, ledger: Ledger) -> None:
    assert record.value is not None  # every job the producer sent has its number
    job = int(record.value)
    kind = kind_of(job)
    if kind == "poison":
        jobs.acknowledge(record, "reject")
        ledger.rejected[job] += 1
    elif kind == "busy" and record.delivery_count == 1:
        jobs.acknowledge(record, "release")  # try again later, maybe on another worker
        ledger.released[job] += 1
    else:
        jobs.acknowledge(record, "accept")
        ledger.accepted[job] += 1
        ledger.by_worker[name] += 1


async def demo(bootstrap: str) -> None:
    run = uuid.uuid4().hex[:8]
    topic, group = f"{TOPIC}-{run}", f"workers-{run}"
    async with Admin(bootstrap_servers=bootstrap) as admin:
        await admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])
        # a new share group starts at the latest offset; this one reads what is there
        resource = ConfigResource(ConfigResourceType.GROUP, group)
        await admin.incremental_alter_configs(
            {resource: [AlterConfigOp("share.auto.offset.reset", "earliest")]}
        )
    async with Producer(bootstrap_servers=bootstrap) as producer:
        await producer.send_batch(topic, [b"%d" % job for job in range(JOBS)])
        await producer.flush()
    ledger = Ledger()
    done = asyncio.Event()
    async with asyncio.timeout(120):
        await asyncio.gather(
            *(worker(f"w{i}", bootstrap, topic, group, ledger, done) for i in range(WORKERS))
        )
    busy = {j for j in range(JOBS) if kind_of(j) == "busy"}
    poison = {j for j in range(JOBS) if kind_of(j) == "poison"}
    assert set(ledger.accepted) == set(range(JOBS)) - poison, "a job was never accepted"
    assert all(n == 1 for n in ledger.accepted.values()), "a job was accepted twice"
    assert set(ledger.released) == busy and all(n == 1 for n in ledger.released.values())
    assert set(ledger.rejected) == poison and all(n == 1 for n in ledger.rejected.values())
    print(
        f"{len(ledger.accepted)} jobs accepted, {len(busy)} released once and then done, "
        f"{len(poison)} poison jobs rejected; per worker: {dict(sorted(ledger.by_worker.items()))}"
    )


def main() -> None:
    external = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if external:
        asyncio.run(demo(external))
        return
    with LocalKafka(security=PLAINTEXT_ONLY) as kafka:
        asyncio.run(demo(kafka.bootstrap_servers))


if __name__ == "__main__":
    main()
