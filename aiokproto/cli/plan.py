"""Pure parts of ``groups reset-offsets`` and ``groups lag``: parsing the options
(``--topic t:0,1``, datetimes) and working out the new offsets and the lag rows, as
Kafka's kafka-consumer-groups tool does."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from aiokproto.structs import TopicPartition


class PlanError(ValueError):
    """A target or partition spec that cannot be used (a usage error)."""


@dataclass(frozen=True, slots=True)
class Target:
    """Where to move: ``earliest``, ``latest``, ``offset`` (``value``), ``datetime``
    (``value`` in ms since the epoch) or ``shift`` (``value`` records, + or -)."""

    kind: str
    value: int = 0


def parse_topic_spec(spec: str) -> tuple[str, tuple[int, ...] | None]:
    """``topic`` (every partition) or ``topic:0,2,5`` (those partitions)."""
    topic, sep, parts = spec.rpartition(":")
    if not sep:
        return spec, None
    if not topic:
        raise PlanError(f"--topic {spec!r}: the topic name is empty")
    try:
        partitions = tuple(sorted({int(p) for p in parts.split(",") if p.strip()}))
    except ValueError:
        raise PlanError(f"--topic {spec!r}: partitions must be numbers, e.g. topic:0,1") from None
    if not partitions or min(partitions) < 0:
        raise PlanError(f"--topic {spec!r}: give partitions as topic:0,1,2")
    return topic, partitions


def parse_datetime(text: str, local: dt.tzinfo | None = None) -> int:
    """ISO 8601 (``2024-05-01T12:00:00``, ``...Z``, ``...+02:00``; no zone means local
    time, as Kafka's tool reads it) or ms since the epoch; returns ms since the epoch."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise PlanError(
            f"--to-datetime {text!r}: expected e.g. 2024-05-01T12:00:00[.000][Z|+02:00] "
            "or milliseconds since the epoch"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=local) if local is not None else when.astimezone()
    ms = int(when.timestamp() * 1000)
    if ms < 0:
        raise PlanError(f"--to-datetime {text!r} is before 1970")
    return ms


def choose_target(
    to_earliest: bool,
    to_latest: bool,
    to_offset: int | None,
    to_datetime: str | None,
    shift_by: int | None,
) -> Target:
    """Exactly one of the --to-* / --shift-by options, as a ``Target``."""
    given = [
        t
        for t in (
            Target("earliest") if to_earliest else None,
            Target("latest") if to_latest else None,
            Target("offset", to_offset) if to_offset is not None else None,
            Target("datetime", parse_datetime(to_datetime)) if to_datetime is not None else None,
            Target("shift", shift_by) if shift_by is not None else None,
        )
        if t is not None
    ]
    if len(given) != 1:
        raise PlanError(
            "give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime, "
            "--shift-by"
        )
    if given[0].kind == "offset" and given[0].value < 0:
        raise PlanError("--to-offset must be >= 0")
    return given[0]


@dataclass(frozen=True, slots=True)
class Move:
    partition: TopicPartition
    current: int | None  # the committed offset, None if nothing is committed
    new: int


def plan_reset(
    target: Target,
    partitions: Iterable[TopicPartition],
    committed: Mapping[TopicPartition, int],
    earliest: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    by_time: Mapping[TopicPartition, int] | None = None,
) -> list[Move]:
    """The new offset of each partition, kept within [earliest, latest] like Kafka's
    tool: an offset out of range would only be reset again by the consumer.

    ``by_time`` is the ListOffsets answer for a datetime target (-1: no record at or
    after that time, which moves to the end).
    """
    moves: list[Move] = []
    for tp in sorted(partitions):
        low, high = earliest[tp], latest[tp]
        current = committed.get(tp)
        if target.kind == "earliest":
            new = low
        elif target.kind == "latest":
            new = high
        elif target.kind == "offset":
            new = target.value
        elif target.kind == "datetime":
            found = (by_time or {}).get(tp, -1)
            new = high if found < 0 else found
        elif target.kind == "shift":
            # nothing committed: shift from where a consumer would start, the beginning
            new = (low if current is None else current) + target.value
        else:
            raise PlanError(f"unknown reset target {target.kind!r}")
        moves.append(Move(tp, current, min(max(new, low), high)))
    return moves


@dataclass(frozen=True, slots=True)
class LagRow:
    partition: TopicPartition
    current: int | None
    end: int | None
    member: str | None = None

    @property
    def lag(self) -> int | None:
        if self.current is None or self.end is None:
            return None
        return max(0, self.end - self.current)


def lag_rows(
    committed: Mapping[TopicPartition, int],
    ends: Mapping[TopicPartition, int],
    owners: Mapping[TopicPartition, str],
) -> list[LagRow]:
    """One row per partition the group has committed or owns, sorted."""
    every = set(committed) | set(owners)
    return [
        LagRow(tp, committed.get(tp), ends.get(tp), owners.get(tp)) for tp in sorted(every)
    ]
