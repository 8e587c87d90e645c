"""Offset-range planning: pure functions from list-offsets answers to Spark partitions
(resolve bounds, data-loss rules, ``maxOffsetsPerTrigger`` shares, ``minPartitions``
splits).

The driver asks the brokers for each partition's earliest and latest offsets (and
timestamp lookups when a bound is a timestamp), then everything here decides, without
I/O: where a query starts and ends, how a trigger's share is spread over partitions
(``maxOffsetsPerTrigger``), how big partitions are split (``minPartitions``), and
which changes count as data loss (``failOnDataLoss``).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from aiokproto.errors import KafkaConfigError
from aiokproto.spark.errors import DataLossError
from aiokproto.spark.offsets import (
    EARLIEST,
    LATEST,
    AtTimestamp,
    Bound,
    ByTimestamp,
    Earliest,
    Latest,
    PartitionOffsets,
    Specific,
)
from aiokproto.structs import TopicPartition

log = logging.getLogger("aiokproto.spark")


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Offsets ``[start, end)`` of one partition: the work of one Spark task."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def size(self) -> int:
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class LogBounds:
    """What the brokers said: the first and the next offset of each partition."""

    earliest: Mapping[TopicPartition, int]
    latest: Mapping[TopicPartition, int]

    @property
    def partitions(self) -> list[TopicPartition]:
        return sorted(self.latest)


class DataLoss:
    """Collects data-loss findings; raises them together or logs them, per failOnDataLoss."""

    def __init__(self, fail: bool) -> None:
        self.fail = fail
        self.messages: list[str] = []

    def report(self, message: str) -> None:
        self.messages.append(message)

    def settle(self) -> None:
        if not self.messages:
            return
        text = "; ".join(self.messages)
        if self.fail:
            raise DataLossError(
                f"{text}. Some data may have been lost; set failOnDataLoss=false to skip "
                "it and go on"
            )
        log.warning("aiokproto source skipped lost data: %s", text)


def timestamps_to_look_up(
    bound: Bound, partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, int]:
    """The timestamp lookups ``resolve`` needs for ``bound`` (empty for offset bounds)."""
    if isinstance(bound, AtTimestamp):
        return dict.fromkeys(partitions, bound.timestamp_ms)
    if isinstance(bound, ByTimestamp):
        return {tp: bound.timestamps[tp] for tp in partitions if tp in bound.timestamps}
    return {}


def _require_all(
    named: Mapping[TopicPartition, int], partitions: list[TopicPartition], option: str
) -> None:
    missing = sorted(set(partitions) - set(named))
    if missing:
        listed = ", ".join(f"{tp.topic}-{tp.partition}" for tp in missing)
        raise KafkaConfigError(
            f"option {option} must list every partition of the query; missing {listed} "
            "(use -2 for earliest, -1 for latest)"
        )
    unknown = sorted(set(named) - set(partitions))
    if unknown:
        listed = ", ".join(f"{tp.topic}-{tp.partition}" for tp in unknown)
        raise KafkaConfigError(f"option {option} names partitions that do not exist: {listed}")


def resolve(
    bound: Bound,
    bounds: LogBounds,
    hits: Mapping[TopicPartition, int] | None = None,
    *,
    ending: bool,
    strategy: str = "error",
) -> PartitionOffsets:
    """Turn a starting or ending bound into concrete offsets for every partition.

    ``hits`` holds, for a timestamp bound, the first offset at or after the timestamp
    (-1: no record is that new). Such a miss resolves to the latest offset for an
    ending bound; for a starting bound it fails unless ``strategy`` is "latest".
    """
    parts = bounds.partitions
    which = "ending" if ending else "starting"
    if isinstance(bound, Earliest):
        return {tp: bounds.earliest[tp] for tp in parts}
    if isinstance(bound, Latest):
        return {tp: bounds.latest[tp] for tp in parts}
    if isinstance(bound, Specific):
        _require_all(bound.offsets, parts, f"{which}Offsets")
        out: PartitionOffsets = {}
        for tp in parts:
            offset = bound.offsets[tp]
            out[tp] = (
                bounds.earliest[tp]
                if offset == EARLIEST
                else bounds.latest[tp]
                if offset == LATEST
                else offset
            )
        return out
    if isinstance(bound, ByTimestamp):
        _require_all(bound.timestamps, parts, f"{which}OffsetsByTimestamp")
    out = {}
    for tp in parts:
        found = (hits or {}).get(tp, -1)
        if found >= 0:
            out[tp] = found
        elif ending or strategy == "latest":
            out[tp] = bounds.latest[tp]
        else:
            raise KafkaConfigError(
                f"no record in {tp.topic}-{tp.partition} has a timestamp at or after the "
                "starting timestamp; set startingOffsetsByTimestampStrategy=latest to start "
                "at the end instead"
            )
    return out


def clamp(
    start: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    bounds: LogBounds,
    loss: DataLoss,
) -> list[OffsetRange]:
    """Ranges from ``start`` to ``end``, checked against what the log still holds.

    A start below the log's earliest offset lost the records between (retention or a
    recreated topic); reading resumes at the earliest. An end below the start means the
    partition's offsets moved backwards (topic recreated); the range is skipped, as
    Spark's Kafka source does. A partition in ``start`` but not in ``end`` is gone.
    Both are reported to ``loss``. Empty ranges are left out.
    """
    ranges: list[OffsetRange] = []
    for tp in sorted(set(start) - set(end)):
        loss.report(f"partition {tp.topic}-{tp.partition} is gone")
    for tp in sorted(end):
        first = bounds.earliest.get(tp, 0)
        s = start.get(tp)
        if s is None:
            # A partition that appeared since the previous trigger: from its beginning.
            s = first
            if first > 0:
                loss.report(
                    f"new partition {tp.topic}-{tp.partition} starts at offset {first}, not 0"
                )
        e = end[tp]
        if e < s:
            loss.report(
                f"offsets of {tp.topic}-{tp.partition} went back from {s} to {e} (topic recreated?)"
            )
            continue
        if s < first:
            loss.report(
                f"offsets {s}..{min(first, e) - 1} of {tp.topic}-{tp.partition} were deleted "
                "before they were read"
            )
            s = min(first, e)
        if e > s:
            ranges.append(OffsetRange(tp.topic, tp.partition, s, e))
    return ranges


def split(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Split ranges so there are at least ``min_partitions`` of them, bigger ones more.

    Each range gets a share of ``min_partitions`` proportional to its size (at least
    one piece, at most one piece per offset); the remainder of the integer division goes
    to the ranges with the largest fractions. Pieces of a range differ by at most one.
    """
    if not min_partitions or min_partitions <= len(ranges):
        return list(ranges)
    total = sum(r.size for r in ranges)
    if total == 0:
        return list(ranges)
    counts: list[int] = []
    remainders: list[tuple[int, int]] = []
    for i, r in enumerate(ranges):
        whole, rem = divmod(r.size * min_partitions, total)
        counts.append(max(1, min(whole, r.size)))
        remainders.append((-rem, i))
    left = min_partitions - sum(counts)
    for _, i in sorted(remainders):
        if left <= 0:
            break
        if counts[i] < ranges[i].size:
            counts[i] += 1
            left -= 1
    out: list[OffsetRange] = []
    for r, n in zip(ranges, counts, strict=True):
        edges = [r.start + r.size * k // n for k in range(n + 1)]
        out.extend(
            OffsetRange(r.topic, r.partition, a, b) for a, b in itertools.pairwise(edges) if b > a
        )
    return out


def rate_limit(
    start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int], limit: int | None
) -> PartitionOffsets:
    """End offsets for one trigger reading at most ``limit`` offsets over all partitions.

    Each partition gets a share proportional to its backlog; the shares add up to
    ``min(limit, total backlog)`` exactly, so every trigger makes progress.
    """
    end = dict(latest)
    backlog = {
        tp: latest[tp] - start[tp] for tp in latest if tp in start and latest[tp] > start[tp]
    }
    total = sum(backlog.values())
    if limit is None or total <= limit:
        return end
    shares: dict[TopicPartition, int] = {}
    order: list[tuple[int, TopicPartition]] = []
    for tp, lag in backlog.items():
        shares[tp], rem = divmod(lag * limit, total)
        order.append((-rem, tp))
    left = limit - sum(shares.values())
    for _, tp in sorted(order)[:left]:
        shares[tp] += 1
    for tp, share in shares.items():
        end[tp] = start[tp] + share
    return end


def stream_end(
    start: Mapping[TopicPartition, int], bounds: LogBounds, limit: int | None
) -> PartitionOffsets:
    """The end offsets of the next trigger (partitions that vanished are left out).

    Starts below the earliest offset count from the earliest, so deleted offsets do not
    use up the trigger's share.
    """
    current = {
        tp: max(start.get(tp, bounds.earliest[tp]), bounds.earliest[tp]) for tp in bounds.partitions
    }
    return rate_limit(current, {tp: bounds.latest[tp] for tp in bounds.partitions}, limit)
