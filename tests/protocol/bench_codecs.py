"""Micro-benchmark of the generated codecs: ``python tests/protocol/bench_codecs.py``."""

from __future__ import annotations

import timeit
import uuid

from aiokproto.protocol.messages.metadata import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from aiokproto.protocol.messages.produce import (
    ProduceRequest,
    ProduceRequestPartitionProduceData,
    ProduceRequestTopicProduceData,
)


def metadata_response() -> MetadataResponse:
    return MetadataResponse(
        brokers=[
            MetadataResponseBroker(node_id=i, host=f"broker{i}.example", port=9092, rack="r1")
            for i in range(3)
        ],
        cluster_id="cluster",
        controller_id=1,
        topics=[
            MetadataResponseTopic(
                name=f"topic-{t}",
                topic_id=uuid.uuid4(),
                partitions=[
                    MetadataResponsePartition(
                        partition_index=p,
                        leader_id=p % 3,
                        leader_epoch=5,
                        replica_nodes=[0, 1, 2],
                        isr_nodes=[0, 1, 2],
                        offline_replicas=[],
                    )
                    for p in range(10)
                ],
            )
            for t in range(100)
        ],
    )


def produce_request(partitions: int = 10, size: int = 16384) -> ProduceRequest:
    blob = bytes(size)
    return ProduceRequest(
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            ProduceRequestTopicProduceData(
                name="events",
                partition_data=[
                    ProduceRequestPartitionProduceData(index=p, records=blob)
                    for p in range(partitions)
                ],
            )
        ],
    )


def bench(label: str, fn: object, n: int) -> float:
    t = min(timeit.repeat(fn, number=n, repeat=5)) / n  # type: ignore[arg-type]
    print(f"{label:55s} {t * 1e6:10.1f} us")
    return t


def main() -> None:
    md = metadata_response()
    for v in (9, 12):
        data = md.encode(v)
        bench(f"MetadataResponse v{v} encode (100x10, {len(data)} B)", lambda v=v: md.encode(v), 50)
        bench(
            f"MetadataResponse v{v} decode",
            lambda data=data, v=v: MetadataResponse.decode(data, v),
            50,
        )
    pr = produce_request()
    for v in (3, 9, 11):
        data = pr.encode(v)
        bench(
            f"ProduceRequest v{v} encode (10 x 16 KiB, {len(data)} B)",
            lambda v=v: pr.encode(v),
            2000,
        )
        bench(
            f"ProduceRequest v{v} decode",
            lambda data=data, v=v: ProduceRequest.decode(data, v),
            2000,
        )


if __name__ == "__main__":
    main()
