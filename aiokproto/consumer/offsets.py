"""Offset look-ups the consumer sends to partition leaders: ListOffsets (resets, the
beginning/end/by-time offsets of the API) and OffsetForLeaderEpoch (KIP-320 checks).

One attempt groups partitions by leader and asks every leader at once; per-partition
results and errors come back separately so the caller retries only what failed.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, NamedTuple, TypeVar

from aiokproto.cluster.client import ClusterClient
from aiokproto.deadline import before
from aiokproto.errors import (
    KafkaError,
    KafkaProtocolError,
    KafkaTimeoutError,
    LeaderNotAvailableError,
    UnknownTopicOrPartitionError,
    for_code,
)
from aiokproto.protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from aiokproto.protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochRequestOffsetForLeaderPartition,
    OffsetForLeaderEpochRequestOffsetForLeaderTopic,
)
from aiokproto.structs import TopicPartition

log = logging.getLogger(__name__)

EARLIEST = -2
LATEST = -1
CONSUMER_REPLICA_ID = -1

T = TypeVar("T")
R = TypeVar("R")


class OffsetAnswer(NamedTuple):
    offset: int  # -1: no such offset (a timestamp after the last record)
    timestamp: int
    leader_epoch: int


class EpochEnd(NamedTuple):
    leader_epoch: int
    end_offset: int  # -1: the broker does not know the epoch


Outcome = tuple[dict[TopicPartition, R], dict[TopicPartition, KafkaError]]


def _partition_error(code: int, tp: TopicPartition) -> KafkaError:
    return for_code(code)(f"{tp.topic}-{tp.partition}")


class OffsetClient:
    """Leader-routed offset requests for one consumer."""

    def __init__(self, client: ClusterClient, *, isolation_level: int) -> None:
        self.client = client
        self.isolation_level = isolation_level

    def _by_leader(
        self, tps: Mapping[TopicPartition, T]
    ) -> tuple[dict[int, dict[TopicPartition, T]], dict[TopicPartition, KafkaError]]:
        snap = self.client.metadata.snapshot
        groups: dict[int, dict[TopicPartition, T]] = defaultdict(dict)
        errors: dict[TopicPartition, KafkaError] = {}
        for tp, spec in tps.items():
            topic = snap.topics.get(tp.topic)
            if topic is not None and tp.partition not in topic.partitions:
                errors[tp] = UnknownTopicOrPartitionError(f"{tp.topic}-{tp.partition}")
                continue
            leader = snap.leader_for(tp.topic, tp.partition)
            if leader is None:
                errors[tp] = LeaderNotAvailableError(f"no leader known for {tp}")
            else:
                groups[leader][tp] = spec
        if errors:
            self.client.metadata.request_refresh()
        return groups, errors

    async def _fan_out(
        self,
        tps: Mapping[TopicPartition, T],
        ask: Callable[[int, dict[TopicPartition, T]], Awaitable[Outcome[R]]],
    ) -> Outcome[R]:
        groups, errors = self._by_leader(tps)
        results: dict[TopicPartition, R] = {}
        outcomes = await asyncio.gather(
            *(ask(node, part) for node, part in groups.items()), return_exceptions=True
        )
        for (_, part), outcome in zip(groups.items(), outcomes, strict=True):
            if isinstance(outcome, KafkaError):
                errors.update(dict.fromkeys(part, outcome))
            elif isinstance(outcome, BaseException):
                raise outcome
            else:
                results.update(outcome[0])
                errors.update(outcome[1])
        if any(e.invalid_metadata for e in errors.values()):
            self.client.metadata.request_refresh()
        return results, errors

    # -- ListOffsets -------------------------------------------------------------

    async def list_offsets_once(
        self, specs: Mapping[TopicPartition, tuple[int, int]]
    ) -> Outcome[OffsetAnswer]:
        """One attempt; ``specs`` maps each partition to (timestamp, current leader epoch)."""
        return await self._fan_out(specs, self._ask_list_offsets)

    async def _ask_list_offsets(
        self, node: int, specs: dict[TopicPartition, tuple[int, int]]
    ) -> Outcome[OffsetAnswer]:
        by_topic: dict[str, list[ListOffsetsPartition]] = defaultdict(list)
        for tp, (ts, epoch) in specs.items():
            by_topic[tp.topic].append(
                ListOffsetsPartition(
                    partition_index=tp.partition, current_leader_epoch=epoch, timestamp=ts
                )
            )
        request = ListOffsetsRequest(
            replica_id=CONSUMER_REPLICA_ID,
            isolation_level=self.isolation_level,
            topics=[ListOffsetsTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
        )
        conn = await self.client.connection(node)
        # v1+: one offset per partition; v2+ has the isolation level the consumer needs
        version = conn.version_for(ListOffsetsRequest, min_version=1)
        if version >= 10:
            request.timeout_ms = self.client.config.request_timeout_ms
        response: Any = await conn.send(request, version)
        results: dict[TopicPartition, OffsetAnswer] = {}
        errors: dict[TopicPartition, KafkaError] = {}
        for t in response.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                if tp not in specs:
                    continue
                if p.error_code:
                    errors[tp] = _partition_error(p.error_code, tp)
                elif p.offset < 0 and specs[tp][0] in (EARLIEST, LATEST):
                    # -1 only means "none" for a timestamp look-up; a log always has ends
                    errors[tp] = KafkaProtocolError(
                        f"ListOffsets answered offset {p.offset} for the "
                        f"{'beginning' if specs[tp][0] == EARLIEST else 'end'} of "
                        f"{tp.topic}-{tp.partition}"
                    )
                else:
                    results[tp] = OffsetAnswer(p.offset, p.timestamp, p.leader_epoch)
        return results, errors

    async def list_offsets(
        self,
        specs: Mapping[TopicPartition, int],
        *,
        timeout_ms: int,
        current_epochs: Mapping[TopicPartition, int] | None = None,
    ) -> dict[TopicPartition, OffsetAnswer]:
        """ListOffsets for ``{tp: timestamp}``, retrying retriable errors until the timeout."""
        epochs = current_epochs or {}
        return await self._retry(
            {tp: (ts, epochs.get(tp, -1)) for tp, ts in specs.items()},
            self.list_offsets_once,
            timeout_ms,
            "ListOffsets",
        )

    # -- OffsetForLeaderEpoch -------------------------------------------------------

    async def epoch_end_offsets_once(
        self, specs: Mapping[TopicPartition, tuple[int, int]]
    ) -> Outcome[EpochEnd]:
        """``specs``: tp -> (epoch to look up, current leader epoch)."""
        return await self._fan_out(specs, self._ask_epochs)

    async def _ask_epochs(
        self, node: int, specs: dict[TopicPartition, tuple[int, int]]
    ) -> Outcome[EpochEnd]:
        by_topic: dict[str, list[OffsetForLeaderEpochRequestOffsetForLeaderPartition]] = (
            defaultdict(list)
        )
        for tp, (epoch, current) in specs.items():
            by_topic[tp.topic].append(
                OffsetForLeaderEpochRequestOffsetForLeaderPartition(
                    partition=tp.partition, current_leader_epoch=current, leader_epoch=epoch
                )
            )
        request = OffsetForLeaderEpochRequest(
            replica_id=CONSUMER_REPLICA_ID,
            topics=[
                OffsetForLeaderEpochRequestOffsetForLeaderTopic(topic=t, partitions=ps)
                for t, ps in by_topic.items()
            ],
        )
        conn = await self.client.connection(node)
        # v3+ carries replica_id, which tells the broker a consumer is asking
        version = conn.version_for(OffsetForLeaderEpochRequest, min_version=3)
        response: Any = await conn.send(request, version)
        results: dict[TopicPartition, EpochEnd] = {}
        errors: dict[TopicPartition, KafkaError] = {}
        for t in response.topics:
            for p in t.partitions:
                tp = TopicPartition(t.topic, p.partition)
                if tp not in specs:
                    continue
                if p.error_code:
                    errors[tp] = _partition_error(p.error_code, tp)
                else:
                    results[tp] = EpochEnd(p.leader_epoch, p.end_offset)
        return results, errors

    # -- retries -----------------------------------------------------------------

    async def _retry(
        self,
        specs: Mapping[TopicPartition, T],
        once: Callable[[Mapping[TopicPartition, T]], Awaitable[Outcome[R]]],
        timeout_ms: int,
        what: str,
    ) -> dict[TopicPartition, R]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        config = self.client.config
        delay = config.retry_backoff_ms / 1000
        topics = {tp.topic for tp in specs}
        self.client.metadata.track(topics)
        try:
            pending = dict(specs)
            results: dict[TopicPartition, R] = {}
            while True:
                # every step of an attempt (metadata, connecting, the request) counts
                # against the caller's timeout, not one request_timeout_ms each
                try:
                    async with before(deadline, what):
                        if not self.client.metadata.snapshot.brokers or any(
                            t not in self.client.metadata.snapshot.topics for t in topics
                        ):
                            await self.client.metadata.refresh()
                        got, errors = await once(pending)
                except KafkaError as failure:
                    if not failure.retriable:
                        raise
                    got, errors = {}, dict.fromkeys(pending, failure)
                results.update(got)
                for exc in errors.values():
                    if not exc.retriable:
                        raise exc
                pending = {tp: pending[tp] for tp in errors}
                if not pending:
                    return results
                if loop.time() + delay > deadline:
                    first = next(iter(errors.values()))
                    raise KafkaTimeoutError(
                        f"{what} for {sorted(pending)} did not succeed within {timeout_ms} ms;"
                        f" last error: {first}"
                    )
                await asyncio.sleep(delay)
                delay = min(delay * 2, config.retry_backoff_max_ms / 1000)
                if any(
                    e.invalid_metadata or isinstance(e, LeaderNotAvailableError)
                    for e in errors.values()
                ):
                    self.client.metadata.request_refresh()  # the next attempt waits for it
        finally:
            self.client.metadata.untrack(topics)
