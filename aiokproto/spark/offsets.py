"""Offsets in Spark's Kafka JSON form (``{"t": {"0": 42}}``, -2/-1), the ``assign``
JSON, and the starting/ending bounds of a query.

Spark writes per-partition positions as ``{"topic": {"0": 42, "1": -2}}`` (partition
numbers are strings because JSON keys are); -2 means earliest and -1 latest. The same
form is what our streaming source checkpoints, so a checkpoint reads like Spark's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aiokproto.errors import KafkaConfigError
from aiokproto.structs import TopicPartition

EARLIEST = -2
LATEST = -1

PartitionOffsets = dict[TopicPartition, int]


def _load(text: str, option: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise KafkaConfigError(f"option {option}: not valid JSON ({exc.msg})") from None


def _partition(key: object, topic: str, option: str) -> int:
    if isinstance(key, int) and not isinstance(key, bool):
        number = key
    elif isinstance(key, str) and key.strip().lstrip("-").isdigit():
        number = int(key)
    else:
        raise KafkaConfigError(f"option {option}: partition {key!r} of {topic!r} is not a number")
    if number < 0:
        raise KafkaConfigError(f"option {option}: partition {number} of {topic!r} is negative")
    return number


def offsets_from_json(value: str | Mapping[str, Any], option: str) -> PartitionOffsets:
    """``{"t": {"0": 42}}`` (text or parsed) -> ``{TopicPartition("t", 0): 42}``."""
    data = _load(value, option) if isinstance(value, str) else value
    if not isinstance(data, Mapping):
        raise KafkaConfigError(f'option {option}: expected {{"topic": {{"0": offset}}}}')
    out: PartitionOffsets = {}
    for topic, partitions in data.items():
        if not isinstance(topic, str) or not topic:
            raise KafkaConfigError(f"option {option}: topic names must be non-empty strings")
        if not isinstance(partitions, Mapping):
            raise KafkaConfigError(
                f'option {option}: topic {topic!r} must map to {{"partition": offset}}'
            )
        for key, offset in partitions.items():
            if not isinstance(offset, int) or isinstance(offset, bool):
                raise KafkaConfigError(
                    f"option {option}: offset of {topic}-{key} must be an integer, not {offset!r}"
                )
            out[TopicPartition(topic, _partition(key, topic, option))] = offset
    return out


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """The inverse of ``offsets_from_json``; topics and partitions in sorted order."""
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return out


def assignment_from_json(text: str) -> tuple[TopicPartition, ...]:
    """The ``assign`` option: ``{"topicA": [0, 1], "topicB": [2]}``."""
    data = _load(text, "assign")
    if not isinstance(data, dict) or not data:
        raise KafkaConfigError('option assign: expected {"topic": [partition, ...]}')
    out: list[TopicPartition] = []
    for topic, partitions in data.items():
        if not topic or not isinstance(partitions, list) or not partitions:
            raise KafkaConfigError(
                f"option assign: topic {topic!r} must map to a non-empty list of partitions"
            )
        out.extend(TopicPartition(topic, _partition(p, topic, "assign")) for p in partitions)
    return tuple(sorted(set(out)))


# -- bounds ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Earliest:
    pass


@dataclass(frozen=True, slots=True)
class Latest:
    pass


@dataclass(frozen=True, slots=True)
class Specific:
    """Per-partition offsets; -2/-1 stand for earliest/latest of that partition."""

    offsets: Mapping[TopicPartition, int]


@dataclass(frozen=True, slots=True)
class AtTimestamp:
    """Every partition from the first record at or after one timestamp (ms)."""

    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class ByTimestamp:
    """Per-partition timestamps (ms)."""

    timestamps: Mapping[TopicPartition, int]


Bound = Earliest | Latest | Specific | AtTimestamp | ByTimestamp


def parse_bound(
    offsets: str | None,
    by_timestamp: str | None,
    timestamp: str | None,
    *,
    prefix: str,
    default: Bound,
) -> Bound:
    """``<prefix>Offsets``, ``<prefix>OffsetsByTimestamp`` and ``<prefix>Timestamp``.

    As in Spark, the single timestamp wins over per-partition timestamps, which win
    over offsets.
    """
    if timestamp is not None:
        try:
            ts = int(timestamp.strip())
        except ValueError:
            raise KafkaConfigError(
                f"option {prefix}Timestamp must be milliseconds since the epoch, not {timestamp!r}"
            ) from None
        if ts < 0:
            raise KafkaConfigError(f"option {prefix}Timestamp must be >= 0, not {ts}")
        return AtTimestamp(ts)
    if by_timestamp is not None:
        option = f"{prefix}OffsetsByTimestamp"
        stamps = offsets_from_json(by_timestamp, option)
        if not stamps:
            raise KafkaConfigError(f"option {option} names no partition")
        for tp, ts in stamps.items():
            if ts < 0:
                raise KafkaConfigError(f"option {option}: timestamp of {tp} must be >= 0")
        return ByTimestamp(stamps)
    if offsets is None:
        return default
    word = offsets.strip().lower()
    if word == "earliest":
        return Earliest()
    if word == "latest":
        return Latest()
    option = f"{prefix}Offsets"
    specific = offsets_from_json(offsets, option)
    if not specific:
        raise KafkaConfigError(f"option {option} names no partition")
    for tp, offset in specific.items():
        if offset < EARLIEST:
            raise KafkaConfigError(
                f"option {option}: offset {offset} of {tp.topic}-{tp.partition} is invalid "
                "(use an offset >= 0, -2 for earliest or -1 for latest)"
            )
    return Specific(specific)
