"""Network faults between client and broker, injected by the Kafka-aware proxy.

Every case ends in a retry that succeeds (each acknowledged record is in the log
exactly once, in order, read back by librdkafka with no proxy in the way) or in a typed
``KafkaError`` within the configured timeouts plus ``MARGIN_S``: never in a hang (every
operation runs under ``bounded``/``attempt`` and fails the test as a HANG).

The first tests check the proxy itself against the fake broker, so that a fault test
that passes cannot pass only because the proxy did nothing.
"""

from __future__ import annotations

import asyncio
import time
import uuid
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from aiokproto import (
    Admin,
    AdminBatchError,
    Consumer,
    ConsumerRebalanceListener,
    OffsetSpec,
    Producer,
    TopicPartition,
)
from aiokproto.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from aiokproto.net.connection import BrokerConnection
from aiokproto.net.connection_config import ConnectionConfig
from aiokproto.protocol.headers import encode_request
from aiokproto.protocol.messages.api_versions import ApiVersionsRequest
from aiokproto.protocol.messages.find_coordinator import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    FindCoordinatorResponseCoordinator,
)
from aiokproto.protocol.messages.metadata import (
    MetadataRequest,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponseTopic,
)
from aiokproto.testing import LocalKafka
from tests.fake_broker import FakeBroker, Received, Reply
from tests.faults.conftest import FaultScale
from tests.faults.netfaults import (
    CLIENT,
    MARGIN_S,
    REQUEST_TIMEOUT_MS,
    Ledger,
    assert_within,
    attempt,
    bounded,
    coordinator_of,
    create_topic,
    guarded,
    leaders,
    read_log,
    verify_exactly_once,
)
from tests.faults.proxy import (
    FETCH,
    GROUP_APIS,
    PRODUCE,
    FaultProxy,
    Listener,
    ResetRule,
    Which,
)

# -- fixtures -------------------------------------------------------------------------


@pytest.fixture
def seed(request: pytest.FixtureRequest) -> int:
    """A seed per test: the proxy's jitter repeats from run to run."""
    return zlib.crc32(request.node.nodeid.encode())


@pytest.fixture
async def proxy(kafka: Any, seed: int) -> AsyncIterator[FaultProxy]:
    async with FaultProxy(kafka.bootstrap_servers, seed=seed) as p:
        yield p
    p.check()


@pytest.fixture
async def cluster_proxy(kafka_cluster: LocalKafka, seed: int) -> AsyncIterator[FaultProxy]:
    async with FaultProxy(kafka_cluster.bootstrap_servers, seed=seed) as p:
        yield p
    p.check()


# -- the proxy itself (fake broker) -----------------------------------------------------

QUICK = ConnectionConfig(request_timeout_ms=500, socket_connection_setup_timeout_ms=1000)


async def _round_trip(
    port: int, request: Any = None, config: ConnectionConfig = QUICK
) -> tuple[float, Any]:
    async with BrokerConnection("127.0.0.1", port, config) as conn:
        start = time.monotonic()
        response = await conn.send(request or ApiVersionsRequest())
        return time.monotonic() - start, response


async def test_proxy_points_every_broker_address_at_its_listeners(seed: int) -> None:
    async with FakeBroker(node_id=1) as other:

        def script(rec: Received) -> Reply | None:
            if rec.api_key == 3:  # a cluster of two: itself and `other` as node 2
                return Reply(response=MetadataResponse(
                    brokers=[
                        MetadataResponseBroker(node_id=1, host=fake.host, port=fake.port),
                        MetadataResponseBroker(node_id=2, host=other.host, port=other.port),
                    ],
                    cluster_id="fake", controller_id=1,
                ))
            if rec.api_key == 10:
                if rec.version >= 4:
                    return Reply(response=FindCoordinatorResponse(coordinators=[
                        FindCoordinatorResponseCoordinator(
                            key="g", node_id=2, host=other.host, port=other.port
                        )
                    ]))
                return Reply(response=FindCoordinatorResponse(
                    node_id=2, host=other.host, port=other.port
                ))
            return None

        async with FakeBroker(script, node_id=1) as fake:
            async with FaultProxy(fake.bootstrap, seed=seed) as proxy:
                assert [lst.node_id for lst in proxy.listeners] == [1, 2]
                one, two = proxy.node(1), proxy.node(2)
                assert {one.port, two.port}.isdisjoint({fake.port, other.port})
                _, meta = await _round_trip(one.port, MetadataRequest(topics=[]))
                assert [(b.node_id, b.port) for b in meta.brokers] == [
                    (1, one.port), (2, two.port)
                ]
                for version in (3, 4):
                    async with BrokerConnection("127.0.0.1", one.port, QUICK) as conn:
                        request = (
                            FindCoordinatorRequest(coordinator_keys=["g"])
                            if version >= 4
                            else FindCoordinatorRequest(key="g")
                        )
                        found = await conn.send(request, version)
                    ports = [c.port for c in found.coordinators] or [found.port]
                    assert ports == [two.port], version
                # requests reached the real (fake) brokers through the proxy
                assert fake.received and one.stats.count("request", 3) >= 1
                proxy.check()


async def test_proxy_faults_act_as_configured(seed: int) -> None:
    big = MetadataResponse(
        topics=[MetadataResponseTopic(name=f"topic-{i:04d}-" + "x" * 40) for i in range(400)]
    )

    def script(rec: Received) -> Reply | None:
        if rec.api_key == 3 and rec.request.topics is None:
            return Reply(response=big)
        return None

    async with FakeBroker(script) as fake, FaultProxy(fake.bootstrap, seed=seed) as proxy:
        lst = proxy.node(fake.node_id)
        base, _ = await _round_trip(lst.port)

        lst.latency(100, jitter_ms=20)
        slow, _ = await _round_trip(lst.port)
        assert slow >= base + 0.2 - 0.01, (base, slow)
        await lst.heal()

        lst.bandwidth(50_000, "response")
        patient = ConnectionConfig(request_timeout_ms=5000)
        took, answer = await _round_trip(lst.port, MetadataRequest(topics=None), patient)
        size = len(big.encode(12))
        assert len(answer.topics) == 400 and size > 20_000
        assert took >= size / 50_000 * 0.9, (took, size)
        await lst.heal()

        lst.reset_after(6, "response", limit=1)
        with pytest.raises(KafkaConnectionError):
            await _round_trip(lst.port)
        assert lst.stats.resets == 1
        await _round_trip(lst.port)  # limit=1: the next one passes

        lst.reset_after(10, "request", apis=[3])
        before = len(fake.received)
        async with BrokerConnection("127.0.0.1", lst.port, QUICK) as conn:
            with pytest.raises(KafkaConnectionError):
                await conn.send(MetadataRequest(topics=[]))
        # the fake saw the request cut: no Metadata with topics=[] reached it
        assert [r.api_key for r in fake.received[before:]] == [18]  # ApiVersions only
        await lst.heal()

        lst.blackhole("response")
        with pytest.raises(KafkaTimeoutError):
            await _round_trip(lst.port)
        assert lst.stats.swallowed["response"] == 1
        # a black hole keeps the socket open: no byte, no EOF, no reset
        reader, writer = await asyncio.open_connection("127.0.0.1", lst.port)
        writer.write(encode_request(ApiVersionsRequest(), 0, 1, "raw"))
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.5):
                await reader.read(1)
        writer.close()
        await lst.heal()

        lst.refuse()
        with pytest.raises(KafkaConnectionError, match="cannot connect"):
            await _round_trip(lst.port)
        await lst.heal()
        await _round_trip(lst.port)  # listening again, on the same port
        proxy.check()



def test_proxy_faults_are_reproducible() -> None:
    """Same seed, same jitter; reset rules count frames, not time."""

    def jitter(seed: int, node: int) -> list[float]:
        lst = Listener(FaultProxy("127.0.0.1:9", seed=seed), node, ("127.0.0.1", 9), seed)
        return [lst.rng.uniform(0, 1) for _ in range(5)]

    assert jitter(7, 1) == jitter(7, 1)
    assert jitter(7, 1) != jitter(8, 1) and jitter(7, 1) != jitter(7, 2)
    rule = ResetRule(after_bytes=8, every=3, skip=2, limit=2)
    assert [rule.fires() for _ in range(12)] == [
        False, False, True, False, False, True, False, False, False, False, False, False
    ]

# -- clients ---------------------------------------------------------------------------


def make_producer(bootstrap: str, **options: Any) -> Producer:
    """Idempotent, acks=all (the defaults, spelled out), small timeouts."""
    settings: dict[str, Any] = {
        **CLIENT,
        "enable_idempotence": True,
        "acks": "all",
        "linger_ms": 5,
        "max_block_ms": 6000,
        "delivery_timeout_ms": 20_000,
    }
    return Producer(bootstrap_servers=bootstrap, **{**settings, **options})


def make_consumer(bootstrap: str, *topics: str, **options: Any) -> Consumer:
    settings: dict[str, Any] = {**CLIENT, "auto_offset_reset": "earliest"}
    return Consumer(*topics, bootstrap_servers=bootstrap, **{**settings, **options})


def make_admin(bootstrap: str, **options: Any) -> Admin:
    return Admin(bootstrap_servers=bootstrap, **{**CLIENT, **options})


async def produce_direct(bootstrap: str, ledger: Ledger, count: int) -> None:
    """Records written with no proxy in the way (the consumer tests read them), in
    16 KB batches: the tests cap each fetch answer with max_partition_fetch_bytes, which
    cannot cut a batch (the first one always comes whole), so with the default 1 MB
    batches an answer would be one big batch and the faults would meet few answers."""
    async with guarded(make_producer(bootstrap, batch_size=16_384)) as p:
        await ledger.send_many(p, count)
        await ledger.settle(30, "direct produce")
    assert not ledger.failed, ledger.error_types()


def check_consumed(ledger: Ledger, got: dict[int, list[tuple[int, bytes]]]) -> None:
    """Consumed exactly once each, in offset order, and what was written."""
    for partition, values in ledger.sent.items():
        records = got.get(partition, [])
        offsets = [o for o, _ in records]
        assert offsets == list(range(len(values))), (
            f"partition {partition}: offsets {offsets[:10]}... (count {len(offsets)}), "
            f"expected 0..{len(values) - 1}"
        )
        assert [v for _, v in records] == values, f"partition {partition}: values differ"


async def _consume_into(
    c: Consumer,
    got: dict[int, list[tuple[int, bytes]]],
    want: int,
    limit_s: float,
    what: str,
    max_records: int | None = None,
) -> None:
    """getmany until ``got`` holds ``want`` records: each call and the whole wait run
    under hang guards."""

    async def fill() -> None:
        while sum(map(len, got.values())) < want:
            batch = await bounded(
                c.getmany(timeout_ms=500, max_records=max_records), 0.5 + MARGIN_S, what
            )
            for tp, recs in batch.items():
                got.setdefault(tp.partition, []).extend((r.offset, r.value) for r in recs)

    await bounded(fill(), limit_s, f"{what} ({want} records)")


async def _catch_up_and_commit(
    c: Consumer,
    got: dict[int, list[tuple[int, bytes]]],
    ends: dict[int, int],
    limit_s: float,
    what: str,
) -> None:
    """Consume until the member owns every partition and stands at ``ends``, then
    commit; repeated (a rejoin may move positions back) until a commit succeeds."""

    async def settle() -> None:
        while True:
            batch = await bounded(c.getmany(timeout_ms=500), 0.5 + MARGIN_S, what)
            for tp, recs in batch.items():
                got.setdefault(tp.partition, []).extend((r.offset, r.value) for r in recs)
            owned = sorted(c.assignment())
            if {tp.partition for tp in owned} != set(ends):
                continue
            positions = [await attempt(c.position(tp), 6 + MARGIN_S, what) for tp in owned]
            if [p.value for p in positions] != [ends[tp.partition] for tp in owned]:
                continue
            if (await attempt(c.commit(), 6 + MARGIN_S, f"{what}: commit")).ok:
                return

    await bounded(settle(), limit_s, what)


# -- latency ---------------------------------------------------------------------------


async def test_latency_200ms_each_way_producer(
    proxy: FaultProxy, kafka: Any, topic_name: str, fault_scale: FaultScale
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=2)
    for lst in proxy.listeners:
        lst.latency(200, jitter_ms=20)
    ledger = Ledger(topic_name, partitions=2)
    count = fault_scale.pick(2000, 20_000)
    p = make_producer(proxy.bootstrap_servers, request_timeout_ms=3000)
    await bounded(p.start(), 20, "Producer.start with 200 ms latency")
    try:
        for i in range(3):
            start = time.monotonic()
            await bounded(ledger.send_and_wait(p, i % 2), 10, "send_and_wait")
            # one Produce round trip at least: the proxy really delays both ways
            assert time.monotonic() - start >= 0.4 - 0.02
        start = time.monotonic()
        await ledger.send_many(p, count)
        await ledger.settle(30, f"{count} sends with 200 ms latency")
        took = time.monotonic() - start
    finally:
        await bounded(p.stop(), 25, "Producer.stop")
    assert not ledger.failed, ledger.error_types()
    verify_exactly_once(ledger, await read_log(kafka.bootstrap_servers, topic_name, 2))
    assert proxy.listeners[0].stats.count("request", PRODUCE) >= 4
    print(f"latency: {count} records acknowledged in {took:.2f} s")


async def test_latency_200ms_each_way_consumer_and_admin(
    proxy: FaultProxy, kafka: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=2)
    ledger = Ledger(topic_name, partitions=2)
    await produce_direct(kafka.bootstrap_servers, ledger, 600)
    for lst in proxy.listeners:
        lst.latency(200, jitter_ms=20)
    tps = [TopicPartition(topic_name, p) for p in range(2)]
    bootstrap = proxy.bootstrap_servers

    # manual assignment: getmany for the first half, then async for on the same consumer
    got: dict[int, list[tuple[int, bytes]]] = {}
    async with guarded(make_consumer(bootstrap, request_timeout_ms=3000)) as c:
        c.assign(tps)
        await _consume_into(c, got, 300, 30, "getmany with 200 ms latency", max_records=100)

        async def iterate() -> None:
            async for r in c:
                got.setdefault(r.partition, []).append((r.offset, r.value))
                if sum(map(len, got.values())) == 600:
                    return

        await bounded(iterate(), 30, "async for with 200 ms latency")
    check_consumed(ledger, got)

    # Admin
    async with guarded(make_admin(bootstrap, request_timeout_ms=3000)) as admin:
        start = time.monotonic()
        topics = await bounded(admin.list_topics(), 10, "list_topics")
        assert time.monotonic() - start >= 0.4 - 0.02
        assert topic_name in topics
        desc = await bounded(admin.describe_topics([topic_name]), 10, "describe_topics")
        assert len(desc[topic_name].partitions) == 2
        ends = await bounded(
            admin.list_offsets({tp: OffsetSpec.latest() for tp in tps}), 10, "list_offsets"
        )
        assert {tp.partition: r.offset for tp, r in ends.items()} == {0: 300, 1: 300}


async def test_latency_200ms_each_way_group_member_commits(
    proxy: FaultProxy, kafka: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=2)
    ledger = Ledger(topic_name, partitions=2)
    await produce_direct(kafka.bootstrap_servers, ledger, 200)
    for lst in proxy.listeners:
        lst.latency(200, jitter_ms=20)
    group = f"g-{uuid.uuid4().hex[:8]}"
    got: dict[int, list[tuple[int, bytes]]] = {}
    async with guarded(make_consumer(
        proxy.bootstrap_servers, topic_name, group_id=group, enable_auto_commit=False,
        request_timeout_ms=3000, session_timeout_ms=6000, heartbeat_interval_ms=1000,
        max_poll_interval_ms=20_000,
    )) as c:
        await _consume_into(c, got, 200, 40, "getmany with 200 ms latency")
        outcome = await attempt(c.commit(), 6 + MARGIN_S * 2, "commit with 200 ms latency")
        assert outcome.ok, outcome.error
        tp0 = TopicPartition(topic_name, 0)
        assert await bounded(c.committed(tp0), 10, "committed") == 100
    check_consumed(ledger, got)


# -- bandwidth -------------------------------------------------------------------------


async def test_bandwidth_50kbps_on_fetch_responses(
    proxy: FaultProxy, kafka: Any, topic_name: str, fault_scale: FaultScale
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=1)
    count = fault_scale.pick(100, 600)
    ledger = Ledger(topic_name, partitions=1, pad=b"x" * 1000)
    await produce_direct(kafka.bootstrap_servers, ledger, count)
    rate = 50_000
    for lst in proxy.listeners:
        lst.bandwidth(rate, "response", apis=[FETCH])
    total = count * 1000
    got: dict[int, list[tuple[int, bytes]]] = {}
    # A fetch answer must fit rate * request timeout, or it could never arrive whole:
    # 32 KiB per partition takes ~0.7 s of the 3 s.
    async with guarded(make_consumer(
        proxy.bootstrap_servers, request_timeout_ms=3000, max_partition_fetch_bytes=32 * 1024
    )) as c:
        c.assign([TopicPartition(topic_name, 0)])
        start = time.monotonic()
        await _consume_into(c, got, count, total / rate * 3 + 10, "getmany at 50 KB/s")
        took = time.monotonic() - start
    check_consumed(ledger, got)
    # the cap was really applied (and the consumer was not much slower than the link)
    assert took >= total / rate * 0.9, took
    print(f"bandwidth: {total} bytes consumed in {took:.2f} s at {rate} B/s")


# -- connection resets while producing -----------------------------------------------


@pytest.mark.parametrize("where", ["mid-request", "mid-response"])
async def test_resets_while_producing_lose_and_duplicate_nothing(
    proxy: FaultProxy, kafka: Any, topic_name: str, fault_scale: FaultScale, where: str
) -> None:
    partitions = 3
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=partitions)
    count = fault_scale.pick(20_000, 100_000)
    ledger = Ledger(topic_name, partitions=partitions, pad=b"." * 40)
    lst = proxy.listeners[0]
    # Every 8th Produce frame is cut: a request after 60 bytes (inside the records),
    # an answer after 12 bytes (the broker has written the batch: a retry is a duplicate
    # the broker must recognise by its sequence number).
    if where == "mid-request":
        lst.reset_after(60, "request", every=8, apis=[PRODUCE])
    else:
        lst.reset_after(12, "response", every=8, apis=[PRODUCE])
    async with guarded(make_producer(
        proxy.bootstrap_servers, batch_size=2048, linger_ms=2, delivery_timeout_ms=60_000
    )) as p:
        start = time.monotonic()
        await ledger.send_many(p, count)
        await ledger.settle(60 + MARGIN_S, f"{count} records through resets")
        took = time.monotonic() - start
        await bounded(p.stop(), 10, "Producer.stop")
    assert lst.stats.resets >= 10, lst.stats
    assert not ledger.failed, ledger.error_types()
    verify_exactly_once(ledger, await read_log(kafka.bootstrap_servers, topic_name, partitions))
    print(f"resets {where}: {count} records, {lst.stats.resets} resets, {took:.2f} s")



async def test_resets_on_fetch_responses_consumer_reads_exactly_once(
    proxy: FaultProxy, kafka: Any, topic_name: str, fault_scale: FaultScale
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=2)
    count = fault_scale.pick(4000, 40_000)
    ledger = Ledger(topic_name, partitions=2, pad=b"." * 100)
    await produce_direct(kafka.bootstrap_servers, ledger, count)
    lst = proxy.listeners[0]
    # every 3rd fetch answer is cut 100 bytes in: the consumer must fetch again from
    # where it was, neither skipping nor repeating anything
    lst.reset_after(100, "response", every=3, apis=[FETCH])
    got: dict[int, list[tuple[int, bytes]]] = {}
    consumer = make_consumer(proxy.bootstrap_servers, max_partition_fetch_bytes=16 * 1024)
    async with guarded(consumer) as c:
        c.assign([TopicPartition(topic_name, p) for p in range(2)])
        start = time.monotonic()
        await _consume_into(c, got, count, 60, "getmany through resets")
        took = time.monotonic() - start
    assert lst.stats.resets >= 5, lst.stats
    check_consumed(ledger, got)
    print(f"fetch resets: {count} records, {lst.stats.resets} resets, {took:.2f} s")


async def test_resets_on_group_traffic_member_joins_and_commits(
    proxy: FaultProxy, kafka: Any, topic_name: str
) -> None:
    """JoinGroup, SyncGroup, Heartbeat and OffsetCommit answers cut mid-frame, every
    other one, ten times: the member still joins, consumes everything and commits."""
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=2)
    ledger = Ledger(topic_name, partitions=2)
    await produce_direct(kafka.bootstrap_servers, ledger, 200)
    lst = proxy.listeners[0]
    lst.reset_after(10, "response", every=2, limit=10, apis=GROUP_APIS)
    got: dict[int, list[tuple[int, bytes]]] = {}
    group = f"g-{uuid.uuid4().hex[:8]}"
    async with guarded(make_consumer(
        proxy.bootstrap_servers, topic_name, group_id=group, enable_auto_commit=False,
        session_timeout_ms=6000, heartbeat_interval_ms=500, max_poll_interval_ms=10_000,
    )) as c:
        await _catch_up_and_commit(c, got, {0: 100, 1: 100}, 40, "group through resets")
        rule = lst.faults("response").reset
        assert rule is not None
        fired = rule.fired
    assert fired >= 3, fired
    for partition, values in ledger.sent.items():  # at least once across rejoins
        assert {o for o, _ in got[partition]} == set(range(len(values)))
    async with guarded(make_admin(kafka.bootstrap_servers)) as admin:
        committed = await admin.list_consumer_group_offsets(group)
    assert {tp.partition: om.offset for tp, om in committed.items()} == {0: 100, 1: 100}
    print(f"group resets: {fired} group answers cut; joined, consumed and committed")

# -- black hole on the (only) broker ------------------------------------------------------

HOLE_S = 2 * REQUEST_TIMEOUT_MS / 1000  # longer than request_timeout_ms, by design


@pytest.mark.parametrize("which", ["both", "response"])
async def test_blackhole_then_heal_producer_recovers(
    proxy: FaultProxy, kafka: Any, topic_name: str, fault_scale: FaultScale, which: Which
) -> None:
    """A hole shorter than delivery_timeout_ms: every record is delivered after the heal.
    ("response": the broker writes what it gets but its answers vanish, so the retries
    after the heal are duplicates the broker must recognise.)"""
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=2)
    ledger = Ledger(topic_name, partitions=2)
    hole = fault_scale.pick(1, 3) * HOLE_S
    async with guarded(make_producer(proxy.bootstrap_servers, delivery_timeout_ms=30_000)) as p:
        await ledger.send_many(p, 200)
        await ledger.settle(10, "sends before the hole")
        lst = proxy.listeners[0]
        lst.blackhole(which)
        await ledger.send_many(p, 300)  # buffered: send() does not wait for the broker
        await asyncio.sleep(hole)
        assert lst.stats.swallowed["response" if which == "response" else "request"] > 0
        await lst.heal()
        healed = time.monotonic()
        await ledger.settle(30 + MARGIN_S, "sends through the hole")
        recovered = time.monotonic() - healed
        await ledger.send_many(p, 200)
        await ledger.settle(10, "sends after the heal")
    assert not ledger.failed, ledger.error_types()
    verify_exactly_once(ledger, await read_log(kafka.bootstrap_servers, topic_name, 2))
    print(f"blackhole {which} {hole:.1f} s: producer recovered {recovered:.2f} s after heal")


async def test_blackhole_longer_than_delivery_timeout_fails_typed_then_recovers(
    proxy: FaultProxy, kafka: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=1)
    ledger = Ledger(topic_name, partitions=1)
    delivery_ms = 4000
    producer = make_producer(proxy.bootstrap_servers, delivery_timeout_ms=delivery_ms)
    async with guarded(producer) as p:
        await ledger.send_many(p, 50)
        await ledger.settle(10, "sends before the hole")
        lst = proxy.listeners[0]
        lst.blackhole()
        start = time.monotonic()
        await ledger.send_many(p, 100)
        await ledger.settle(delivery_ms / 1000 + MARGIN_S, "records expiring in the hole")
        expired = time.monotonic() - start
        assert len(ledger.failed) == 100, ledger.error_types()
        assert set(ledger.error_types()) == {"KafkaTimeoutError"}, ledger.error_types()
        assert expired >= delivery_ms / 1000 * 0.9
        await lst.heal()
        healed = time.monotonic()
        outcome = await attempt(ledger.send_and_wait(p, 0), 15, "first send after the heal")
        assert outcome.ok, outcome.error
        recovered = time.monotonic() - healed
        await ledger.send_many(p, 100)
        await ledger.settle(15, "sends after the heal")
    assert len(ledger.failed) == 100, ledger.error_types()
    verify_exactly_once(ledger, await read_log(kafka.bootstrap_servers, topic_name, 1))
    print(f"blackhole > delivery timeout: typed errors after {expired:.2f} s, "
          f"recovered {recovered:.2f} s after heal")


async def test_producer_stop_during_blackhole_returns_within_its_timeout(
    proxy: FaultProxy, kafka: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=1)
    ledger = Ledger(topic_name, partitions=1)
    p = make_producer(proxy.bootstrap_servers)
    await bounded(p.start(), 10, "Producer.start")
    await ledger.send_many(p, 20)
    await ledger.settle(10, "sends before the hole")
    proxy.listeners[0].blackhole()
    await ledger.send_many(p, 100)
    stop = await attempt(p.stop(timeout_ms=1000), 1 + MARGIN_S * 2, "Producer.stop in a hole")
    assert stop.ok, stop.error
    assert_within(stop, 1.0, "Producer.stop(timeout_ms=1000)")
    await ledger.settle(MARGIN_S, "handles after stop")
    assert len(ledger.failed) == 100 and set(ledger.error_types()) == {"KafkaTimeoutError"}
    verify_exactly_once(ledger, await read_log(kafka.bootstrap_servers, topic_name, 1))
    print(f"producer stop in a black hole: {stop.elapsed:.2f} s")


async def test_blackhole_then_heal_consumer_getmany_recovers(
    proxy: FaultProxy, kafka: Any, topic_name: str, fault_scale: FaultScale
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=2)
    ledger = Ledger(topic_name, partitions=2)
    await produce_direct(kafka.bootstrap_servers, ledger, 400)
    hole = fault_scale.pick(1, 3) * HOLE_S
    got: dict[int, list[tuple[int, bytes]]] = {}
    async with guarded(make_consumer(proxy.bootstrap_servers)) as c:
        c.assign([TopicPartition(topic_name, p) for p in range(2)])
        await _consume_into(c, got, 400, 20, "getmany before the hole")
        lst = proxy.listeners[0]
        lst.blackhole()
        await produce_direct(kafka.bootstrap_servers, ledger, 400)  # lands during the hole
        end = time.monotonic() + hole
        while time.monotonic() < end:  # getmany keeps returning (empty) on time
            batch = await bounded(c.getmany(timeout_ms=500), 0.5 + MARGIN_S, "getmany in hole")
            for tp, recs in batch.items():
                got.setdefault(tp.partition, []).extend((r.offset, r.value) for r in recs)
        assert lst.stats.swallowed["request"] > 0
        await lst.heal()
        healed = time.monotonic()
        await _consume_into(c, got, 800, 20, "getmany after the heal")
        recovered = time.monotonic() - healed
    check_consumed(ledger, got)
    print(f"blackhole {hole:.1f} s: getmany consumer recovered {recovered:.2f} s after heal")


async def test_blackhole_then_heal_consumer_async_for_recovers(
    proxy: FaultProxy, kafka: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=2)
    ledger = Ledger(topic_name, partitions=2)
    await produce_direct(kafka.bootstrap_servers, ledger, 200)
    got: dict[int, list[tuple[int, bytes]]] = {}
    progress = asyncio.Event()

    async def iterate(c: Consumer, want: int) -> None:
        async for r in c:
            got.setdefault(r.partition, []).append((r.offset, r.value))
            progress.set()
            if sum(map(len, got.values())) == want:
                return

    async with guarded(make_consumer(proxy.bootstrap_servers)) as c:
        c.assign([TopicPartition(topic_name, p) for p in range(2)])
        await bounded(iterate(c, 200), 20, "async for before the hole")
        lst = proxy.listeners[0]
        lst.blackhole()
        reader = asyncio.create_task(iterate(c, 400))
        try:
            await produce_direct(kafka.bootstrap_servers, ledger, 200)
            progress.clear()
            await asyncio.sleep(HOLE_S)
            assert not progress.is_set(), "records came through a black hole"
            await lst.heal()
            healed = time.monotonic()
            await bounded(asyncio.shield(reader), 20, "async for after the heal")
            recovered = time.monotonic() - healed
        finally:
            reader.cancel()
    check_consumed(ledger, got)
    print(f"blackhole: async for consumer recovered {recovered:.2f} s after heal")


@pytest.mark.parametrize("group", [False, True], ids=["assign", "group"])
async def test_consumer_stop_during_blackhole_returns_within_its_timeout(
    proxy: FaultProxy, kafka: Any, topic_name: str, group: bool
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=1)
    ledger = Ledger(topic_name, partitions=1)
    await produce_direct(kafka.bootstrap_servers, ledger, 50)
    options: dict[str, Any] = {}
    topics: tuple[str, ...] = ()
    if group:
        topics = (topic_name,)
        options = {
            "group_id": f"g-{uuid.uuid4().hex[:8]}", "session_timeout_ms": 6000,
            "heartbeat_interval_ms": 1000, "max_poll_interval_ms": 10_000,
        }
    c = make_consumer(proxy.bootstrap_servers, *topics, **options)
    await bounded(c.start(), 15, "Consumer.start")
    if not group:
        c.assign([TopicPartition(topic_name, 0)])
    got: dict[int, list[tuple[int, bytes]]] = {}
    await _consume_into(c, got, 50, 20, "getmany before the hole")
    proxy.listeners[0].blackhole()
    await asyncio.sleep(0.2)
    stop = await attempt(c.stop(timeout_ms=2000), 2 + MARGIN_S * 2, "Consumer.stop in a hole")
    assert stop.ok, stop.error
    # a group member may spend up to request_timeout_ms on its LeaveGroup, within timeout_ms
    assert_within(stop, 2.0, "Consumer.stop(timeout_ms=2000)")
    check_consumed(ledger, got)
    print(f"consumer ({'group' if group else 'assign'}) stop in a black hole: {stop.elapsed:.2f} s")


async def test_consumer_stop_ends_a_blocked_async_for_and_getone(
    proxy: FaultProxy, kafka: Any, topic_name: str
) -> None:
    """Readers waiting in a black hole when stop() is called: async for ends, getone()
    raises a typed error, both at once (this was a known defect, now fixed)."""
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=1)
    c = make_consumer(proxy.bootstrap_servers)
    await bounded(c.start(), 10, "Consumer.start")
    c.assign([TopicPartition(topic_name, 0)])
    proxy.listeners[0].blackhole()
    ended: list[str] = []

    async def iterate() -> None:
        async for _ in c:
            pass
        ended.append("async for")

    async def one() -> None:
        try:
            await c.getone()
        except KafkaError as exc:  # anything else fails the test in attempt()
            ended.append(f"getone: {type(exc).__name__}")

    readers = [asyncio.create_task(iterate()), asyncio.create_task(one())]
    await asyncio.sleep(0.5)
    try:
        stop = await attempt(c.stop(timeout_ms=1000), 1 + MARGIN_S, "Consumer.stop")
        assert stop.ok, stop.error
        done = await attempt(asyncio.gather(*readers), MARGIN_S, "readers after stop()")
        assert done.ok, done.error
    finally:
        for task in readers:
            task.cancel()
    assert len(ended) == 2 and "async for" in ended, ended
    assert any(e.startswith("getone: ") for e in ended), ended


def timed_out(error: KafkaError | None) -> bool:
    """A retriable timeout or connection error, also per item of a batch call's error
    (calls sharing a connection see it killed by another call's timeout)."""
    unreachable = (KafkaTimeoutError, KafkaConnectionError)
    if isinstance(error, AdminBatchError):
        return bool(error.errors) and all(isinstance(e, unreachable) for e in error.errors.values())
    return isinstance(error, unreachable)


async def test_blackhole_admin_raises_typed_errors_then_recovers(
    proxy: FaultProxy, kafka: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=1)
    tp = TopicPartition(topic_name, 0)
    async with guarded(make_admin(proxy.bootstrap_servers)) as admin:
        assert topic_name in await bounded(admin.list_topics(), 10, "list_topics")
        lst = proxy.listeners[0]
        lst.blackhole()
        budget_ms = 2500
        calls: dict[str, Callable[[], Awaitable[Any]]] = {
            "list_topics": lambda: admin.list_topics(timeout_ms=budget_ms),
            "describe_topics": lambda: admin.describe_topics([topic_name], timeout_ms=budget_ms),
            "list_offsets": lambda: admin.list_offsets(
                {tp: OffsetSpec.latest()}, timeout_ms=budget_ms
            ),
            "describe_cluster": lambda: admin.describe_cluster(timeout_ms=budget_ms),
        }
        outcomes = await asyncio.gather(*(  # independent calls, one hole: all at once
            attempt(call(), budget_ms / 1000 * 3, f"{name} in a black hole")
            for name, call in calls.items()
        ))
        for name, outcome in zip(calls, outcomes, strict=True):
            assert timed_out(outcome.error), (name, outcome)
            assert_within(outcome, budget_ms / 1000, name)
        print("admin calls in a black hole: " + ", ".join(
            f"{name} {type(o.error).__name__} after {o.elapsed:.2f} s"
            for name, o in zip(calls, outcomes, strict=True)
        ))
        await lst.heal()
        healed = time.monotonic()
        desc = await bounded(admin.describe_topics([topic_name]), 10, "describe after heal")
        recovered = time.monotonic() - healed
        assert len(desc[topic_name].partitions) == 1
        ends = await bounded(admin.list_offsets({tp: OffsetSpec.latest()}), 10, "list_offsets")
        assert ends[tp].offset == 0
    print(f"admin recovered {recovered:.2f} s after heal")


async def test_admin_call_outlives_a_hole_shorter_than_its_timeout(
    proxy: FaultProxy, kafka: Any, topic_name: str
) -> None:
    """A hole longer than request_timeout_ms but shorter than the call's timeout_ms:
    the timed-out request is retriable, so the call retries and succeeds after the heal."""
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=1)
    async with guarded(make_admin(proxy.bootstrap_servers)) as admin:
        assert topic_name in await bounded(admin.list_topics(), 10, "list_topics")
        lst = proxy.listeners[0]
        lst.blackhole()
        start = time.monotonic()
        call = asyncio.create_task(admin.describe_topics([topic_name], timeout_ms=8000))
        await asyncio.sleep(HOLE_S)
        await lst.heal()
        outcome = await attempt(call, 8 + MARGIN_S, "describe_topics across a short hole")
        took = time.monotonic() - start
        assert outcome.ok, f"failed after {took:.2f} s of its 8 s: {outcome.error!r}"


async def test_run_batch_retries_a_retriable_request_timeout() -> None:
    from aiokproto.admin._batch import run_batch

    calls = 0

    async def flaky(keys: list[str]) -> dict[str, Any]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise KafkaTimeoutError("one request timed out (request_timeout_ms)")
        return dict.fromkeys(keys, "ok")

    result = await bounded(
        run_batch("op", ["k"], flaky, timeout_ms=5000, backoff_ms=10, backoff_max_ms=10),
        5 + MARGIN_S, "run_batch",
    )
    assert result == {"k": "ok"} and calls == 2


# -- connections refused ------------------------------------------------------------------

REFUSE_S = 2 * REQUEST_TIMEOUT_MS / 1000


async def test_refused_then_healed_producer_delivers_everything(
    proxy: FaultProxy, kafka: Any, topic_name: str, fault_scale: FaultScale
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=2)
    ledger = Ledger(topic_name, partitions=2)
    lst = proxy.listeners[0]
    async with guarded(make_producer(proxy.bootstrap_servers)) as p:
        for _ in range(fault_scale.pick(1, 3)):
            await ledger.send_many(p, 100)
            await ledger.settle(10, "sends before the refusal")
            accepted = lst.stats.accepted
            lst.refuse()  # open connections are reset, new ones refused
            await ledger.send_many(p, 300)
            await asyncio.sleep(REFUSE_S)
            assert lst.stats.accepted == accepted
            await lst.heal()
            healed = time.monotonic()
            await ledger.settle(20 + MARGIN_S, "sends through the refusal")
            recovered = time.monotonic() - healed
            assert lst.stats.accepted > accepted  # it did reconnect
    assert not ledger.failed, ledger.error_types()
    verify_exactly_once(ledger, await read_log(kafka.bootstrap_servers, topic_name, 2))
    print(f"refused {REFUSE_S:.1f} s: producer recovered {recovered:.2f} s after heal")


async def test_refused_then_healed_consumer_reads_everything(
    proxy: FaultProxy, kafka: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=2)
    ledger = Ledger(topic_name, partitions=2)
    await produce_direct(kafka.bootstrap_servers, ledger, 200)
    got: dict[int, list[tuple[int, bytes]]] = {}
    lst = proxy.listeners[0]
    async with guarded(make_consumer(proxy.bootstrap_servers)) as c:
        c.assign([TopicPartition(topic_name, p) for p in range(2)])
        await _consume_into(c, got, 200, 20, "getmany before the refusal")
        lst.refuse()
        await produce_direct(kafka.bootstrap_servers, ledger, 200)
        end = time.monotonic() + REFUSE_S
        while time.monotonic() < end:
            batch = await bounded(c.getmany(timeout_ms=500), 0.5 + MARGIN_S, "getmany refused")
            assert not batch, "records through a refused listener"
        await lst.heal()
        healed = time.monotonic()
        await _consume_into(c, got, 400, 20, "getmany after the heal")
        recovered = time.monotonic() - healed
    check_consumed(ledger, got)
    print(f"refused {REFUSE_S:.1f} s: consumer recovered {recovered:.2f} s after heal")


async def _start_and_use(kind: str, bootstrap: str, topic: str, **options: Any) -> None:
    """Start a client of ``kind`` and make one call with it; always stopped after."""
    if kind == "producer":
        async with guarded(make_producer(bootstrap, **options)) as p:
            await p.send_and_wait(topic, b"v", partition=0)
    elif kind == "consumer":
        async with guarded(make_consumer(bootstrap, **options)) as c:
            assert topic in await c.topics()
            assert c.partitions_for_topic(topic) == frozenset({0})
    else:
        async with guarded(make_admin(bootstrap, **options)) as admin:
            assert topic in await admin.list_topics()


@pytest.mark.parametrize("kind", ["producer", "consumer", "admin"])
async def test_start_while_refused_typed_error_or_success_after_heal(
    proxy: FaultProxy, kafka: Any, topic_name: str, kind: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=1)
    budget_ms = 2000
    for lst in proxy.listeners:
        lst.refuse()
    # never healed: a typed error once default_api_timeout_ms has passed
    failed = await attempt(
        _start_and_use(kind, proxy.bootstrap_servers, topic_name, default_api_timeout_ms=budget_ms),
        budget_ms / 1000 * 3, f"{kind} start while refused",
    )
    assert isinstance(failed.error, KafkaTimeoutError), failed
    assert_within(failed, budget_ms / 1000, f"{kind} start while refused")
    assert failed.elapsed >= budget_ms / 1000 * 0.9, failed
    # healed after a while: the same start succeeds
    started = asyncio.create_task(
        _start_and_use(kind, proxy.bootstrap_servers, topic_name, default_api_timeout_ms=8000)
    )
    await asyncio.sleep(1.5)
    await proxy.heal_all()
    ok = await attempt(started, 8 + MARGIN_S * 2, f"{kind} start across a refusal")
    assert ok.ok, ok.error
    print(f"{kind} start refused: {type(failed.error).__name__} after {failed.elapsed:.2f} s; "
          f"healed after 1.5 s: usable after {ok.elapsed + 1.5:.2f} s")


# -- the 3-node cluster -------------------------------------------------------------------


@pytest.mark.cluster
async def test_cluster_blackhole_on_one_leader_spares_the_others_and_heals(
    cluster_proxy: FaultProxy, kafka_cluster: LocalKafka, topic_name: str,
    fault_scale: FaultScale,
) -> None:
    proxy = cluster_proxy
    nodes = [lst.node_id for lst in proxy.listeners]
    assert len(nodes) == 3
    # one partition led by each node (the first replica leads), replicated everywhere
    assignments = {i: nodes[i:] + nodes[:i] for i in range(3)}
    await create_topic(kafka_cluster.bootstrap_servers, topic_name, assignments=assignments)
    lead = await leaders(kafka_cluster.bootstrap_servers, topic_name)
    victim = lead[0]
    ledger = Ledger(topic_name, partitions=3)
    hole = fault_scale.pick(1, 3) * HOLE_S
    async with guarded(make_producer(proxy.bootstrap_servers, delivery_timeout_ms=30_000)) as p:
        await ledger.send_many(p, 300)
        await ledger.settle(15, "sends before the hole")
        proxy.node(victim).blackhole()
        start = time.monotonic()
        await ledger.send_many(p, 300)  # a third of them go to the black-holed leader
        # partitions led elsewhere keep being acknowledged during the hole
        others = [part for part, node in lead.items() if node != victim]
        for part in others:
            ok = await attempt(
                ledger.send_and_wait(p, part), REQUEST_TIMEOUT_MS / 1000 * 2 + MARGIN_S,
                f"send to partition {part} (leader {lead[part]}) during the hole",
            )
            assert ok.ok, ok.error
        spared = time.monotonic() - start
        await asyncio.sleep(max(0.0, hole - spared))
        assert proxy.node(victim).stats.swallowed["request"] > 0  # the hole was real
        await proxy.heal_all()
        healed = time.monotonic()
        await ledger.settle(30 + MARGIN_S, "sends through the hole")
        recovered = time.monotonic() - healed
    assert not ledger.failed, ledger.error_types()
    verify_exactly_once(ledger, await read_log(kafka_cluster.bootstrap_servers, topic_name, 3))
    print(f"cluster blackhole on node {victim}: other leaders acked within {spared:.2f} s; "
          f"recovered {recovered:.2f} s after heal")


@pytest.mark.cluster
async def test_cluster_blackhole_on_group_coordinator(
    cluster_proxy: FaultProxy, kafka_cluster: LocalKafka, topic_name: str
) -> None:
    proxy = cluster_proxy
    direct = kafka_cluster.bootstrap_servers
    group = f"g-{uuid.uuid4().hex[:8]}"
    coordinator = await coordinator_of(direct, group)
    others = [lst.node_id for lst in proxy.listeners if lst.node_id != coordinator]
    # partitions led by the other nodes: fetching is not what the hole takes away
    assignments = {0: [others[0], others[1], coordinator], 1: [others[1], others[0], coordinator]}
    await create_topic(direct, topic_name, assignments=assignments)
    ledger = Ledger(topic_name, partitions=2)
    await produce_direct(direct, ledger, 200)
    session_ms = 6000  # the broker's group.min.session.timeout.ms
    got: dict[int, list[tuple[int, bytes]]] = {}

    class Moves(ConsumerRebalanceListener):
        def __init__(self) -> None:
            self.events: list[str] = []

        async def on_partitions_assigned(self, assigned: frozenset[TopicPartition]) -> None:
            self.events.append("assigned")

        async def on_partitions_revoked(self, revoked: frozenset[TopicPartition]) -> None:
            self.events.append("revoked")

        async def on_partitions_lost(self, lost: frozenset[TopicPartition]) -> None:
            self.events.append("lost")

    moves = Moves()
    async with guarded(make_consumer(
        proxy.bootstrap_servers, group_id=group, enable_auto_commit=False,
        session_timeout_ms=session_ms, heartbeat_interval_ms=1000, max_poll_interval_ms=10_000,
    )) as c:
        c.subscribe([topic_name], listener=moves)
        await _consume_into(c, got, 200, 30, "getmany before the hole")
        assert moves.events == ["assigned"], moves.events
        first = await attempt(c.commit(), 6 + MARGIN_S, "commit before the hole")
        assert first.ok, first.error
        proxy.node(coordinator).blackhole()
        hole_start = time.monotonic()
        # the member keeps fetching from the other leaders while its coordinator is gone
        await produce_direct(direct, ledger, 100)
        await _consume_into(c, got, 300, 10, "getmany while the coordinator is gone")
        # a commit now: a typed error within default_api_timeout_ms (6 s), or success
        during = await attempt(c.commit(), 6 * 2 + MARGIN_S, "commit in the hole")
        assert_within(during, 6.0, "commit while the coordinator is black-holed")
        # stay away longer than the session: the broker drops the member
        await asyncio.sleep(max(0.0, session_ms / 1000 + 2 - (time.monotonic() - hole_start)))
        await proxy.heal_all()
        healed = time.monotonic()
        await produce_direct(direct, ledger, 100)
        # the member rejoins by itself, is assigned both partitions again, and commits
        await _catch_up_and_commit(c, got, {0: 200, 1: 200}, 30, "rejoin after the heal")
        recovered = time.monotonic() - healed
        events = list(moves.events)  # before stop() revokes everything
    # the broker dropped the member during the hole; it lost its partitions and rejoined
    assert events in (["assigned", "lost", "assigned"], ["assigned", "revoked", "assigned"]), (
        events
    )
    # at least once across the rejoin (re-delivery from the last commit is allowed)
    for partition, values in ledger.sent.items():
        offsets = {o for o, _ in got[partition]}
        assert offsets == set(range(len(values))), f"partition {partition} lost records"
    async with guarded(make_admin(direct)) as admin:
        committed = await admin.list_consumer_group_offsets(group)
    assert {tp.partition: om.offset for tp, om in committed.items()} == {
        p: len(v) for p, v in ledger.sent.items()
    }
    print(f"coordinator {coordinator} black-holed {session_ms / 1000 + 2:.0f} s: commit in "
          f"the hole -> {type(during.error).__name__ if during.error else 'ok'} after "
          f"{during.elapsed:.2f} s; rebalance events {events}; rejoined and committed "
          f"{recovered:.2f} s after heal")


async def test_blackhole_consumer_calls_end_typed_within_their_timeouts(
    proxy: FaultProxy, kafka: Any, topic_name: str
) -> None:
    """Every Consumer call that talks to the broker, made while it is black-holed, ends
    in a typed error (timing against timeout_ms: the test after this one)."""
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=1)
    ledger = Ledger(topic_name, partitions=1)
    await produce_direct(kafka.bootstrap_servers, ledger, 10)
    tp = TopicPartition(topic_name, 0)
    group = f"g-{uuid.uuid4().hex[:8]}"
    budget_ms = 2500
    async with guarded(make_consumer(
        proxy.bootstrap_servers, group_id=group, enable_auto_commit=False,
        default_api_timeout_ms=budget_ms,
    )) as c:
        c.assign([tp])  # a group id for commits, but no subscription
        assert await bounded(c.position(tp), 10, "position") == 0
        lst = proxy.listeners[0]
        lst.blackhole()
        calls: dict[str, Callable[[], Awaitable[Any]]] = {
            "end_offsets": lambda: c.end_offsets([tp], timeout_ms=budget_ms),
            "beginning_offsets": lambda: c.beginning_offsets([tp], timeout_ms=budget_ms),
            "offsets_for_times": lambda: c.offsets_for_times({tp: 0}, timeout_ms=budget_ms),
            "seek_to_end": lambda: c.seek_to_end(tp),
            "position": lambda: c.position(tp, timeout_ms=budget_ms),
            "committed": lambda: c.committed(tp, timeout_ms=budget_ms),
            "commit": lambda: c.commit({tp: 5}, timeout_ms=budget_ms),
            "topics": lambda: c.topics(),
        }
        # all at once: they are independent, and the hole is the same for each
        outcomes = await asyncio.gather(*(
            attempt(call(), budget_ms / 1000 * 4, f"Consumer.{name} in a hole")
            for name, call in calls.items()
        ))
        results = {
            name: (type(o.error).__name__ if o.error else "ok", round(o.elapsed, 2))
            for name, o in zip(calls, outcomes, strict=True)
        }
        print(f"consumer calls in a black hole: {results}")
        # position() is answered from the local state; everything else needs the broker
        assert results.pop("position")[0] == "ok"
        assert {kind for kind, _ in results.values()} == {"KafkaTimeoutError"}, results
        await lst.heal()
        assert await bounded(c.end_offsets([tp]), 10, "end_offsets after heal") == {tp: 10}



@pytest.mark.parametrize(
    "call",
    [
        "committed",
        "end_offsets",
        "commit",
        "offsets_for_times",
        "position",
    ],
)
async def test_consumer_call_keeps_its_timeout_when_request_timeout_is_longer(
    proxy: FaultProxy, kafka: Any, topic_name: str, fault_scale: FaultScale, call: str
) -> None:
    """timeout_ms=300 with request_timeout_ms=3000, the broker black-holed: the typed
    error must come after ~0.3 s, not after one or two request timeouts."""
    if call in ("commit", "offsets_for_times") and not fault_scale.full:
        pytest.skip("same defect as committed / end_offsets: full runs only")
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=1)
    tp = TopicPartition(topic_name, 0)
    async with guarded(make_consumer(
        proxy.bootstrap_servers, group_id=f"g-{uuid.uuid4().hex[:8]}", enable_auto_commit=False,
        request_timeout_ms=3000,
    )) as c:
        c.assign([tp])
        proxy.listeners[0].blackhole()
        calls: dict[str, Callable[[], Awaitable[Any]]] = {
            "committed": lambda: c.committed(tp, timeout_ms=300),
            "commit": lambda: c.commit({tp: 0}, timeout_ms=300),
            "end_offsets": lambda: c.end_offsets([tp], timeout_ms=300),
            "offsets_for_times": lambda: c.offsets_for_times({tp: 0}, timeout_ms=300),
            "position": lambda: c.position(tp, timeout_ms=300),
        }
        outcome = await attempt(calls[call](), 20, f"Consumer.{call}(timeout_ms=300)")
        assert isinstance(outcome.error, KafkaTimeoutError), outcome
        assert_within(outcome, 0.3, f"Consumer.{call}(timeout_ms=300)")


async def test_blackhole_producer_calls_end_typed_within_their_timeouts(
    proxy: FaultProxy, kafka: Any, topic_name: str
) -> None:
    """Producer calls that wait for the broker, made while it is black-holed."""
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=1)
    block_ms = 1000
    async with guarded(make_producer(
        proxy.bootstrap_servers, max_block_ms=block_ms, buffer_memory=64 * 1024,
        delivery_timeout_ms=3000,
    )) as p:
        await bounded(p.send_and_wait(topic_name, b"x", partition=0), 10, "send_and_wait")
        lst = proxy.listeners[0]
        lst.blackhole()
        unknown = f"{topic_name}-unknown"

        async def fill_buffer() -> None:
            while True:  # ~64 KiB fills the buffer; the next send waits for space
                await p.send(topic_name, b"v" * 1000, partition=0)

        async def send_unknown() -> None:
            await (await p.send(unknown, b"v"))

        calls: dict[str, tuple[Callable[[], Awaitable[Any]], int]] = {
            "partitions_for unknown topic": (lambda: p.partitions_for(unknown), block_ms),
            "send to unknown topic": (send_unknown, block_ms),
            "send with a full buffer": (fill_buffer, block_ms),
            "flush": (lambda: p.flush(timeout_ms=1000), 1000),
            "send_and_wait": (
                lambda: p.send_and_wait(topic_name, b"y", partition=0), 3000
            ),
        }
        outcomes = await asyncio.gather(*(  # independent calls, one hole: all at once
            attempt(call(), budget / 1000 * 4, f"Producer {name} in a hole")
            for name, (call, budget) in calls.items()
        ))
        results = {}
        late = []
        for (name, (_, budget)), outcome in zip(calls.items(), outcomes, strict=True):
            assert isinstance(outcome.error, KafkaTimeoutError), (name, outcome)
            results[name] = round(outcome.elapsed, 2)
            if outcome.elapsed > budget / 1000 + MARGIN_S:
                late.append(name)
        print(f"producer calls in a black hole (KafkaTimeoutError after s): {results}")
        assert not late, f"late: {late}; all: {results}"
        await lst.heal()
        await bounded(p.send_and_wait(topic_name, b"z", partition=0), 10, "send after heal")
