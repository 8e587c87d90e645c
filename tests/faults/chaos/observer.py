"""An independent view of the cluster through librdkafka (confluent-kafka).

The chaos tests judge aiokproto, so what they observe (leaders, ISR, coordinators,
watermarks, committed offsets, the records in the log) comes from another client.
Every call blocks: run it with ``asyncio.to_thread`` from a test's event loop.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import confluent_kafka
from confluent_kafka.admin import AdminClient

# librdkafka logs every refused connection to stderr; brokers are down on purpose here.
_QUIET: dict[str, Any] = {"log_level": 2}


@dataclass(frozen=True)
class PartitionView:
    partition: int
    leader: int  # -1: no leader right now
    replicas: tuple[int, ...]
    isr: tuple[int, ...]

    @property
    def healthy(self) -> bool:
        return self.leader >= 0 and set(self.isr) == set(self.replicas)


class ObserverError(AssertionError):
    """The cluster did not reach a wanted state in time (a harness or broker problem)."""


class ClusterView:
    """Leaders, ISR and group coordinators as librdkafka sees them."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self._admin = AdminClient({"bootstrap.servers": bootstrap, **_QUIET})

    def _fresh(self) -> AdminClient:
        """A new librdkafka admin client for group calls: after the group coordinator
        was SIGKILLed and restarted, a long-lived one kept answering NOT_COORDINATOR
        or timing out for minutes (librdkafka 2.16 does not look the coordinator up
        again), which would blame aiokproto for the observer's problem."""
        return AdminClient({"bootstrap.servers": self.bootstrap, **_QUIET})

    def partitions(self, topic: str, timeout: float = 5.0) -> dict[int, PartitionView]:
        meta = self._admin.list_topics(topic, timeout=timeout)
        info = meta.topics.get(topic)
        if info is None or info.error is not None:
            raise ObserverError(f"no metadata for {topic}: {None if info is None else info.error}")
        return {
            p: PartitionView(p, part.leader, tuple(part.replicas), tuple(part.isrs))
            for p, part in info.partitions.items()
        }

    def leader_of(self, topic: str, partition: int, timeout: float = 30.0) -> int:
        """The partition's current leader, waiting (bounded) while it has none."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                leader = self.partitions(topic).get(partition)
                if leader is not None and leader.leader >= 0:
                    return leader.leader
            except confluent_kafka.KafkaException:
                pass
            if time.monotonic() >= deadline:
                raise ObserverError(f"{topic}[{partition}] had no leader for {timeout:.0f} s")
            time.sleep(0.2)

    def wait_healthy(self, topics: Iterable[str], timeout: float) -> float:
        """Wait until every partition of ``topics`` has a leader and a full ISR; returns
        the seconds it took. A kill loop calls this before the next kill: with a replica
        still catching up, one more kill drops partitions below min ISR."""
        wanted = list(topics)
        began = time.monotonic()
        deadline = began + timeout
        last = "no answer yet"
        while True:
            try:
                lagging = [
                    f"{t}[{v.partition}] leader={v.leader} isr={sorted(v.isr)}"
                    for t in wanted
                    for v in self.partitions(t).values()
                    if not v.healthy
                ]
                if not lagging:
                    return time.monotonic() - began
                last = ", ".join(lagging[:6])
            except (confluent_kafka.KafkaException, ObserverError) as exc:
                last = repr(exc)
            if time.monotonic() >= deadline:
                raise ObserverError(f"ISR not full after {timeout:.0f} s: {last}")
            time.sleep(0.25)

    def elect_preferred(self, topic: str, partitions: int) -> list[int]:
        """Preferred leader election (what Kafka's auto rebalance does every 5 minutes):
        leadership moves back to restarted nodes while the old leader is still alive.
        Returns the partitions whose leader changed."""
        tps = [confluent_kafka.TopicPartition(topic, p) for p in range(partitions)]
        # (no timeout keywords: confluent-kafka 2.16 raises SystemError on them here)
        future = self._admin.elect_leaders(confluent_kafka.ElectionType.PREFERRED, tps)
        answer = future.result(timeout=30)
        # ELECTION_NOT_NEEDED: the preferred replica already leads
        return sorted(tp.partition for tp, error in answer.items() if error is None)

    def coordinator_of(self, group: str, timeout: float = 30.0) -> int:
        """The broker coordinating ``group`` (FindCoordinator through DescribeGroups)."""
        deadline = time.monotonic() + timeout
        last = "no answer yet"
        while True:
            admin = self._fresh()  # referenced until the answer: the future dies with it
            try:
                future = admin.describe_consumer_groups([group], request_timeout=5)[group]
                return int(future.result(timeout=10).coordinator.id)
            except Exception as exc:  # librdkafka raises KafkaException or its own errors
                last = repr(exc)
            if time.monotonic() >= deadline:
                raise ObserverError(f"no coordinator for group {group!r}: {last}")
            time.sleep(0.5)

    def group_state(self, group: str) -> tuple[str, int]:
        """(state name, member count) of a classic group, ("?", 0) when unknown."""
        admin = self._fresh()
        try:
            future = admin.describe_consumer_groups([group], request_timeout=5)[group]
            desc = future.result(timeout=10)
        except Exception:  # coordinator moving, broker down: "unknown", the caller polls
            return "?", 0
        return str(desc.state.name), len(desc.members)

    def committed(self, group: str, topic: str, partitions: int) -> dict[int, int]:
        """The group's committed offsets (-1 where nothing is committed)."""
        request = confluent_kafka.ConsumerGroupTopicPartitions(
            group, [confluent_kafka.TopicPartition(topic, p) for p in range(partitions)]
        )
        admin = self._fresh()
        future = admin.list_consumer_group_offsets([request], request_timeout=5)[group]
        answer = future.result(timeout=10)
        errors = [tp for tp in answer.topic_partitions if tp.error is not None]
        if errors:
            raise ObserverError(f"offsets of {group}: {errors[:3]}")
        return {tp.partition: tp.offset for tp in answer.topic_partitions}


def _reader(bootstrap: str) -> confluent_kafka.Consumer:
    return confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"chaos-reader-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.max.bytes": 8 << 20,
            "enable.partition.eof": False,
            **_QUIET,
        }
    )


def watermarks(bootstrap: str, topic: str, partitions: int) -> dict[int, tuple[int, int]]:
    """``{partition: (log start offset, high watermark)}`` read from each leader."""
    consumer = _reader(bootstrap)
    try:
        return {p: _watermark(consumer, topic, p) for p in range(partitions)}
    finally:
        consumer.close()


def _watermark(consumer: Any, topic: str, partition: int) -> tuple[int, int]:
    # a leader elected a moment ago answers OFFSET_NOT_AVAILABLE (its high watermark is
    # not caught up yet) and other retriable errors: asked again, for up to 60 s
    deadline = time.monotonic() + 60
    while True:
        try:
            low, high = consumer.get_watermark_offsets(
                confluent_kafka.TopicPartition(topic, partition), timeout=10, cached=False
            )
            return low, high
        except confluent_kafka.KafkaException as exc:
            error = exc.args[0] if exc.args else None
            retriable = error is not None and (
                error.retriable() or error.code() == confluent_kafka.KafkaError.OFFSET_NOT_AVAILABLE
            )
            if not retriable or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def commit_zero(bootstrap: str, group: str, topic: str, partitions: int) -> None:
    """Commit offset 0 of every partition for ``group``, so that its members start from
    the beginning with ``auto_offset_reset="latest"``: a member that loses track of its
    committed offset then jumps to the end, and the audit sees the skipped records."""
    # AdminClient rather than a librdkafka Consumer: committing from a consumer that
    # never joined and closing it at once crashed librdkafka 2.16 (rd_kafka_cgrp_op).
    admin = AdminClient({"bootstrap.servers": bootstrap, **_QUIET})
    request = confluent_kafka.ConsumerGroupTopicPartitions(
        group, [confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)]
    )
    deadline = time.monotonic() + 60
    while True:
        # Per-partition errors come back in the answer, not as an exception: a topic
        # created a moment ago can still be unknown to the coordinator.
        future = admin.alter_consumer_group_offsets([request], request_timeout=10)[group]
        try:
            answer = future.result(timeout=30)
            errors = [tp for tp in answer.topic_partitions if tp.error is not None]
        except confluent_kafka.KafkaException as exc:
            errors = [exc]
        if not errors:
            return
        if time.monotonic() >= deadline:
            raise ObserverError(f"committing offset 0 for {group} failed: {errors[:3]}")
        time.sleep(0.5)


def read_log(
    bootstrap: str, topic: str, partitions: int, timeout: float
) -> dict[int, list[tuple[int, bytes]]]:
    """Every record of every partition, ``{partition: [(offset, value), ...]}``, from the
    log start to the high watermark as of the call."""
    marks = watermarks(bootstrap, topic, partitions)
    out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
    todo = {p for p, (low, high) in marks.items() if high > low}
    if not todo:
        return out
    consumer = _reader(bootstrap)
    consumer.assign(
        [confluent_kafka.TopicPartition(topic, p, marks[p][0]) for p in sorted(todo)]
    )
    deadline = time.monotonic() + timeout
    try:
        while todo:
            if time.monotonic() >= deadline:
                got = {p: len(out[p]) for p in sorted(todo)}
                raise ObserverError(
                    f"reading {topic} took over {timeout:.0f} s; read so far {got}, "
                    f"watermarks {marks}"
                )
            for msg in consumer.consume(num_messages=10_000, timeout=0.5):
                error = msg.error()
                if error is not None:
                    raise ObserverError(f"librdkafka read error: {error}")
                p, offset = msg.partition(), msg.offset()
                if p is None or offset is None:
                    raise ObserverError(f"librdkafka handed out a message without position: {msg}")
                if p in todo and offset < marks[p][1]:
                    out[p].append((offset, msg.value() or b""))
                    if offset + 1 >= marks[p][1]:
                        todo.discard(p)
    finally:
        consumer.close()
    return out
