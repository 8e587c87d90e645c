"""Client adapters: one module per client, each with ``version()`` and one function per
scenario kind it supports (``produce``, ``consume``, ``latency``, and ``produce_txn`` for
the transactional produce scenarios), each taking ``(job, meter)`` and returning the
counts the validator checks."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from benchmarks.scenarios import KINDS, Kind, Scenario


@dataclass(frozen=True)
class Adapter:
    name: str
    module: str
    kinds: tuple[Kind, ...] = KINDS
    note: str = ""
    transactions: bool = False  # the module has ``produce_txn``
    #: set in the child's environment (the same adapter module, another build or loop)
    env: dict[str, str] = field(default_factory=dict)

    def supports(self, scenario: Scenario) -> bool:
        if scenario.txn_records:
            return self.transactions
        return scenario.kind in self.kinds


_LIBRDKAFKA_CONSUMER = (
    "consumer with fetch.queue.backoff.ms=10 (librdkafka's default of 1 s paused its "
    "prefetch mid-run and cut consume runs to about 120,000 msgs/s); consume() asks for "
    "at most the records still to come"
)

ADAPTERS: dict[str, Adapter] = {
    a.name: a
    for a in (
        Adapter("aiokproto", "benchmarks.clients.aiokproto_client", transactions=True),
        Adapter(
            "aiokproto-batch",
            "benchmarks.clients.aiokproto_batch",
            kinds=("produce",),
            note="aiokproto's bulk path: Producer.send_batch with 1000 records per call; each "
            "call's delivery awaited with wait() (all delivered or its error, no "
            "RecordMetadata per record), as a bulk writer does",
        ),
        Adapter(
            "aiokproto-uvloop",
            "benchmarks.clients.aiokproto_client",
            env={"BENCH_EVENT_LOOP": "uvloop"},
            note="aiokproto unchanged, on uvloop's event loop",
        ),
        Adapter(
            "aiokproto-pure",
            "benchmarks.clients.aiokproto_client",
            env={"AIOKPROTO_PURE_PYTHON": "1"},
            note="aiokproto without its compiled codec (AIOKPROTO_PURE_PYTHON=1)",
        ),
        Adapter(
            "aiokproto-base",
            "benchmarks.clients.aiokproto_client",
            transactions=True,
            env={"BENCH_AIOKPROTO_PATH": os.environ.get("BENCH_AIOKPROTO_BASE", "")},
            note="aiokproto from another checkout ($BENCH_AIOKPROTO_BASE, its codec built "
            "in place; make bench-base BASE=<git rev>), to compare two builds in one run",
        ),
        Adapter(
            "confluent-kafka",
            "benchmarks.clients.confluent_sync",
            transactions=True,
            note=_LIBRDKAFKA_CONSUMER,
        ),
        Adapter(
            "confluent-kafka-aio",
            "benchmarks.clients.confluent_aio",
            transactions=True,
            note=_LIBRDKAFKA_CONSUMER,
        ),
        Adapter("aiokafka", "benchmarks.clients.aiokafka_client", transactions=True),
        Adapter("kafka-python", "benchmarks.clients.kafka_python_client"),
        Adapter(
            "java-perf",
            "benchmarks.clients.java_perf",
            kinds=("produce", "consume"),
            note="Kafka's ProducerPerformance/ConsumerPerformance (JVM); CPU and RSS are the "
            "whole JVM process including start-up",
        ),
    )
}
REFERENCE = "aiokproto"
