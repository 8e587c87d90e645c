"""Record batches through a real broker, both ways, against librdkafka (confluent-kafka).

librdkafka writes with each codec and our reader parses what the broker hands back; we
build batches with each codec, the broker accepts them, and librdkafka reads them back.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest

from aiokproto.cluster.client import ClusterClient
from aiokproto.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from aiokproto.protocol.messages.produce import (
    ProduceRequest,
    ProduceRequestPartitionProduceData,
    ProduceRequestTopicProduceData,
)
from aiokproto.records import Record, RecordBatchBuilder, compression, read_batches
from tests.clients import client_for

ck = pytest.importorskip("confluent_kafka")

CODECS = {
    "none": compression.NONE,
    "gzip": compression.GZIP,
    "snappy": compression.SNAPPY,
    "lz4": compression.LZ4,
    "zstd": compression.ZSTD,
}
N = 300


def expected_record(i: int) -> tuple[bytes | None, bytes, list[tuple[str, bytes]]]:
    key = None if i % 10 == 0 else f"key-{i}".encode()
    return key, f"value-{i}-".encode() * (1 + i % 7), [("n", str(i).encode()), ("empty", b"")]


async def open_client(bootstrap: str) -> ClusterClient:
    client = client_for(bootstrap)
    await client.start()
    return client


async def leader_and_id(client: ClusterClient, topic: str) -> tuple[int, uuid.UUID]:
    client.metadata.track([topic])
    snap = await client.metadata.wait_for(lambda s: s.leader_for(topic, 0) is not None, 30)
    leader = snap.leader_for(topic, 0)
    assert leader is not None
    return leader, snap.topics[topic].topic_id


async def fetch_records(
    client: ClusterClient, topic: str, count: int
) -> tuple[list[Record], set[int]]:
    """Fetch partition 0 from offset 0 until ``count`` records (bounded)."""
    leader, topic_id = await leader_and_id(client, topic)
    records: list[Record] = []
    codecs: set[int] = set()
    offset = 0
    deadline = time.monotonic() + 30
    while len(records) < count:
        assert time.monotonic() < deadline, f"only {len(records)} of {count} records fetched"
        request = FetchRequest(
            max_wait_ms=200,
            min_bytes=1,
            max_bytes=8 << 20,
            topics=[
                FetchTopic(
                    topic=topic,
                    topic_id=topic_id,
                    partitions=[
                        FetchPartition(
                            partition=0, fetch_offset=offset, partition_max_bytes=4 << 20
                        )
                    ],
                )
            ],
        )
        response = await client.send(leader, request, purpose="fetch")
        part = response.responses[0].partitions[0]
        assert part.error_code == 0
        for batch in read_batches(part.records or b""):
            codecs.add(batch.compression)
            for record in batch:
                if record.offset >= offset:
                    records.append(record)
            offset = batch.next_offset
    return records, codecs


def produce_with_librdkafka(bootstrap: str, topic: str, codec: str) -> None:
    producer = ck.Producer(
        {"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 20}
    )
    for i in range(N):
        key, value, headers = expected_record(i)
        producer.produce(
            topic,
            value=value,
            key=key,
            headers=headers,
            partition=0,
            timestamp=1_700_000_000_000 + i,
        )
    assert producer.flush(30) == 0


def consume_with_librdkafka(bootstrap: str, topic: str, count: int) -> list[Any]:
    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"interop-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([ck.TopicPartition(topic, 0, 0)])
    got: list[Any] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append(msg)
    finally:
        consumer.close()
    return got


@pytest.mark.parametrize("codec", list(CODECS))
async def test_librdkafka_batches_parse_with_our_reader(kafka_any: Any, codec: str) -> None:
    topic = f"interop-in-{codec}-{uuid.uuid4().hex[:8]}"
    await asyncio.to_thread(produce_with_librdkafka, kafka_any.bootstrap_servers, topic, codec)
    client = await open_client(kafka_any.bootstrap_servers)
    try:
        records, codecs = await fetch_records(client, topic, N)
    finally:
        await client.close()
    # librdkafka sends a batch uncompressed when compression would not shrink it
    assert CODECS[codec] in codecs and codecs <= {CODECS[codec], compression.NONE}
    assert [r.offset for r in records] == list(range(N))
    for i, record in enumerate(records):
        key, value, headers = expected_record(i)
        assert (record.key, record.value, list(record.headers)) == (key, value, headers)
        assert record.timestamp == 1_700_000_000_000 + i


@pytest.mark.parametrize("codec", list(CODECS))
async def test_our_batches_are_accepted_and_read_by_librdkafka(kafka_any: Any, codec: str) -> None:
    topic = f"interop-out-{codec}-{uuid.uuid4().hex[:8]}"
    client = await open_client(kafka_any.bootstrap_servers)
    try:
        leader, topic_id = await leader_and_id(client, topic)
        offset = 0
        for chunk in range(3):  # three batches, so batch boundaries are exercised too
            builder = RecordBatchBuilder(batch_size=1 << 20, compression=CODECS[codec])
            for i in range(chunk * 100, chunk * 100 + 100):
                key, value, headers = expected_record(i)
                assert builder.append(1_700_000_000_000 + i, key, value, headers) is not None
            request = ProduceRequest(
                acks=-1,
                timeout_ms=10_000,
                topic_data=[
                    ProduceRequestTopicProduceData(
                        name=topic,
                        topic_id=topic_id,
                        partition_data=[
                            ProduceRequestPartitionProduceData(index=0, records=builder.build())
                        ],
                    )
                ],
            )
            for _ in range(50):  # a new partition: its leader may not know it leads yet
                response = await client.send(leader, request, purpose="produce")
                part = response.responses[0].partition_responses[0]
                if part.error_code != 6:  # NOT_LEADER_OR_FOLLOWER: nothing was appended
                    break
                await asyncio.sleep(0.1)
            assert part.error_code == 0, part
            assert part.base_offset == offset
            offset += 100
    finally:
        await client.close()
    messages = await asyncio.to_thread(
        consume_with_librdkafka, kafka_any.bootstrap_servers, topic, N
    )
    assert [m.offset() for m in messages] == list(range(N))
    for i, msg in enumerate(messages):
        key, value, headers = expected_record(i)
        assert msg.key() == key and msg.value() == value
        assert msg.headers() == headers
        assert msg.timestamp() == (ck.TIMESTAMP_CREATE_TIME, 1_700_000_000_000 + i)
