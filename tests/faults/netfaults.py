"""Helpers of the network-fault tests: hang guards, a ledger of what a producer was
told, and an independent read-back of the topic (librdkafka, no proxy in the way)."""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from aiokproto import Admin, Consumer, NewTopic
from aiokproto.config import parse_bootstrap_servers
from aiokproto.errors import KafkaError
from aiokproto.net.connection import BrokerConnection
from aiokproto.net.connection_config import ConnectionConfig
from aiokproto.producer import DeliveryFuture, Producer, RecordMetadata
from aiokproto.protocol.messages.find_coordinator import FindCoordinatorRequest

T = TypeVar("T")

# Small timeouts so that each fault outlives them quickly: a fault longer than
# request_timeout_ms must end in a retry or a typed error, and we can wait for both.
REQUEST_TIMEOUT_MS = 1500
CLIENT: dict[str, Any] = {
    "request_timeout_ms": REQUEST_TIMEOUT_MS,
    "default_api_timeout_ms": 6000,
    "socket_connection_setup_timeout_ms": 1500,
    "retry_backoff_ms": 50,
    "retry_backoff_max_ms": 300,
    "reconnect_backoff_ms": 50,
    "reconnect_backoff_max_ms": 300,
}
# Slack on top of a configured timeout before a late typed error counts as a failure:
# a busy 2-core box running brokers is slow, but not seconds slow.
MARGIN_S = 2.0


class Hang(AssertionError):
    """An operation outlived every timeout it was configured with."""


async def bounded(aw: Awaitable[T], limit_s: float, what: str) -> T:
    """``await aw``, failing the test as a HANG if it takes over ``limit_s``."""
    cm = asyncio.timeout(limit_s)
    try:
        async with cm:
            return await aw
    except TimeoutError:
        if cm.expired():
            raise Hang(f"HANG: {what} still running after {limit_s:.1f} s") from None
        raise


Client = TypeVar("Client", Producer, Consumer, Admin)

# Consumer.stop() leaves the group within 30 s by default (its config is not public).
_CONSUMER_STOP_S = 30.0


class guarded(Generic[Client]):  # lower case: reads as a function, like closing()
    """``async with guarded(client) as c``: ``start()`` and ``stop()`` under hang guards
    derived from the client's own timeouts."""

    def __init__(self, client: Client) -> None:
        self.client: Client = client
        api_s = CLIENT["default_api_timeout_ms"] / 1000
        if isinstance(client, Producer):
            api_s = client.config.default_api_timeout_ms / 1000
            # cluster metadata, then a producer id: each within default_api_timeout_ms
            self.start_s = 2 * api_s + MARGIN_S
            self.stop_s = client.options.delivery_timeout_ms / 1000 + MARGIN_S
        elif isinstance(client, Admin):
            self.start_s = client.config.default_api_timeout_ms / 1000 + MARGIN_S
            self.stop_s = MARGIN_S
        else:
            self.start_s = 2 * api_s + MARGIN_S
            self.stop_s = _CONSUMER_STOP_S + MARGIN_S

    async def __aenter__(self) -> Client:
        name = type(self.client).__name__
        await bounded(self.client.start(), self.start_s, f"{name}.start()")
        return self.client

    async def __aexit__(self, *exc_info: object) -> None:
        name = type(self.client).__name__
        await bounded(self.client.stop(), self.stop_s, f"{name}.stop()")


@dataclass
class Outcome(Generic[T]):
    """How one operation ended: a value or a typed error, and when."""

    value: T | None
    error: KafkaError | None
    elapsed: float

    @property
    def ok(self) -> bool:
        return self.error is None


async def attempt(aw: Awaitable[T], limit_s: float, what: str) -> Outcome[T]:
    """Run ``aw`` under a hang guard; a ``KafkaError`` is an outcome, anything else fails."""
    start = time.monotonic()
    try:
        value = await bounded(aw, limit_s, what)
    except KafkaError as exc:
        return Outcome(None, exc, time.monotonic() - start)
    except Hang:
        raise
    except Exception as exc:
        raise AssertionError(f"UNTYPED error from {what}: {exc!r}") from exc
    return Outcome(value, None, time.monotonic() - start)


def assert_within(outcome: Outcome[Any], budget_s: float, what: str) -> None:
    """The outcome (typed error or success) came within its configured budget."""
    assert outcome.elapsed <= budget_s + MARGIN_S, (
        f"{what} took {outcome.elapsed:.2f} s; configured budget {budget_s:.2f} s "
        f"(+{MARGIN_S} s margin); outcome: {outcome.error!r}"
    )


async def create_topic(
    bootstrap: str,
    name: str,
    partitions: int = 1,
    replication: int = 1,
    assignments: Mapping[int, Sequence[int]] | None = None,
) -> None:
    """Create a topic over a direct connection and wait until every partition has a leader."""
    async with guarded(Admin(bootstrap_servers=bootstrap, request_timeout_ms=10_000)) as admin:
        if assignments is not None:
            topic = NewTopic(name, replica_assignments=assignments)
            partitions = len(assignments)
        else:
            topic = NewTopic(name, num_partitions=partitions, replication_factor=replication)
        await bounded(admin.create_topics([topic]), 30, "create_topics")
        async with asyncio.timeout(30):
            while True:
                try:
                    desc = (await admin.describe_topics([name]))[name]
                except KafkaError:  # a broker whose metadata has not caught up yet
                    await asyncio.sleep(0.1)
                    continue
                if len(desc.partitions) == partitions and all(
                    p.leader is not None and p.leader >= 0 for p in desc.partitions
                ):
                    return
                await asyncio.sleep(0.1)


async def leaders(bootstrap: str, topic: str) -> dict[int, int]:
    """partition -> leader node, asked over a direct connection."""
    async with guarded(Admin(bootstrap_servers=bootstrap, **CLIENT)) as admin:
        desc = (await bounded(admin.describe_topics([topic]), 10, "describe_topics"))[topic]
    return {p.partition: p.leader for p in desc.partitions if p.leader is not None}


async def coordinator_of(bootstrap: str, group_id: str) -> int:
    """The node that coordinates ``group_id`` (FindCoordinator over a direct connection;
    the offsets topic of a fresh cluster may take a moment to exist)."""
    host, port = parse_bootstrap_servers(bootstrap)[0]
    async with BrokerConnection(host, port, ConnectionConfig(request_timeout_ms=10_000)) as conn:
        version = conn.version_for(FindCoordinatorRequest)
        request = (
            FindCoordinatorRequest(key_type=0, coordinator_keys=[group_id])
            if version >= 4
            else FindCoordinatorRequest(key_type=0, key=group_id)
        )
        async with asyncio.timeout(30):
            while True:
                answer = await conn.send(request, version)
                found = answer.coordinators[0] if version >= 4 else answer
                if found.error_code == 0:
                    node_id: int = found.node_id
                    return node_id
                await asyncio.sleep(0.2)  # COORDINATOR_NOT_AVAILABLE while it is created


# -- producing with a ledger ---------------------------------------------------------


@dataclass
class Ledger:
    """Every record a producer was given, and what it was told about each.

    Values are ``p<partition>-<seq>`` with ``seq`` counting per partition, so order
    in the log can be checked without keeping the payloads around.
    """

    topic: str
    partitions: int
    pad: bytes = b""
    sent: dict[int, list[bytes]] = field(default_factory=dict)
    acked: dict[bytes, RecordMetadata] = field(default_factory=dict)
    failed: dict[bytes, KafkaError] = field(default_factory=dict)
    handles: list[tuple[bytes, DeliveryFuture]] = field(default_factory=list)

    def next_value(self, partition: int) -> bytes:
        seq = len(self.sent.setdefault(partition, []))
        value = b"p%d-%09d" % (partition, seq) + self.pad
        self.sent[partition].append(value)
        return value

    async def send(self, producer: Producer, partition: int) -> DeliveryFuture:
        value = self.next_value(partition)
        handle = await producer.send(self.topic, value, partition=partition)
        self.handles.append((value, handle))
        return handle

    async def send_many(self, producer: Producer, count: int) -> None:
        """``count`` sends, round-robin over the partitions, without waiting for acks."""
        for i in range(count):
            await self.send(producer, i % self.partitions)

    async def send_and_wait(self, producer: Producer, partition: int) -> RecordMetadata:
        value = self.next_value(partition)
        try:
            meta = await producer.send_and_wait(self.topic, value, partition=partition)
        except KafkaError as exc:
            self.failed[value] = exc
            raise
        self.acked[value] = meta
        return meta

    async def settle(self, limit_s: float, what: str = "delivery of every record") -> None:
        """Wait for every outstanding handle: each must succeed or fail with a typed error."""
        handles, self.handles = self.handles, []
        if not handles:
            return

        async def each(value: bytes, handle: DeliveryFuture) -> None:
            try:
                self.acked[value] = await handle
            except KafkaError as exc:
                self.failed[value] = exc
            except Exception as exc:
                raise AssertionError(f"UNTYPED delivery error for {value!r}: {exc!r}") from exc

        await bounded(asyncio.gather(*(each(v, h) for v, h in handles)), limit_s, what)

    @property
    def total(self) -> int:
        return sum(len(v) for v in self.sent.values())

    def error_types(self) -> Counter[str]:
        return Counter(type(e).__name__ for e in self.failed.values())


@dataclass(frozen=True)
class LogRecord:
    partition: int
    offset: int
    value: bytes


def read_log_sync(bootstrap: str, topic: str, partitions: int, within_s: float) -> list[LogRecord]:
    """Everything in the topic up to its high watermarks, read with librdkafka."""
    import confluent_kafka

    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"netfaults-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.max.bytes": 8 << 20,
        }
    )
    try:
        ends = {
            p: consumer.get_watermark_offsets(
                confluent_kafka.TopicPartition(topic, p), timeout=10
            )[1]
            for p in range(partitions)
        }
        consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
        got: list[LogRecord] = []
        reached = {p: ends[p] == 0 for p in range(partitions)}
        deadline = time.monotonic() + within_s
        while not all(reached.values()):
            if time.monotonic() > deadline:
                raise AssertionError(f"read-back of {topic} incomplete: ends {ends}, {reached}")
            for msg in consumer.consume(num_messages=10_000, timeout=0.5):
                if msg.error() is not None:
                    raise AssertionError(f"read-back error: {msg.error()}")
                p, off, value = msg.partition(), msg.offset(), msg.value()
                assert p is not None and off is not None and value is not None
                if off < ends[p]:
                    got.append(LogRecord(p, off, bytes(value)))
                if off >= ends[p] - 1:
                    reached[p] = True
        return got
    finally:
        consumer.close()


async def read_log(bootstrap: str, topic: str, partitions: int) -> list[LogRecord]:
    return await asyncio.to_thread(read_log_sync, bootstrap, topic, partitions, 60.0)


def verify_exactly_once(ledger: Ledger, log: Iterable[LogRecord]) -> None:
    """Every acknowledged record is in the log exactly once, at the offset it was
    acknowledged with; nothing is duplicated; each partition keeps the send order."""
    by_partition: dict[int, list[LogRecord]] = {}
    for rec in log:
        by_partition.setdefault(rec.partition, []).append(rec)
    counts = Counter(rec.value for recs in by_partition.values() for rec in recs)
    dups = [v for v, n in counts.items() if n > 1]
    assert not dups, f"{len(dups)} duplicated record(s), e.g. {dups[:5]}"
    sent_at = {v: (p, i) for p, values in ledger.sent.items() for i, v in enumerate(values)}
    unknown = [rec for recs in by_partition.values() for rec in recs if rec.value not in sent_at]
    assert not unknown, f"records nobody sent: {unknown[:5]}"
    for p, recs in by_partition.items():
        seqs = [sent_at[rec.value] for rec in recs]
        wrong = [(rec, s) for rec, s in zip(recs, seqs, strict=True) if s[0] != p]
        assert not wrong, f"records in the wrong partition: {wrong[:5]}"
        order = [s[1] for s in seqs]
        bad = [(a, b) for a, b in itertools.pairwise(order) if b <= a]
        assert not bad, f"partition {p} out of send order at {bad[:5]}"
    where = {rec.value: rec for recs in by_partition.values() for rec in recs}
    missing = [v for v in ledger.acked if v not in where]
    assert not missing, f"{len(missing)} acknowledged record(s) lost, e.g. {missing[:5]}"
    moved = [
        (v, m.offset, where[v].offset)
        for v, m in ledger.acked.items()
        if (m.partition, m.offset) != (where[v].partition, where[v].offset)
    ]
    assert not moved, f"acknowledged offsets differ from the log: {moved[:5]}"
