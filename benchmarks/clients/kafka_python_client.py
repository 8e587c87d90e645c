"""kafka-python (synchronous API, pure Python, background sender thread)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import Any

import kafka  # type: ignore[import-untyped]
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from benchmarks.clients.common import (
    Delivery,
    LatencyRecorder,
    MeterLike,
    Schedule,
    consume_sync,
    values_for,
)
from benchmarks.payloads import POOL_SIZE, WARMUP_SEQ, stamp
from benchmarks.scenarios import BATCH_SIZE, Job


def version() -> str:
    return str(kafka.__version__)


def _producer(job: Job) -> KafkaProducer:
    s = job.scenario
    return KafkaProducer(
        bootstrap_servers=job.bootstrap_servers,
        acks="all" if s.acks == "all" else 1,
        compression_type=None if s.compression == "none" else s.compression,
        linger_ms=s.linger_ms,
        batch_size=BATCH_SIZE,
        enable_idempotence=False,
    )


def _consumer(job: Job) -> KafkaConsumer:
    c = KafkaConsumer(
        bootstrap_servers=job.bootstrap_servers,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    c.assign([TopicPartition(job.topic, p) for p in range(job.scenario.partitions)])
    return c


def _poll_values(c: KafkaConsumer, timeout_ms: int, max_records: int) -> Iterable[bytes | None]:
    batch = c.poll(timeout_ms=timeout_ms, max_records=max_records)
    return [r.value for records in batch.values() for r in records]


def produce(job: Job, meter: MeterLike) -> dict[str, Any]:
    p = _producer(job)
    try:
        p.partitions_for(job.topic)  # metadata before the clock starts
        pool = values_for(job)
        delivery = Delivery()
        ok = delivery.ok

        def on_ok(_meta: Any) -> None:
            ok()

        send = p.send
        topic = job.topic
        meter.start()
        for i in range(job.scenario.records):
            send(topic, pool[i % POOL_SIZE]).add_callback(on_ok).add_errback(delivery.error)
        p.flush(timeout=job.timeout_s * 0.8)
        meter.stop()
        return delivery.fields()
    finally:
        p.close(timeout=10)


def consume(job: Job, meter: MeterLike) -> dict[str, Any]:
    c = _consumer(job)
    try:
        return consume_sync(job, meter, lambda: _poll_values(c, 500, 10_000))
    finally:
        c.close()


def latency(job: Job, meter: MeterLike) -> dict[str, Any]:
    """Producer in this thread (its sender is a thread of its own), consumer in another."""
    n = job.scenario.records
    pool = values_for(job)
    rec = LatencyRecorder(n)
    delivery = Delivery()
    stop = threading.Event()
    failure: list[BaseException] = []
    deadline = time.monotonic() + job.timeout_s * 0.8
    c = _consumer(job)

    def consume_loop() -> None:
        try:
            while not rec.done and not stop.is_set() and time.monotonic() < deadline:
                rec.add(_poll_values(c, 100, 1000))
        except BaseException as exc:  # re-raised in the main thread below
            failure.append(exc)

    def on_ok(_meta: Any) -> None:
        delivery.ok()

    p = _producer(job)
    t = threading.Thread(target=consume_loop, name="bench-consumer")
    t.start()
    try:
        p.send(job.topic, stamp(pool[0], WARMUP_SEQ, time.perf_counter_ns())).get(timeout=30)
        while not rec.warmup_seen and time.monotonic() < deadline and t.is_alive():
            time.sleep(0.005)
        schedule = Schedule(job.scenario.rate)
        meter.start()
        schedule.begin()
        for i in range(n):
            wait = schedule.wait_s(i)
            if wait > 0:
                time.sleep(wait)
            fut = p.send(job.topic, stamp(pool[i % POOL_SIZE], i, schedule.due(i)))
            fut.add_callback(on_ok).add_errback(delivery.error)
        p.flush(timeout=30)
        t.join(max(1.0, deadline - time.monotonic()))
        meter.stop()
    finally:
        stop.set()
        t.join()
        c.close()
        p.close(timeout=10)
    if failure:
        raise failure[0]
    return {**delivery.fields(), **rec.fields()}
