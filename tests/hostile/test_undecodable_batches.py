"""A broker serving a batch the client cannot decode (fake broker: a real one refuses
an unknown codec on produce and never serves a bad CRC on demand).

Before, a batch with compression id 5-7 and a valid CRC raised
UnsupportedCompressionTypeError once, and the next call handed out the records after
it, stepping the position over the batch without a word. Now every call raises
UndecodableBatchError naming the partition and the batch's offsets, the position stays
in front of it, and a seek past it resumes.
"""

from __future__ import annotations

import asyncio

import pytest

from aiokproto import Consumer, ShareConsumer
from aiokproto.consumer.errors import UndecodableBatchError
from aiokproto.protocol.messages.fetch import (
    FetchableTopicResponse,
    FetchResponse,
    FetchResponsePartitionData,
)
from aiokproto.protocol.messages.share_acknowledge import ShareAcknowledgeResponse
from aiokproto.protocol.messages.share_fetch import (
    ShareFetchableTopicResponse,
    ShareFetchResponse,
    ShareFetchResponseAcquiredRecords,
    ShareFetchResponsePartitionData,
)
from aiokproto.structs import TopicPartition
from tests.consumer.batches import batch, undecodable
from tests.fake_broker import FakeBroker, Received, Reply, metadata_naming
from tests.hostile.test_error_floods import BACKOFF, TOPIC, TOPIC_ID
from tests.hostile.test_error_floods import _cluster as share_cluster
from tests.hostile.test_error_floods import _share_member as share_member

TP = TopicPartition(TOPIC, 0)


def _serving(log: list[bytes] | dict[int, list[bytes]]) -> FakeBroker:
    """One broker leading t-0 (and t-1...), whose log is ``log`` (whole batches, in
    offset order; a dict: one log per partition)."""
    logs = log if isinstance(log, dict) else {0: log}
    spans: dict[int, list[tuple[int, int, bytes]]] = {}
    for partition, batches in logs.items():
        spans[partition] = []
        for raw in batches:
            first = int.from_bytes(raw[0:8], "big")
            spans[partition].append((first, first + int.from_bytes(raw[23:27], "big"), raw))

    async def script(rec: Received) -> Reply | None:
        if rec.api_key == 3:
            return Reply(response=metadata_naming(fake, {TOPIC: TOPIC_ID}, partitions=len(logs)))
        if rec.api_key != 1:
            return None
        parts = []
        for topic in rec.request.topics:
            for p in topic.partitions:
                ours = spans[p.partition]
                data = b"".join(raw for _, last, raw in ours if last >= p.fetch_offset)
                parts.append(
                    FetchResponsePartitionData(
                        partition_index=p.partition, high_watermark=ours[-1][1] + 1, records=data
                    )
                )
        if not any(p.records for p in parts):
            await asyncio.sleep(rec.request.max_wait_ms / 1000)  # a long poll, caught up
        return Reply(
            response=FetchResponse(
                responses=[FetchableTopicResponse(topic_id=TOPIC_ID, partitions=parts)]
            )
        )

    fake = FakeBroker(script)
    return fake


@pytest.mark.parametrize("kind", ["codec5", "codec7", "crc", "short"])
async def test_the_consumer_stops_at_an_undecodable_batch_until_a_seek(kind: str) -> None:
    log = [batch(0, [b"a", b"b"]), undecodable(kind, 2, [b"c", b"d"]), batch(4, [b"e"])]
    async with _serving(log) as fake, Consumer(
        bootstrap_servers=fake.bootstrap, fetch_max_wait_ms=100
    ) as consumer:
        consumer.assign([TP])
        consumer.seek(TP, 0)
        got: list[bytes | None] = []
        while len(got) < 2:  # the records before it come first
            for recs in (await consumer.getmany(timeout_ms=2000)).values():
                got.extend(r.value for r in recs)
        assert got == [b"a", b"b"]
        # then every way of asking raises, naming the batch, and nothing moves
        for _ in range(2):
            for ask in ("getmany", "getone", "async for"):
                with pytest.raises(UndecodableBatchError) as info:
                    if ask == "getmany":
                        await consumer.getmany(timeout_ms=2000)
                    elif ask == "getone":
                        await asyncio.wait_for(consumer.getone(), 5)
                    else:
                        async for _ in consumer:
                            break
                err = info.value
                assert (err.tp, err.first_offset, err.last_offset) == (TP, 2, 3)
                assert "t-0 offsets 2-3" in str(err) and "seek to 4" in str(err)
                assert await consumer.position(TP) == 2
        consumer.seek(TP, err.last_offset + 1)
        rec = await asyncio.wait_for(consumer.getone(), 5)
        assert (rec.offset, rec.value) == (4, b"e")
        assert await consumer.position(TP) == 5


async def test_pausing_the_stuck_partition_lets_the_others_flow() -> None:
    """As Java's: a paused partition's undecodable batch is not raised (the others are
    handed out); resume() raises it again. Before, every getmany() kept raising it."""
    other = TopicPartition(TOPIC, 1)
    logs = {
        0: [batch(0, [b"a"]), undecodable("crc", 1, [b"x", b"y"]), batch(3, [b"z"])],
        1: [batch(i, [b"p"]) for i in range(30)],
    }
    async with _serving(logs) as fake, Consumer(
        bootstrap_servers=fake.bootstrap, fetch_max_wait_ms=50
    ) as consumer:
        consumer.assign([TP, other])
        consumer.seek(TP, 0)
        consumer.seek(other, 0)
        got: dict[TopicPartition, int] = {TP: 0, other: 0}
        with pytest.raises(UndecodableBatchError):
            for _ in range(50):
                for tp, recs in (await consumer.getmany(timeout_ms=200, max_records=3)).items():
                    got[tp] += len(recs)
        assert got[TP] == 1
        consumer.pause(TP)
        for _ in range(60):
            if got[other] == 30:
                break
            for tp, recs in (await consumer.getmany(timeout_ms=200, max_records=3)).items():
                got[tp] += len(recs)
        assert got == {TP: 1, other: 30}
        consumer.resume(TP)
        with pytest.raises(UndecodableBatchError):
            await consumer.getmany(timeout_ms=200)
        assert await consumer.position(TP) == 1


def _share_serving(data: bytes, first: int, last: int) -> FakeBroker:
    """A share group coordinator and leader of t-0 whose first ShareFetch acquires
    ``first``..``last`` of ``data``; later ones acquire nothing."""
    fetches = 0

    def share_fetch(rec: Received) -> ShareFetchResponse:
        nonlocal fetches
        fetches += 1
        span = ShareFetchResponseAcquiredRecords(
            first_offset=first, last_offset=last, delivery_count=1
        )
        acquired = [] if fetches > 1 else [span]
        part = ShareFetchResponsePartitionData(
            partition_index=0, records=data if acquired else b"", acquired_records=acquired
        )
        return ShareFetchResponse(
            acquisition_lock_timeout_ms=30_000,
            responses=[ShareFetchableTopicResponse(topic_id=TOPIC_ID, partitions=[part])],
        )

    fake = share_cluster(
        {76: share_member, 78: share_fetch, 79: lambda r: ShareAcknowledgeResponse()}
    )
    answer = fake.script
    assert answer is not None

    async def script(rec: Received) -> Reply | None:
        if rec.api_key == 78 and fetches:
            await asyncio.sleep(0.05)  # caught up: a (short) long poll, not a spin
        return answer(rec)  # type: ignore[return-value]

    fake.script = script
    return fake


def _acks(fake: FakeBroker) -> dict[int, int]:
    """offset -> acknowledge type, from every ShareFetch and ShareAcknowledge sent."""
    out: dict[int, int] = {}
    for rec in fake.received:
        if rec.api_key not in (78, 79):
            continue
        for topic in rec.request.topics:
            for p in topic.partitions:
                for ab in p.acknowledgement_batches:
                    types = ab.acknowledge_types
                    for i, offset in enumerate(range(ab.first_offset, ab.last_offset + 1)):
                        out[offset] = types[0] if len(types) == 1 else types[i]
    return out


async def test_the_share_consumer_rejects_an_undecodable_batch_and_says_so() -> None:
    data = batch(0, [b"a", b"b"]) + undecodable("codec7", 2, [b"c", b"d"]) + batch(4, [b"e"])
    async with _share_serving(data, 0, 4) as fake:
        sc = ShareConsumer(TOPIC, bootstrap_servers=fake.bootstrap, group_id="g", **BACKOFF)
        async with sc:
            got: list[int] = []
            errors: list[UndecodableBatchError] = []
            for _ in range(100):
                try:
                    for recs in (await sc.getmany(timeout_ms=100)).values():
                        got.extend(r.offset for r in recs)
                except UndecodableBatchError as exc:
                    errors.append(exc)
                if errors and len(got) >= 3 and len(_acks(fake)) == 5:
                    break
            # the records around it are handed out, the error is raised once
            assert sorted(got) == [0, 1, 4]
            (err,) = errors
            assert (err.tp, err.first_offset, err.last_offset, err.position) == (TP, 2, 3, None)
            assert "t-0 offsets 2-3" in str(err) and "rejected" in str(err)
            # its records are rejected (3), the others accepted (1) by implicit mode
            assert _acks(fake) == {0: 1, 1: 1, 2: 3, 3: 3, 4: 1}
