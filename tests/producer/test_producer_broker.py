"""The Producer against a real broker; what it writes is read back by librdkafka."""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import time
from typing import Any

import pytest

from aiokproto.errors import (
    IllegalStateError,
    KafkaConfigError,
    KafkaTimeoutError,
    RecordTooLargeError,
)
from aiokproto.producer import DeliveryFuture, Producer, RecordMetadata
from aiokproto.producer.producer import SerializationError
from tests.producer.helpers import FAST, consume, create_topic

ck = pytest.importorskip("confluent_kafka")


def producer(kafka: Any, **options: Any) -> Producer:
    return Producer(bootstrap_servers=kafka.bootstrap_servers, **{**FAST, **options})


@pytest.mark.kafka39
@pytest.mark.parametrize("acks", [0, 1, "all"])
async def test_acks(kafka: Any, topic_name: str, acks: Any) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    async with producer(kafka, acks=acks) as p:
        handles = [await p.send(topic_name, f"v{i}".encode()) for i in range(500)]
        metas = [await h for h in handles]
    if acks == 0:
        assert {m.offset for m in metas} == {-1}
    else:
        assert [m.offset for m in metas] == list(range(500))
    got = await asyncio.to_thread(consume, kafka.bootstrap_servers, topic_name, 500)
    assert [m.value() for m in got] == [f"v{i}".encode() for i in range(500)]


@pytest.mark.kafka39
async def test_idempotent_by_default_and_send_and_wait(kafka: Any, topic_name: str) -> None:
    async with producer(kafka) as p:
        assert p.options.enable_idempotence and p.options.acks == -1
        first = await p.send_and_wait(topic_name, b"one", key=b"k")
        second = await p.send_and_wait(topic_name, b"two", key=b"k")
    assert isinstance(first, RecordMetadata)
    assert (first.topic, second.offset - first.offset) == (topic_name, 1)
    got = await asyncio.to_thread(consume, kafka.bootstrap_servers, topic_name, 2)
    assert [m.value() for m in got] == [b"one", b"two"]


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
async def test_every_codec_reads_back_in_librdkafka(
    kafka: Any, topic_name: str, codec: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    values = [(f"value-{i}-" * (1 + i % 9)).encode() for i in range(2000)]
    async with producer(kafka, compression_type=codec, linger_ms=20) as p:
        delivery = await p.send_batch(topic_name, values, partition=0)
        metas = await delivery
    assert [m.offset for m in metas] == list(range(2000))
    got = await asyncio.to_thread(consume, kafka.bootstrap_servers, topic_name, 2000)
    assert [m.value() for m in got] == values


async def test_batch_delivery_wait_settles_without_metadata_and_raises_broker_errors(
    kafka: Any, topic_name: str
) -> None:
    """``BatchDelivery.wait()``: None once all is delivered; the broker's refusal of one
    batch raises; cancelling a waiter leaves the records to be delivered."""
    await create_topic(kafka.bootstrap_servers, topic_name, 2,
                       configs={"max.message.bytes": "2000"})
    async with producer(kafka, linger_ms=50) as p:
        ok = await p.send_batch(topic_name, [b"v" * 10] * 50, partition=0)
        waiter = asyncio.ensure_future(ok.wait())
        await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert await ok.wait() is None
        assert [m.offset for m in await ok] == list(range(50))  # still delivered, in full
        # partition 1 gets a batch the topic refuses (over max.message.bytes)
        bad = await p.send_batch(topic_name, [b"x" * 3000], partition=1)
        with pytest.raises(RecordTooLargeError):
            await bad.wait()
        assert bad.done()


async def test_compression_level_is_used(kafka: Any, topic_name: str) -> None:
    values = [b"abc" * 300] * 200
    async with producer(kafka, compression_type="zstd", compression_level=19) as p:
        await (await p.send_batch(topic_name, values))
    got = await asyncio.to_thread(consume, kafka.bootstrap_servers, topic_name, 200)
    assert [m.value() for m in got] == values


async def test_keys_values_headers_timestamps_byte_for_byte(
    kafka: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    rng = random.Random(5)
    sent = []
    for i in range(300):
        key = None if i % 7 == 0 else rng.randbytes(rng.randrange(0, 40))
        value = None if i % 11 == 0 else rng.randbytes(rng.randrange(0, 3000))
        headers = [("n", str(i).encode()), ("empty", b""), ("bin", rng.randbytes(8))][: i % 4]
        sent.append((key, value, headers, 1_600_000_000_000 + i * 1000))
    async with producer(kafka, linger_ms=10) as p:
        handles = [
            await p.send(topic_name, v, key=k, partition=0, timestamp_ms=ts, headers=h)
            for k, v, h, ts in sent
        ]
        metas = [await h for h in handles]
    assert [m.timestamp for m in metas] == [s[3] for s in sent]
    assert metas[1].serialized_key_size == len(sent[1][0] or b"")
    assert metas[0].serialized_key_size == -1
    got = await asyncio.to_thread(consume, kafka.bootstrap_servers, topic_name, 300)
    assert len(got) == 300
    for msg, (key, value, headers, ts) in zip(got, sent, strict=True):
        assert msg.key() == key and msg.value() == value
        assert (msg.headers() or []) == headers
        assert msg.timestamp() == (ck.TIMESTAMP_CREATE_TIME, ts)


async def test_log_append_time_topic(kafka: Any, topic_name: str) -> None:
    await create_topic(
        kafka.bootstrap_servers, topic_name,
        configs={"message.timestamp.type": "LogAppendTime"},
    )
    before = int(time.time() * 1000)
    async with producer(kafka) as p:
        meta = await p.send_and_wait(topic_name, b"v", timestamp_ms=1_000_000_000_000)
        batch = await (await p.send_batch(topic_name, [b"a", b"b"]))
    after = int(time.time() * 1000)
    assert meta.timestamp_type == 1 and before - 5000 <= meta.timestamp <= after + 5000
    assert {m.timestamp_type for m in batch} == {1}
    got = await asyncio.to_thread(consume, kafka.bootstrap_servers, topic_name, 3)
    assert got[0].timestamp() == (ck.TIMESTAMP_LOG_APPEND_TIME, meta.timestamp)


def _librdkafka_partitions(bootstrap: str, topic: str, keys: list[bytes]) -> list[int]:
    placed: list[int] = [-1] * len(keys)
    p = ck.Producer(
        {"bootstrap.servers": bootstrap, "partitioner": "murmur2_random", "linger.ms": 20}
    )

    def report(index: int) -> Any:
        def done(err: Any, msg: Any) -> None:
            assert err is None, err
            placed[index] = msg.partition()

        return done

    for i, key in enumerate(keys):
        while True:
            try:
                p.produce(topic, b"x", key=key, on_delivery=report(i))
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(60) == 0
    return placed


@pytest.mark.parametrize("partitions", [3, 7, 16])
async def test_keyed_placement_equals_librdkafka_murmur2_random(
    kafka: Any, topic_name: str, partitions: int
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=partitions)
    rng = random.Random(partitions)
    keys = [rng.randbytes(rng.randrange(1, 24)) for _ in range(10_000)]
    keys[:3] = [b"user-42", b"a", b"order-1234567"]
    theirs = await asyncio.to_thread(
        _librdkafka_partitions, kafka.bootstrap_servers, topic_name, keys
    )
    async with producer(kafka) as p:
        assert await p.partitions_for(topic_name) == set(range(partitions))
        delivery = await p.send_batch(topic_name, [b"y"] * len(keys), keys=keys)
        ours = [m.partition for m in await delivery]
        single = await p.send_and_wait(topic_name, b"z", key=b"user-42")
    assert ours == theirs
    assert single.partition == theirs[0]


async def test_null_keys_stick_then_spread(kafka: Any, topic_name: str) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=4)
    async with producer(kafka, batch_size=2048, linger_ms=1) as p:
        handles = [await p.send(topic_name, b"x" * 100) for _ in range(800)]
        parts = [(await h).partition for h in handles]
    runs = sum(1 for a, b in itertools.pairwise(parts) if a != b) + 1
    assert set(parts) == {0, 1, 2, 3}
    assert runs <= 800 * 116 // 2048 + 2  # switches only after batch_size bytes


async def test_custom_partitioner_and_serializers(kafka: Any, topic_name: str) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=3)
    calls: list[tuple[bytes | None, tuple[int, ...], tuple[int, ...]]] = []

    def last_partition(key: bytes | None, all_parts: Any, available: Any) -> int:
        calls.append((key, tuple(all_parts), tuple(available)))
        return int(all_parts[-1])

    async with producer(
        kafka,
        partitioner=last_partition,
        key_serializer=str.encode,
        value_serializer=lambda v: json.dumps(v).encode(),
    ) as p:
        meta = await p.send_and_wait(topic_name, {"a": 1}, key="k1")
        assert meta.partition == 2 and meta.serialized_key_size == 2
        meta2 = await p.send_and_wait(topic_name, {"b": 2}, key="k2", partition=0)
        assert meta2.partition == 0
    assert calls == [(b"k1", (0, 1, 2), (0, 1, 2))]
    got = await asyncio.to_thread(consume, kafka.bootstrap_servers, topic_name, 2, 3)
    assert sorted(m.value() for m in got) == [b'{"a": 1}', b'{"b": 2}']


async def test_send_batch_across_partitions_keeps_order(kafka: Any, topic_name: str) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=2)
    values = [f"{i}".encode() for i in range(5000)]
    async with producer(kafka, batch_size=4096) as p:
        d0 = await p.send_batch(topic_name, values, partition=0)
        d1 = await p.send_batch(topic_name, values[:10], partition=1, headers=[("h", b"1")])
        assert d0.record_count == 5000
        m0, m1 = await d0, await d1
    assert [m.offset for m in m0] == list(range(5000))
    assert [m.partition for m in m1] == [1] * 10
    got = await asyncio.to_thread(consume, kafka.bootstrap_servers, topic_name, 5010, 2)
    by_part: dict[int, list[Any]] = {0: [], 1: []}
    for msg in got:
        by_part[msg.partition()].append(msg)
    assert [m.value() for m in by_part[0]] == values
    assert [m.value() for m in by_part[1]] == values[:10]
    assert {tuple(m.headers()) for m in by_part[1]} == {(("h", b"1"),)}
    assert all(m.headers() is None for m in by_part[0])


async def test_flush_sends_lingering_records_now(kafka: Any, topic_name: str) -> None:
    async with producer(kafka, linger_ms=30_000) as p:
        await p.partitions_for(topic_name)
        handles = [await p.send(topic_name, b"v") for _ in range(10)]
        began = time.monotonic()
        await p.flush(timeout_ms=20_000)
        assert time.monotonic() - began < 10
        assert all(h.done() for h in handles)
        assert [h.result().offset for h in handles] == list(range(10))
        await p.flush()  # nothing buffered: returns at once


async def test_stop_delivers_pending_records_then_refuses_sends(
    kafka: Any, topic_name: str
) -> None:
    p = producer(kafka, linger_ms=30_000)
    await p.start()
    handles = [await p.send(topic_name, f"{i}".encode()) for i in range(1000)]
    await p.stop()
    assert [(await h).offset for h in handles] == list(range(1000))
    with pytest.raises(IllegalStateError, match="stopped"):
        await p.send(topic_name, b"late")
    with pytest.raises(IllegalStateError):
        await p.start()


async def test_too_large_record_fails_alone(kafka: Any, topic_name: str) -> None:
    async with producer(kafka, max_request_size=10_000) as p:
        before = await p.send(topic_name, b"a" * 100)
        big = await p.send(topic_name, b"b" * 20_000)
        after = await p.send(topic_name, b"c" * 100)
        with pytest.raises(RecordTooLargeError, match="max_request_size"):
            await big
        first, last = await before, await after
        assert last.offset == first.offset + 1
        with pytest.raises(RecordTooLargeError):
            await p.send_batch(topic_name, [b"x", b"y" * 20_000])


@pytest.mark.parametrize("bad", [2**63, 2**70, -2, -(2**63), 1.5, True, "1"])
async def test_an_out_of_range_timestamp_fails_alone_before_buffering(
    kafka: Any, topic_name: str, bad: Any
) -> None:
    """An int timestamp outside [-1, 2**63) was buffered unchecked and failed its whole
    batch when the sender built it: now the call raises and the neighbours go out."""
    async with producer(kafka, linger_ms=50) as p:
        before = await p.send(topic_name, b"a")
        with pytest.raises(SerializationError, match="timestamp_ms"):
            await p.send(topic_name, b"bad", timestamp_ms=bad)
        with pytest.raises(SerializationError, match="timestamp_ms"):
            await p.send_batch(topic_name, [b"bad"], timestamp_ms=bad)
        after = await p.send(topic_name, b"c", timestamp_ms=1_700_000_000_000)
        first, last = await before, await after
        assert last.offset == first.offset + 1 and last.timestamp == 1_700_000_000_000


async def test_bad_input_is_a_typed_error(kafka: Any, topic_name: str) -> None:
    from aiokproto.errors import KafkaError

    async with producer(kafka) as p:
        with pytest.raises(KafkaError, match="bytes"):
            await p.send(topic_name, "a str")
        with pytest.raises(KafkaError, match="headers"):
            await p.send(topic_name, b"v", headers=[("k",)])  # type: ignore[list-item]
        with pytest.raises(KafkaError, match="no partition 9"):
            # raised by send() once the topic is known, else by its handle
            await (await p.send(topic_name, b"v", partition=9))
        assert (await p.send_and_wait(topic_name, b"still fine")).offset >= 0


async def test_bad_config_fails_at_construction(kafka: Any) -> None:
    with pytest.raises(KafkaConfigError):
        producer(kafka, acks="some")
    with pytest.raises(KafkaConfigError):
        producer(kafka, enable_idempotence=True, acks=1)


async def test_unknown_topic_without_auto_create_times_out_clearly(
    kafka: Any, topic_name: str
) -> None:
    async with producer(kafka, allow_auto_create_topics=False, max_block_ms=1500) as p:
        began = time.monotonic()
        # send() returns at once; the record fails after max_block_ms
        handle = await p.send(topic_name, b"v")
        with pytest.raises(KafkaTimeoutError, match=f"{topic_name}.*max_block_ms"):
            await handle
        assert 1.4 < time.monotonic() - began < 10
        with pytest.raises(KafkaTimeoutError):
            await p.partitions_for(topic_name)


def _metadata_requests(p: Producer) -> list[int]:
    """Count the producer's Metadata requests from now on: ``[n]``."""
    meta = p._client.metadata  # type: ignore[union-attr]
    sent = [0]
    real = meta._send

    async def counting(request: Any) -> Any:
        sent[0] += 1
        return await real(request)

    meta._send = counting  # type: ignore[method-assign]
    return sent


async def test_a_send_to_a_missing_topic_does_not_keep_asking_for_it(
    kafka: Any, topic_name: str
) -> None:
    # It asked for the topic after every answer while it waited (about 6,500 Metadata
    # requests a second) and then about ten a second for as long as the producer ran.
    async with producer(
        kafka, allow_auto_create_topics=False, max_block_ms=1000, retry_backoff_ms=100
    ) as p:
        sent = _metadata_requests(p)
        calls = [
            p.send_and_wait(topic_name, b"v"),
            p.send_and_wait(topic_name, b"w"),
            p.partitions_for(topic_name),
        ]
        outcomes = await asyncio.gather(*calls, return_exceptions=True)
        assert all(isinstance(o, KafkaTimeoutError) for o in outcomes), outcomes
        assert sent[0] <= 15, sent[0]  # one per retry_backoff, shared by the three calls
        assert topic_name not in p._client.metadata.tracked  # type: ignore[union-attr]
        sent[0] = 0
        await asyncio.sleep(2)
        # a poll already scheduled and the calls' last wake-ups; before: 20 (10 a second)
        assert sent[0] <= 4, sent[0]
        # asked for again when wanted again
        await create_topic(kafka.bootstrap_servers, topic_name)
        assert (await (await p.send(topic_name, b"x"))).offset == 0


async def test_a_topic_not_sent_to_for_metadata_max_idle_ms_is_dropped(
    kafka: Any, topic_name: str
) -> None:
    gone, kept = topic_name, topic_name + "-kept"
    await create_topic(kafka.bootstrap_servers, gone)
    await create_topic(kafka.bootstrap_servers, kept)
    async with producer(kafka, metadata_max_idle_ms=5000, linger_ms=0) as p:
        meta = p._client.metadata  # type: ignore[union-attr]
        await (await p.send(gone, b"v"))
        assert gone in meta.tracked
        assert p.metrics().find("record-send-total", tags={"topic": gone})
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20
        while gone in meta.tracked:  # within idle + idle/2 of the last send
            assert loop.time() < deadline, "an idle topic stayed in the metadata"
            await (await p.send(kept, b"k"))  # a topic in use stays
            await asyncio.sleep(0.5)
        assert kept in meta.tracked
        assert not p.metrics().find("record-send-total", tags={"topic": gone})
        assert (await (await p.send(gone, b"again"))).offset == 1  # looked up again
        assert gone in meta.tracked


async def test_metadata_max_idle_ms_has_javas_lower_bound(kafka: Any) -> None:
    with pytest.raises(KafkaConfigError, match="metadata_max_idle_ms"):
        producer(kafka, metadata_max_idle_ms=4999)


async def test_delivery_callbacks_fire_once_per_record(kafka: Any, topic_name: str) -> None:
    reports: list[RecordMetadata | BaseException] = []

    def report(handle: DeliveryFuture) -> None:
        error = handle.exception()
        reports.append(error if error is not None else handle.result())

    async with Producer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=1) as producer:
        for i in range(50):
            (await producer.send(topic_name, b"v%d" % i)).add_done_callback(report)
        await producer.flush()
        await asyncio.sleep(0)  # callbacks run on the loop right after the batch resolves
    assert len(reports) == 50
    assert [r.offset for r in reports if isinstance(r, RecordMetadata)] == list(range(50))


async def test_a_delivery_callback_gets_a_handle_equal_to_its_own(
    kafka: Any, topic_name: str
) -> None:
    """The pending-set pattern (``pending.add(h); h.add_done_callback(pending.discard)``)
    empties the set: the handle passed back is equal to (and hashes like) the one the
    callback was added to, though the client keeps no object per record meanwhile."""
    pending: set[DeliveryFuture] = set()
    got: list[tuple[DeliveryFuture, DeliveryFuture]] = []
    async with Producer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=20) as producer:
        handles = [await producer.send(topic_name, b"v%d" % i, key=b"k") for i in range(300)]
        for h in handles:
            pending.add(h)
            h.add_done_callback(pending.discard)
            h.add_done_callback(lambda back, h=h: got.append((h, back)))
        assert len(pending) == 300  # distinct records are distinct handles
        await producer.flush()
        await asyncio.sleep(0)
    assert not pending
    assert len(got) == 300
    for mine, back in got:
        assert back == mine and hash(back) == hash(mine)
        assert back.result() == mine.result()  # same offset, timestamp and sizes
    assert [m.result().offset for m, _ in got] == list(range(300))
    assert handles[0] != handles[1] and handles[0] != "not a handle"


async def test_records_awaiting_delivery_with_a_callback_keep_no_object_each(
    kafka: Any, topic_name: str
) -> None:
    """Until delivery, a callback costs the collector nothing per record: no handle or
    wrapper stays alive (the cyclic GC walking them tripled the send loop's cost)."""
    import gc

    acked: list[int] = []

    def done(handle: DeliveryFuture) -> None:
        acked.append(handle.result().offset)

    async with Producer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=60_000) as p:
        await p.partitions_for(topic_name)
        for i in range(2_000):
            (await p.send(topic_name, b"v%d" % i)).add_done_callback(done)
        gc.collect()  # what earlier tests left for the collector is not counted
        alive = [o for o in gc.get_objects() if type(o) is DeliveryFuture]
        assert not alive
        await p.flush()
        await asyncio.sleep(0)
    assert sorted(acked) == list(range(2_000))


async def test_a_raising_delivery_callback_does_not_starve_the_others(
    kafka: Any, topic_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[int] = []

    def bad(handle: DeliveryFuture) -> None:
        raise RuntimeError("user bug")

    async with Producer(bootstrap_servers=kafka.bootstrap_servers) as producer:
        first = await producer.send(topic_name, b"a")
        second = await producer.send(topic_name, b"b")
        first.add_done_callback(bad)
        second.add_done_callback(lambda h: seen.append(h.result().offset))
        await producer.flush()
        await asyncio.sleep(0)
        # a handle already done still calls back (on the next loop turn)
        first.add_done_callback(lambda h: seen.append(h.result().offset))
        await asyncio.sleep(0)
    assert seen == [1, 0]
    assert "a delivery callback raised" in caplog.text


def test_a_call_from_another_event_loop_is_refused_at_once(kafka: Any, topic_name: str) -> None:
    # asyncio.run(p.start()) then asyncio.run(p.send_and_wait(...)): the producer's tasks
    # died with the first loop. send_and_wait() waited max_block_ms (60 s) for a new
    # topic's metadata, then blamed the topic; stop() failed inside asyncio.
    p = producer(kafka)
    asyncio.run(p.start())

    async def in_a_new_loop(call: Any) -> None:
        with pytest.raises(IllegalStateError, match="started in another event loop"):
            await asyncio.wait_for(call(), 20)  # a generous bound: it used to hang

    asyncio.run(in_a_new_loop(lambda: p.send_and_wait(topic_name, b"v")))
    asyncio.run(in_a_new_loop(p.flush))
    asyncio.run(in_a_new_loop(p.stop))
