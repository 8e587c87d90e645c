"""client.metrics() under hostile use, against the real broker: values that must add up
after seeks, pauses, retries and rebalances; metrics() from another thread; connection
counts after failures."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from aiokproto import Admin, Consumer, Producer, ShareConsumer
from aiokproto.errors import KafkaError
from aiokproto.structs import TopicPartition
from tests.faults.proxy import PRODUCE, FaultProxy
from tests.producer.helpers import create_topic

FETCH = "consumer-fetch-manager-metrics"
COORD = "consumer-coordinator-metrics"


async def _produce(bootstrap: str, topic: str, count: int, partitions: int = 1) -> None:
    async with Producer(bootstrap_servers=bootstrap, linger_ms=5) as p:
        handles = [await p.send(topic, b"v" * 20, partition=i % partitions) for i in range(count)]
        for h in handles:
            await h


def _consumed(c: Consumer) -> float:
    return c.metrics().value("records-consumed-total", FETCH)


async def test_records_consumed_is_what_the_application_received(
    kafka: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    await _produce(kafka.bootstrap_servers, topic_name, 100)
    tp = TopicPartition(topic_name, 0)
    async with Consumer(
        bootstrap_servers=kafka.bootstrap_servers, auto_offset_reset="earliest"
    ) as c:
        c.assign([tp])
        received = 0
        # async for takes up to max_poll_records at once (counted then, as Java's poll())
        async for r in c:
            received += 1
            if r.offset == 9:
                break
        c.seek(tp, 0)  # the other 90 never reach the application: uncounted
        assert _consumed(c) == received == 10
        r = await c.getone()  # async for's buffer too
        received += 1
        assert r.offset == 0
        c.pause(tp)  # drops the other 99 again
        assert _consumed(c) == received
        c.resume(tp)
        got = await c.getmany(tp, timeout_ms=5_000, max_records=5)
        received += len(got[tp])
        assert _consumed(c) == received
        async for r in c:
            received += 1
            if r.offset == 99:
                break
        assert received == 10 + 1 + 5 + 94
        m = c.metrics()
        assert m.value("records-consumed-total", FETCH) == received
        assert m.value("records-consumed-total", FETCH, {"topic": topic_name}) == received
        await c.seek_to_end(tp)
        assert c.metrics().value("records-lag", tags={"partition": "0"}) == 0



async def test_retries_are_counted_once_per_resend_and_errors_once(
    kafka: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    async with FaultProxy(kafka.bootstrap_servers) as proxy:
        lst = proxy.listeners[0]
        # the first two Produce answers are cut: the batch goes out three times
        lst.reset_after(12, "response", apis=[PRODUCE], limit=2)
        async with Producer(
            bootstrap_servers=proxy.bootstrap_servers, linger_ms=20, retry_backoff_ms=10
        ) as p:
            handles = [await p.send(topic_name, b"x", partition=0) for _ in range(5)]
            for h in handles:
                await h
            m = p.metrics()
            assert lst.stats.resets == 2
            assert m.value("record-send-total", "producer-metrics") == 5
            assert m.value("record-retry-total", "producer-metrics") == 10
            assert m.value("record-error-total", "producer-metrics") == 0
            # two connections died, one is open; never negative
            assert m.value("connection-count", "producer-metrics") >= 1
            assert m.value("connection-close-total", "producer-metrics") >= 2
        # retries=1: two attempts, both cut, and the records fail (counted once)
        lst.reset_after(12, "response", apis=[PRODUCE], limit=2)
        async with Producer(
            bootstrap_servers=proxy.bootstrap_servers,
            linger_ms=20,
            retry_backoff_ms=10,
            retries=1,
            enable_idempotence=False,
        ) as p:
            handles = [await p.send(topic_name, b"x", partition=0) for _ in range(5)]
            for h in handles:
                with pytest.raises(KafkaError):
                    await h
        m = p.metrics()
        proxy.check()
    topic = {"topic": topic_name}
    assert m.value("record-send-total", "producer-metrics") == 5
    assert m.value("record-retry-total", "producer-topic-metrics", topic) == 5
    assert m.value("record-error-total", "producer-metrics") == 5
    assert m.value("record-error-total", "producer-topic-metrics", topic) == 5
    assert m.value("connection-count", "producer-metrics") == 0
    assert m.value("connection-close-total", "producer-metrics") == m.value(
        "connection-creation-total", "producer-metrics"
    )


async def test_metrics_never_raise_and_are_safe_from_another_thread(
    kafka: Any, topic_name: str
) -> None:
    """An OTel exporter reads metrics() on its own thread while the loop assigns and
    revokes partitions, creates per-topic and per-node metrics, and stops the clients."""
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=8)
    bootstrap = kafka.bootstrap_servers
    producer = Producer(bootstrap_servers=bootstrap, linger_ms=0)
    consumer = Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    admin = Admin(bootstrap_servers=bootstrap)
    share = ShareConsumer(topic_name, bootstrap_servers=bootstrap, group_id=f"s-{topic_name}")
    clients: list[Any] = [producer, consumer, admin, share]
    errors: list[BaseException] = []
    reads = 0
    done = threading.Event()

    def read() -> None:
        nonlocal reads
        while not done.is_set():
            for client in clients:
                try:
                    snapshot = client.metrics()
                    snapshot.as_dict()
                    snapshot.find("records-lag")
                    reads += 1
                except BaseException as exc:
                    errors.append(exc)
                    return

    for client in clients:  # before start
        assert client.metrics()
    thread = threading.Thread(target=read)
    thread.start()
    try:
        async with producer, consumer, admin, share:
            tps = [TopicPartition(topic_name, i) for i in range(8)]
            for i in range(200):
                consumer.assign(tps[: i % 8 + 1])  # a new partition dict each time
                await producer.send(topic_name, b"x", partition=i % 8)
                if i % 10 == 0:
                    await consumer.getmany(timeout_ms=10)
                    await asyncio.sleep(0.001)
            await producer.flush()
    finally:
        stopped_reads = reads
        for client in clients:  # after stop, while the thread still reads
            assert client.metrics()
        await asyncio.sleep(0.05)
        done.set()
        thread.join(10)
    assert not errors, errors
    assert reads > stopped_reads > 0


async def test_a_dead_bootstrap_server_leaves_no_connection_counted(topic_name: str) -> None:
    # nothing listens on port 1: every connect fails; connection-count never moves
    p = Producer(bootstrap_servers="127.0.0.1:1", default_api_timeout_ms=300,
                 reconnect_backoff_ms=10)
    with pytest.raises(KafkaError):
        await p.start()
    m = p.metrics()
    assert m.value("connection-count", "producer-metrics") == 0
    assert m.value("connection-creation-total", "producer-metrics") == 0
    assert m.value("connection-close-total", "producer-metrics") == 0
    await p.stop()
    assert p.metrics().value("connection-count", "producer-metrics") == 0


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
async def test_two_members_rebalance_and_auto_commit(
    kafka: Any, topic_name: str, protocol: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=4)
    await _produce(kafka.bootstrap_servers, topic_name, 40, partitions=4)

    def member() -> Consumer:
        c = Consumer(
            bootstrap_servers=kafka.bootstrap_servers,
            group_id=f"g-{topic_name}",
            group_protocol=protocol,
            auto_offset_reset="earliest",
            auto_commit_interval_ms=100,
        )
        c.subscribe([topic_name])
        return c

    async def poll_until(cs: list[Consumer], done: Any) -> None:
        async with asyncio.timeout(30):
            while not done():
                for c in cs:
                    await c.getmany(timeout_ms=50)

    first, second = member(), member()
    async with first:
        await poll_until([first], lambda: len(first.assignment()) == 4)
        m = first.metrics()
        assert m.value("assigned-partitions", COORD) == 4
        assert m.value("rebalance-total", COORD) == 1
        async with second:
            await poll_until(
                [first, second],
                lambda: len(first.assignment()) == len(second.assignment()) == 2,
            )
            await asyncio.sleep(0.3)  # an auto-commit or two, no manual commit
            await first.getmany(timeout_ms=10)
            one, two = first.metrics(), second.metrics()
        assert one.value("assigned-partitions", COORD) == 2
        assert two.value("assigned-partitions", COORD) == 2
        assert one.value("rebalance-total", COORD) >= 2
        assert two.value("rebalance-total", COORD) >= 1
        assert one.value("commit-total", COORD) >= 1
        assert one.value("commit-latency-avg", COORD) > 0


async def test_share_records_async_for_never_yielded_are_not_counted(
    kafka: Any, topic_name: str
) -> None:
    from tests.share.test_share_consumer_broker import setup, share

    group = await setup(kafka, topic_name, 1, 50)
    sc = share(kafka, group, topic_name)
    async with sc, asyncio.timeout(30):
        async for _ in sc:  # takes a whole batch, yields one
            break
    # the rest were released at stop, never handed to the application
    assert sc.metrics().value("records-consumed-total", "consumer-share-fetch-manager-metrics") == 1


def test_an_ambiguous_value_says_so_and_names_the_tags_to_pick_one() -> None:
    from aiokproto.metrics.registry import MetricName, MetricsRegistry

    reg = MetricsRegistry("cid")

    def lags(_now: float) -> dict[MetricName, float]:
        return {
            MetricName("records-lag", "g", (("client-id", "cid"), ("partition", p))): float(p)
            for p in ("1", "2")
        }

    reg.family(lags)
    snap = reg.snapshot()
    # two partitions, no per-client one: not "no metric", but which tags tell them apart
    with pytest.raises(KeyError, match=r"2 metrics named 'records-lag'.*partition"):
        snap.value("records-lag")
    assert snap.value("records-lag", tags={"partition": "2"}) == 2.0
    with pytest.raises(KeyError, match="no metric named 'records-lag'"):
        snap.value("records-lag", tags={"partition": "7"})


async def test_metrics_are_recorded_per_batch_fetch_and_request_never_per_record(
    kafka: Any, topic_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aiokproto.metrics.sensor import Sensor

    await create_topic(kafka.bootstrap_servers, topic_name)
    calls = 0
    record = Sensor.record

    def counted(self: Sensor, value: float = 1.0, now: float | None = None) -> None:
        nonlocal calls
        calls += 1
        record(self, value, now)

    monkeypatch.setattr(Sensor, "record", counted)
    n = 5_000
    async with Producer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=20) as p:
        handles = [await p.send(topic_name, b"x" * 10, partition=0) for _ in range(n)]
        for h in handles:
            await h
    produced, calls = calls, 0
    async with Consumer(
        bootstrap_servers=kafka.bootstrap_servers, auto_offset_reset="earliest"
    ) as c:
        c.assign([TopicPartition(topic_name, 0)])
        got = 0
        async for _ in c:
            got += 1
            if got == n:
                break
    # a few per batch, fetch and request: a per-record call would be >= n
    assert produced < n / 10, produced
    assert calls < n / 10, calls
