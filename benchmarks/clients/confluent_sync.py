"""confluent-kafka's classic (synchronous, librdkafka) Producer and Consumer."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import confluent_kafka
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from benchmarks.clients.common import (
    Delivery,
    LatencyRecorder,
    MeterLike,
    Schedule,
    consume_sync,
    transactional_id,
    values_for,
)
from benchmarks.payloads import POOL_SIZE, WARMUP_SEQ, stamp
from benchmarks.scenarios import BATCH_SIZE, Job


def version() -> str:
    return f"{confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]})"


def producer_config(job: Job) -> dict[str, Any]:
    s = job.scenario
    return {
        "bootstrap.servers": job.bootstrap_servers,
        "acks": s.acks,
        "compression.type": s.compression,
        "linger.ms": s.linger_ms,
        "batch.size": BATCH_SIZE,
        "enable.idempotence": False,
        # room for a whole run in the local queue; back-pressure is still handled below
        "queue.buffering.max.messages": 1_000_000,
    }


def txn_producer_config(job: Job) -> dict[str, Any]:
    """``producer_config`` for a transactional run: transactions need idempotence."""
    return {**producer_config(job), "enable.idempotence": True,
            "transactional.id": transactional_id(job)}


def consumer_config(job: Job) -> dict[str, Any]:
    return {
        "bootstrap.servers": job.bootstrap_servers,
        # librdkafka needs a group id even for assign(); nothing is committed
        "group.id": job.group_id or f"bench-{job.topic}",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        # librdkafka stops prefetching for fetch.queue.backoff.ms (1 s by default) when
        # its queue is over queued.min.messages; the reader then empties the queue and
        # waits out the rest: one or two 0.5 s consume() timeouts in most 200k-record
        # runs, about 120,000 msgs/s instead of 1.1 million. Measured at its best.
        "fetch.queue.backoff.ms": 10,
    }


def assignment(job: Job) -> list[TopicPartition]:
    return [
        TopicPartition(job.topic, p, confluent_kafka.OFFSET_BEGINNING)
        for p in range(job.scenario.partitions)
    ]


class Remaining:
    """How many messages a consume() call asks for. librdkafka's
    ``consume(num_messages=n, timeout=t)`` returns once n messages are there or t is
    over: asking a full 10,000 when fewer are left sits out the whole 0.5 s timeout at
    the end of a run (the mid-run stalls were fetch.queue.backoff.ms, see
    ``consumer_config``)."""

    def __init__(self, total: int, cap: int = 10_000) -> None:
        self.left = total
        self.cap = cap

    def ask(self) -> int:
        return max(1, min(self.cap, self.left))

    def took(self, count: int) -> None:
        self.left -= count


def values_of(messages: list[Any], errors: list[str]) -> list[bytes | None]:
    out = []
    for m in messages:
        err = m.error()
        if err is None:
            out.append(m.value())
        elif err.code() != KafkaError._PARTITION_EOF:
            errors.append(str(err))
    return out


def reporter(delivery: Delivery) -> Callable[[Any, Any], None]:
    """librdkafka's ``on_delivery`` callback, counting into ``delivery``."""

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is None:
            delivery.ok()
        else:
            delivery.error(err)

    return on_delivery


def _produce_range(
    p: Producer, job: Job, pool: list[bytes], indices: range, delivery: Delivery
) -> None:
    """Hand records ``indices`` to librdkafka, waiting out a full local queue."""
    topic = job.topic
    produce_one = p.produce
    on_delivery = reporter(delivery)
    for i in indices:
        while True:
            try:
                produce_one(topic, pool[i % POOL_SIZE], on_delivery=on_delivery)
                break
            except BufferError:  # local queue full: serve delivery reports, then retry
                p.poll(0.05)
        if i % 1000 == 0:
            p.poll(0)


def produce(job: Job, meter: MeterLike) -> dict[str, Any]:
    p = Producer(producer_config(job))
    p.list_topics(job.topic, timeout=30)  # metadata before the clock starts
    pool = values_for(job)
    delivery = Delivery()
    meter.start()
    _produce_range(p, job, pool, range(job.scenario.records), delivery)
    left = p.flush(job.timeout_s * 0.8)
    meter.stop()
    return {**delivery.fields(), "unflushed": left}


def produce_txn(job: Job, meter: MeterLike) -> dict[str, Any]:
    """Transactions of ``txn_records``; ``commit_transaction`` flushes (and serves the
    delivery reports) before it commits. A failed commit raises: the run fails."""
    p = Producer(txn_producer_config(job))
    p.init_transactions(30)  # the producer id, before the clock starts
    p.list_topics(job.topic, timeout=30)
    pool = values_for(job)
    delivery = Delivery()
    n, size = job.scenario.records, job.scenario.txn_records
    committed = 0
    meter.start()
    for first in range(0, n, size):
        p.begin_transaction()
        _produce_range(p, job, pool, range(first, min(first + size, n)), delivery)
        p.commit_transaction(job.timeout_s * 0.8)
        committed += 1
    left = p.flush(job.timeout_s * 0.8)
    meter.stop()
    return {**delivery.fields(), "unflushed": left, "transactions": committed}


def consume(job: Job, meter: MeterLike) -> dict[str, Any]:
    c = Consumer(consumer_config(job))
    try:
        c.assign(assignment(job))
        errors: list[str] = []
        remaining = Remaining(job.scenario.records)

        def fetch() -> list[bytes | None]:
            if errors:
                raise RuntimeError(f"consumer error: {errors[0]}")
            msgs = c.consume(num_messages=remaining.ask(), timeout=0.5)
            remaining.took(len(msgs))
            return values_of(msgs, errors)

        return consume_sync(job, meter, fetch)
    finally:
        c.close()


def latency(job: Job, meter: MeterLike) -> dict[str, Any]:
    """Producer in this thread, consumer in another (its poll releases the GIL)."""
    n = job.scenario.records
    pool = values_for(job)
    rec = LatencyRecorder(n)
    delivery = Delivery()
    errors: list[str] = []
    stop = threading.Event()
    deadline = time.monotonic() + job.timeout_s * 0.8
    c = Consumer(consumer_config(job))
    c.assign(assignment(job))

    def consume_loop() -> None:
        # poll(), not consume(): consume() waits for a full batch or its timeout
        while not rec.done and not stop.is_set() and time.monotonic() < deadline:
            m = c.poll(0.1)
            if m is not None:
                rec.add(values_of([m], errors))

    on_delivery = reporter(delivery)
    p = Producer(producer_config(job))
    t = threading.Thread(target=consume_loop, name="bench-consumer")
    t.start()
    try:
        p.produce(job.topic, stamp(pool[0], WARMUP_SEQ, time.perf_counter_ns()))
        p.flush(30)
        while not rec.warmup_seen and time.monotonic() < deadline and t.is_alive():
            time.sleep(0.005)
        schedule = Schedule(job.scenario.rate)
        meter.start()
        schedule.begin()
        for i in range(n):
            wait = schedule.wait_s(i)
            if wait > 0:
                time.sleep(wait)
            p.produce(job.topic, stamp(pool[i % POOL_SIZE], i, schedule.due(i)),
                      on_delivery=on_delivery)
            p.poll(0)
        p.flush(30)
        t.join(max(1.0, deadline - time.monotonic()))
        meter.stop()
    finally:
        stop.set()
        t.join()
        c.close()
    return {**delivery.fields(), **rec.fields(), "consume_error": errors[0] if errors else None}
