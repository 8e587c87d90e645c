"""Driver-side I/O: which partitions a query covers (its subscription) and where their
logs begin and end (earliest/latest/timestamp offsets, via ``Admin``).

One short-lived ``Admin`` per call, on its own event loop (Spark calls the planner
synchronously, from processes that come and go).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from aiokproto.admin import Admin, AdminBatchError, IsolationLevel, OffsetSpec, TopicDescription
from aiokproto.errors import KafkaConfigError, UnknownTopicIdError, UnknownTopicOrPartitionError
from aiokproto.spark.kafka_options import shared_only
from aiokproto.spark.offsets import Bound
from aiokproto.spark.options import Assign, Subscribe, SubscribePattern, Subscription
from aiokproto.spark.planning import LogBounds, timestamps_to_look_up
from aiokproto.structs import TopicPartition

_GONE = (UnknownTopicOrPartitionError, UnknownTopicIdError)


async def _describe(admin: Admin, topics: list[str]) -> dict[str, TopicDescription]:
    """Descriptions of the topics that exist; missing ones are simply left out."""
    if not topics:
        return {}
    try:
        found = await admin.describe_topics(topics)
    except AdminBatchError as exc:
        if not all(isinstance(e, _GONE) for e in exc.errors.values()):
            raise
        found = exc.results
    return {str(k): v for k, v in found.items()}


async def partitions_of(admin: Admin, subscription: Subscription) -> list[TopicPartition]:
    if isinstance(subscription, Assign):
        topics = sorted({tp.topic for tp in subscription.partitions})
        described = await _describe(admin, topics)
        existing = {
            TopicPartition(name, p.partition) for name, d in described.items() for p in d.partitions
        }
        missing = [tp for tp in subscription.partitions if tp not in existing]
        if missing:
            listed = ", ".join(f"{tp.topic}-{tp.partition}" for tp in missing)
            raise KafkaConfigError(f"option assign names partitions that do not exist: {listed}")
        return list(subscription.partitions)
    if isinstance(subscription, Subscribe):
        topics = list(subscription.topics)
    else:
        topics = [t for t in await admin.list_topics() if SubscribePattern.matches(subscription, t)]
    described = await _describe(admin, topics)
    return sorted(
        TopicPartition(name, p.partition) for name, d in described.items() for p in d.partitions
    )


async def _offsets(
    admin: Admin, specs: Mapping[TopicPartition, OffsetSpec], isolation: IsolationLevel
) -> dict[TopicPartition, int]:
    if not specs:
        return {}
    found = await admin.list_offsets(specs, isolation_level=isolation)
    return {tp: r.offset for tp, r in found.items()}


async def log_bounds(
    client: Mapping[str, Any], subscription: Subscription, *timestamp_bounds: Bound
) -> tuple[LogBounds, list[dict[TopicPartition, int]]]:
    """Earliest and latest offset of every partition of the query.

    Also, for each of ``timestamp_bounds``, the first offset at or after its timestamp
    in each partition (-1 where no record is that new; empty for offset bounds).
    """
    committed = client.get("isolation_level") == "read_committed"
    # read_committed readers stop at the last stable offset, so "latest" must be it too.
    isolation = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
    async with Admin(**shared_only(client)) as admin:
        parts = await partitions_of(admin, subscription)
        lookups = [timestamps_to_look_up(b, parts) for b in timestamp_bounds]
        earliest, latest, *hits = await asyncio.gather(
            _offsets(admin, dict.fromkeys(parts, OffsetSpec.earliest()), isolation),
            _offsets(admin, dict.fromkeys(parts, OffsetSpec.latest()), isolation),
            *(
                _offsets(
                    admin, {tp: OffsetSpec.for_timestamp(t) for tp, t in stamps.items()}, isolation
                )
                for stamps in lookups
            ),
        )
    return LogBounds(earliest=earliest, latest=latest), hits


def lookup(
    client: Mapping[str, Any], subscription: Subscription, *timestamp_bounds: Bound
) -> tuple[LogBounds, list[dict[TopicPartition, int]]]:
    """``log_bounds`` for synchronous callers (Spark's planner)."""
    return asyncio.run(log_bounds(client, subscription, *timestamp_bounds))
