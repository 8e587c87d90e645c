"""Sender behaviour under scripted broker faults (tests/fake_broker.py, in addition to the
real-broker tests): back-pressure, retries, KIP-951 hints, epoch bumps, expiry."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from aiokproto.errors import KafkaTimeoutError, NotEnoughReplicasError
from aiokproto.net.connection import BrokerConnection
from aiokproto.producer import Producer
from aiokproto.protocol.messages.init_producer_id import InitProducerIdResponse
from aiokproto.protocol.messages.metadata import (
    MetadataResponse,
    MetadataResponsePartition,
)
from aiokproto.protocol.messages.produce import (
    ProduceResponse,
    ProduceResponseLeaderIdAndEpoch,
    ProduceResponsePartitionProduceResponse,
    ProduceResponseTopicProduceResponse,
)
from aiokproto.records import read_batches
from tests.fake_broker import FakeBroker, Received, Reply, metadata_naming

TOPIC = "t"
TOPIC_ID = uuid.UUID(int=0x1234)
FAST: dict[str, Any] = {
    "retry_backoff_ms": 20,
    "retry_backoff_max_ms": 100,
    "default_api_timeout_ms": 5000,
    "reconnect_backoff_ms": 20,
}

ProduceScript = Callable[[Received, int], Reply | None]


class FakeCluster:
    """One fake broker leading ``t[0]``; Produce answers come from ``on_produce``."""

    def __init__(self, on_produce: ProduceScript | None = None) -> None:
        self.on_produce = on_produce
        self.produces: list[Received] = []
        self.inits: list[Received] = []
        self.epoch = 0
        self.next_offset = 0
        self.broker = FakeBroker(self.script)

    async def __aenter__(self) -> FakeCluster:
        await self.broker.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.broker.__aexit__(*exc)

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    def script(self, rec: Received) -> Reply | None:
        if rec.api_key == 3:
            return Reply(response=self.metadata())
        if rec.api_key == 22:
            self.inits.append(rec)
            response = InitProducerIdResponse(producer_id=77, producer_epoch=len(self.inits) - 1)
            return Reply(response=response)
        if rec.api_key == 0:
            self.produces.append(rec)
            if self.on_produce is not None:
                reply = self.on_produce(rec, len(self.produces))
                if reply is not None:
                    return reply
            return Reply(response=self.answer(rec, 0))
        return None

    def metadata(self) -> MetadataResponse:
        return metadata_naming(self.broker, {TOPIC: TOPIC_ID}, leader_epoch=self.epoch)

    def answer(self, rec: Received, error: int, **extra: Any) -> ProduceResponse:
        part_data = rec.request.topic_data[0].partition_data[0]
        count = sum(b.record_count for b in read_batches(bytes(part_data.records)))
        base = self.next_offset if not error else -1
        if not error:
            self.next_offset += count
        return ProduceResponse(
            responses=[
                ProduceResponseTopicProduceResponse(
                    name=TOPIC,
                    topic_id=TOPIC_ID,
                    partition_responses=[
                        ProduceResponsePartitionProduceResponse(
                            index=0, error_code=error, base_offset=base, **extra
                        )
                    ],
                )
            ]
        )


def batches_of(rec: Received) -> list[Any]:
    data = rec.request.topic_data[0].partition_data[0].records
    return list(read_batches(bytes(data)))


async def test_full_buffer_blocks_send_then_raises_after_max_block_ms() -> None:
    async with FakeCluster(lambda rec, n: Reply("silent")) as fake:
        p = Producer(
            bootstrap_servers=fake.bootstrap,
            buffer_memory=20_000,
            max_block_ms=500,
            batch_size=2048,
            linger_ms=0,
            acks=1,
            **FAST,
        )
        await p.start()
        try:
            handles = []
            began = time.monotonic()
            with pytest.raises(KafkaTimeoutError, match=r"buffer_memory.*max_block_ms"):
                for _ in range(1000):  # bounded: the buffer holds ~170 such records
                    handles.append(await p.send(TOPIC, b"x" * 100))
                    assert p._acc is not None and p._acc.used <= 20_000
            assert 0.4 < time.monotonic() - began < 5
            assert 100 < len(handles) < 200
            assert len(fake.produces) <= 5  # in flight per connection, never more
        finally:
            await p.stop(timeout_ms=100)
        for handle in handles:
            with pytest.raises(KafkaTimeoutError, match="stopped"):
                await handle


async def test_retriable_error_then_success() -> None:
    def script(rec: Received, n: int) -> Reply | None:
        if n == 1:
            return Reply(response=fake.answer(rec, NotEnoughReplicasError.errno))
        return None

    async with FakeCluster(script) as fake:
        async with Producer(bootstrap_servers=fake.bootstrap, **FAST) as p:
            meta = await p.send_and_wait(TOPIC, b"v")
    assert meta.offset == 0 and len(fake.produces) == 2
    first, second = (batches_of(r)[0] for r in fake.produces)
    # same producer id, epoch and sequence on the retry: the broker can de-duplicate
    assert (first.producer_id, first.producer_epoch, first.base_sequence) == (77, 0, 0)
    assert (second.producer_id, second.producer_epoch, second.base_sequence) == (77, 0, 0)


async def test_not_leader_with_kip951_hint_is_retried_at_once() -> None:
    def script(rec: Received, n: int) -> Reply | None:
        if n == 1:
            fake.epoch = 0  # metadata keeps answering the old epoch
            hint = ProduceResponseLeaderIdAndEpoch(leader_id=1, leader_epoch=5)
            return Reply(response=fake.answer(rec, 6, current_leader=hint))
        return None

    async with FakeCluster(script) as fake:
        async with Producer(
            bootstrap_servers=fake.bootstrap, **{**FAST, "retry_backoff_ms": 3000,
                                                 "retry_backoff_max_ms": 3000}
        ) as p:
            began = time.monotonic()
            meta = await p.send_and_wait(TOPIC, b"v")
            assert time.monotonic() - began < 2.5  # no 3 s back-off: the hint was used
            assert p._client is not None
            assert p._client.metadata.snapshot.partition(TOPIC, 0).leader_epoch == 5  # type: ignore[union-attr]
    assert meta.offset == 0 and len(fake.produces) == 2


async def test_out_of_order_sequence_at_the_head_bumps_the_epoch() -> None:
    def script(rec: Received, n: int) -> Reply | None:
        if n == 1:
            return Reply(response=fake.answer(rec, 45))  # OUT_OF_ORDER_SEQUENCE_NUMBER
        return None

    async with FakeCluster(script) as fake:
        async with Producer(bootstrap_servers=fake.bootstrap, **FAST) as p:
            meta = await p.send_and_wait(TOPIC, b"v")
    assert meta.offset == 0
    # KIP-360 (as the Java producer): the idempotent producer takes the next epoch of
    # its id itself; an InitProducerId would only give it a new producer id
    assert len(fake.inits) == 1
    resent = batches_of(fake.produces[-1])[0]
    assert (resent.producer_id, resent.producer_epoch, resent.base_sequence) == (77, 1, 0)


def versions_without_kip360(fake: FakeCluster, rec: Received) -> Reply:
    """ApiVersions of a broker older than Kafka 2.5: InitProducerId up to v2."""
    response = fake.broker.default_response(rec)
    for api in response.api_keys:
        if api.api_key == 22:
            api.max_version = 2
    return Reply(response=response)


async def test_an_old_broker_gets_an_init_producer_id_for_the_bump() -> None:
    def script(rec: Received) -> Reply | None:
        if rec.api_key == 18:
            return versions_without_kip360(fake, rec)
        if rec.api_key == 0 and not fake.produces:
            fake.produces.append(rec)
            return Reply(response=fake.answer(rec, 45))  # OUT_OF_ORDER: bump
        return fake.script(rec)

    fake = FakeCluster()
    fake.broker.script = script
    async with fake:
        async with Producer(bootstrap_servers=fake.bootstrap, **FAST) as p:
            meta = await p.send_and_wait(TOPIC, b"v")
    assert meta.offset == 0 and len(fake.inits) == 2
    assert fake.inits[1].request.producer_id == -1  # v2 cannot carry it
    resent = batches_of(fake.produces[-1])[0]
    assert (resent.producer_epoch, resent.base_sequence) == (1, 0)


async def test_batches_failing_together_cost_one_epoch_bump() -> None:
    """20 batches refused for good (INVALID_RECORD), the first ones pipelined: one
    epoch bump for them, taken locally (no InitProducerId); the later ones, sent alone,
    give their sequence numbers back instead; the next record goes under epoch 1."""
    failing = {"on": False}

    def script(rec: Received, n: int) -> Reply | None:
        if failing["on"]:
            return Reply(response=fake.answer(rec, 87))  # INVALID_RECORD: not retriable
        return None

    async with FakeCluster(script) as fake:
        async with Producer(
            bootstrap_servers=fake.bootstrap, batch_size=256, linger_ms=0, **FAST
        ) as p:
            meta = await p.send_and_wait(TOPIC, b"confirmed")  # pipelining allowed now
            failing["on"] = True
            handles = [await p.send(TOPIC, b"%03d" % i * 30) for i in range(20)]
            await asyncio.gather(*handles, return_exceptions=True)
            assert all(h.exception() is not None for h in handles)
            failing["on"] = False
            after = await p.send_and_wait(TOPIC, b"after")
    assert meta.offset == 0 and after.offset == 1
    assert len(fake.inits) == 1
    epochs = [batches_of(r)[0].producer_epoch for r in fake.produces]
    assert max(epochs) == 1, epochs  # one bump for the wave, none after
    last = batches_of(fake.produces[-1])[0]
    assert last.base_sequence == 0 and last.producer_epoch == max(epochs)


async def test_order_is_kept_when_a_pipelined_batch_fails() -> None:
    """Batch 1 fails retriably while 2..n are in flight (they get OUT_OF_ORDER): all are
    re-sent in sequence order and nothing is duplicated or reordered."""
    state = {"failed": False}
    written: list[bytes | None] = []

    def script(rec: Received, n: int) -> Reply | None:
        batch = batches_of(rec)[0]
        if not state["failed"] and batch.base_sequence == 0:
            state["failed"] = True
            return Reply(response=fake.answer(rec, NotEnoughReplicasError.errno))
        expected = fake.next_offset  # the broker's next sequence equals its offset here
        if batch.base_sequence != expected:
            return Reply(response=fake.answer(rec, 45))
        written.extend(r.value for r in batch)
        return None

    async with FakeCluster(script) as fake:
        async with Producer(
            bootstrap_servers=fake.bootstrap, batch_size=256, linger_ms=0, **FAST
        ) as p:
            handles = [await p.send(TOPIC, f"{i:03d}".encode() * 10) for i in range(60)]
            metas = [await h for h in handles]
    assert [m.offset for m in metas] == list(range(60))
    assert len(fake.inits) == 1  # no epoch bump was needed
    assert written == [f"{i:03d}".encode() * 10 for i in range(60)]
    assert len(fake.produces) > len({batches_of(r)[0].base_sequence for r in fake.produces})


async def test_silent_broker_expires_records_after_delivery_timeout() -> None:
    async with FakeCluster(lambda rec, n: Reply("silent")) as fake:
        async with Producer(
            bootstrap_servers=fake.bootstrap,
            request_timeout_ms=300,
            delivery_timeout_ms=1500,
            linger_ms=0,
            **FAST,
        ) as p:
            began = time.monotonic()
            handle = await p.send(TOPIC, b"v")
            with pytest.raises(KafkaTimeoutError, match="delivery_timeout_ms"):
                await asyncio.wait_for(handle, 10)
            assert time.monotonic() - began < 5
            assert len(fake.produces) >= 2  # it was retried in between


def buffered_records(p: Producer) -> int:
    assert p._acc is not None
    return sum(b.record_count for b in p._acc.incomplete)


async def test_a_cancelled_send_batch_has_buffered_nothing() -> None:
    # A silent broker keeps the buffer full: send_batch waits for space, is cancelled,
    # and must leave nothing behind (the caller will retry it).
    async with FakeCluster(lambda rec, n: Reply("silent")) as fake:
        p = Producer(
            bootstrap_servers=fake.bootstrap,
            buffer_memory=20_000,
            max_block_ms=5000,
            batch_size=2048,
            linger_ms=0,
            acks=1,
            **FAST,
        )
        await p.start()
        try:
            assert p._acc is not None
            while p._acc.used + 1100 <= 20_000:
                await p.send(TOPIC, b"x" * 1000)
            used, records = p._acc.used, buffered_records(p)
            call = asyncio.ensure_future(p.send_batch(TOPIC, [b"y" * 1000] * 10))
            await asyncio.sleep(0.2)
            assert not call.done()  # waiting for buffer space
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            assert (p._acc.used, buffered_records(p)) == (used, records)
            # and a call that cannot get space in time fails typed, also buffering nothing
            with pytest.raises(KafkaTimeoutError, match="buffer_memory"):
                await p.send_batch(TOPIC, [b"z" * 1000] * 10)
            assert (p._acc.used, buffered_records(p)) == (used, records)
        finally:
            await p.stop(timeout_ms=100)


async def test_a_send_is_never_cancelled_after_it_buffered_its_record() -> None:
    # A send that fills a batch used to yield once *after* buffering: a cancellation
    # there raised CancelledError for a record that would still be delivered.
    async with FakeCluster(lambda rec, n: Reply("silent")) as fake:  # nothing completes
        async with Producer(
            bootstrap_servers=fake.bootstrap, batch_size=512, linger_ms=1000, **FAST
        ) as p:
            for attempt in range(40):
                before = buffered_records(p)
                task = asyncio.ensure_future(p.send(TOPIC, b"%03d" % attempt * 40))
                await asyncio.sleep(0)  # let it run up to its first suspension
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    assert buffered_records(p) == before, f"attempt {attempt}"
            await p.stop(timeout_ms=100)


async def test_send_and_wait_never_outlives_delivery_timeout() -> None:
    # The broker answers each Produce after 1.8 s (within the request's own timeout):
    # the caller hears about the 1 s delivery timeout at 1 s, not when the answer comes.
    async def script(rec: Received) -> Reply | None:
        if rec.api_key == 0:
            fake.produces.append(rec)
            await asyncio.sleep(1.8)
            return Reply(response=fake.answer(rec, 0))
        return fake.script(rec)

    fake = FakeCluster()
    fake.broker.script = script
    async with fake:
        async with Producer(
            bootstrap_servers=fake.bootstrap,
            request_timeout_ms=1000,
            delivery_timeout_ms=1000,
            linger_ms=0,
            **FAST,
        ) as p:
            began = time.monotonic()
            with pytest.raises(KafkaTimeoutError, match="delivery_timeout_ms"):
                await p.send_and_wait(TOPIC, b"v")
            assert time.monotonic() - began < 1.5


async def test_a_huge_throttle_does_not_stretch_delivery() -> None:
    # One flipped bit in throttle_time_ms (2**31-1 ms) must not park later sends.
    def script(rec: Received, n: int) -> Reply | None:
        if n == 1:
            answer = fake.answer(rec, 0)
            answer.throttle_time_ms = 0x7FFFFFFF
            return Reply(response=answer)
        return None

    async with FakeCluster() as fake:
        fake.on_produce = script
        async with Producer(
            bootstrap_servers=fake.bootstrap,
            request_timeout_ms=1000,
            delivery_timeout_ms=2000,
            linger_ms=0,
            **FAST,
        ) as p:
            await p.send_and_wait(TOPIC, b"first")
            began = time.monotonic()
            async with asyncio.timeout(5):
                try:
                    await p.send_and_wait(TOPIC, b"second")
                except KafkaTimeoutError:
                    pass  # a typed error in time is fine; a hang is not
            assert time.monotonic() - began < 2.5


async def test_a_throttled_produce_answer_holds_back_the_next_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """KIP-219: a Produce answer (read for send_now) carries throttle_time_ms: the next
    request waits it out (the sender's request then takes send(), which waits), and
    once it is over requests are written in the drain loop's step again."""
    arrived: list[float] = []

    def script(rec: Received, n: int) -> Reply | None:
        arrived.append(time.monotonic())
        if n == 2:
            answer = fake.answer(rec, 0)
            answer.throttle_time_ms = 400
            return Reply(response=answer)
        return None

    written_now: list[int] = []
    send_now = BrokerConnection.send_now

    def counting(conn: BrokerConnection, request: Any, *args: Any, **kwargs: Any) -> None:
        written_now.append(request.API_KEY)
        send_now(conn, request, *args, **kwargs)

    monkeypatch.setattr(BrokerConnection, "send_now", counting)
    async with FakeCluster(script) as fake:
        async with Producer(bootstrap_servers=fake.bootstrap, linger_ms=0, **FAST) as p:
            await p.send_and_wait(TOPIC, b"first")
            before = written_now.count(0)
            throttled = await p.send_and_wait(TOPIC, b"throttled")
            answered = time.monotonic()
            assert written_now.count(0) == before + 1  # written now
            held = await p.send_and_wait(TOPIC, b"held")
            assert arrived[2] - answered >= 0.35  # after the broker's throttle time
            assert written_now.count(0) == before + 1  # by send(): it waited
            after = await p.send_and_wait(TOPIC, b"after")
            assert written_now.count(0) == before + 2  # the throttle over: written now
    assert [throttled.offset, held.offset, after.offset] == [1, 2, 3]


async def test_metadata_with_impossible_partition_numbers_is_a_typed_error() -> None:
    # Partitions 1 and 2 but no 0: a keyed send used to raise a bare KeyError.
    fake = FakeCluster()

    def script(rec: Received) -> Reply | None:
        if rec.api_key == 3:
            answer = fake.metadata()
            answer.topics[0].partitions = [
                MetadataResponsePartition(
                    partition_index=i, leader_id=fake.broker.node_id, leader_epoch=0
                )
                for i in (1, 2)
            ]
            return Reply(response=answer)
        return fake.script(rec)

    fake.broker.script = script
    async with fake:
        async with Producer(bootstrap_servers=fake.bootstrap, max_block_ms=500, **FAST) as p:
            with pytest.raises(KafkaTimeoutError, match="not present in metadata"):
                # the send returns at once (the topic is not known); its record fails
                await (await p.send(TOPIC, b"v", key=b"some key"))


async def test_an_epoch_bump_answered_with_the_same_epoch_backs_off() -> None:
    # A broken broker answers InitProducerId with the epoch the producer already has:
    # asking again at once would spin; it backs off, and goes on once a new one comes.
    state = {"stuck": True}

    def script(rec: Received) -> Reply | None:
        if rec.api_key == 18:  # a broker without KIP-360: the bump is a request
            return versions_without_kip360(fake, rec)
        if rec.api_key == 22:
            fake.inits.append(rec)
            epoch = 0 if state["stuck"] else 1
            return Reply(response=InitProducerIdResponse(producer_id=77, producer_epoch=epoch))
        if rec.api_key == 0:
            fake.produces.append(rec)
            if len(fake.produces) == 1:
                return Reply(response=fake.answer(rec, 45))  # OUT_OF_ORDER: bump
            return Reply(response=fake.answer(rec, 0))
        return fake.script(rec)

    fake = FakeCluster()
    fake.broker.script = script
    async with fake:
        async with Producer(bootstrap_servers=fake.bootstrap, **FAST) as p:
            handle = await p.send(TOPIC, b"v")
            await asyncio.sleep(1.5)
            # backing off (20 ms doubling to 100 ms) is ~16 requests; a spin is thousands
            assert len(fake.inits) < 40, f"{len(fake.inits)} InitProducerId in 1.5 s"
            state["stuck"] = False
            meta = await asyncio.wait_for(handle, 10)
    assert meta.offset == 0
    resent = batches_of(fake.produces[-1])[0]
    assert resent.producer_epoch == 1


async def test_a_connection_dropped_mid_request_resends_every_batch_in_order() -> None:
    """Requests are written from the drain loop's step (send_now) and answered from the
    read path: a broker that drops the connection with several of them in flight
    releases each one, and every batch goes again, in order, once."""
    written: list[bytes | None] = []

    def script(rec: Received, n: int) -> Reply | None:
        if n == 3:
            return Reply("close")  # requests 3.. are in flight on the dying socket
        batch = batches_of(rec)[0]
        if batch.base_sequence != fake.next_offset:
            return Reply(response=fake.answer(rec, 45))  # out of order: not written
        written.extend(r.value for r in batch)
        return None

    async with FakeCluster(script) as fake:
        async with Producer(
            bootstrap_servers=fake.bootstrap, batch_size=256, linger_ms=0, **FAST
        ) as p:
            handles = [await p.send(TOPIC, f"{i:03d}".encode() * 10) for i in range(60)]
            metas = await asyncio.wait_for(asyncio.gather(*handles), 20)
            assert p._sender is not None and p._sender.requests_in_flight == 0
    assert [m.offset for m in metas] == list(range(60))
    assert written == [f"{i:03d}".encode() * 10 for i in range(60)]
    assert fake.broker.connections >= 2


async def test_stopping_with_requests_in_flight_resolves_every_handle_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """stop() while requests written in the drain loop's step await answers: their
    handles fail with the stop's error, and the connections' death afterwards calls
    back into nothing (no retry, no error logged)."""
    async with FakeCluster(lambda rec, n: Reply("silent")) as fake:
        p = Producer(bootstrap_servers=fake.bootstrap, linger_ms=0, batch_size=256, **FAST)
        await p.start()
        handles = [await p.send(TOPIC, b"v" * 100) for _ in range(20)]
        await fake.broker.wait_received(lambda r: sum(x.api_key == 0 for x in r) >= 1)
        assert p._sender is not None and p._sender.requests_in_flight >= 1
        began = time.monotonic()
        await p.stop(timeout_ms=200)
        assert time.monotonic() - began < 5
        for handle in handles:
            with pytest.raises(KafkaTimeoutError, match="stopped before"):
                await handle
        await asyncio.sleep(0.05)
    assert not [r for r in caplog.records if r.levelno >= 40], caplog.records


async def test_ten_thousand_concurrent_sends_at_linger_0_each_land_once_where_told() -> None:
    """10,000 tasks sending at once at linger 0 (requests written in the drain loop's
    step, five in flight): every record is written once, and each handle's offset is
    where its record landed (tasks that suspend in send() resume in their own order)."""
    written: list[bytes | None] = []

    def script(rec: Received, n: int) -> Reply | None:
        for batch in batches_of(rec):
            written.extend(r.value for r in batch)
        return None

    async with FakeCluster(script) as fake:
        # 16 KB batches: with the 1 MB default one batch took every record
        async with Producer(
            bootstrap_servers=fake.bootstrap, linger_ms=0, batch_size=16_384, **FAST
        ) as p:

            async def one(i: int) -> Any:
                return await (await p.send(TOPIC, b"%05d" % i))

            metas = await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(10_000))), 60)
            assert p._sender is not None and p._sender.requests_in_flight == 0
    assert sorted(written) == [b"%05d" % i for i in range(10_000)]
    assert [written[m.offset] for m in metas] == [b"%05d" % i for i in range(10_000)]
    assert len(fake.produces) > 5  # several requests, pipelined
