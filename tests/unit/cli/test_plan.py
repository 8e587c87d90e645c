"""``groups reset-offsets`` and ``groups lag`` planning: topic specs, datetimes,
targets, offsets kept within the log, lag rows."""

from __future__ import annotations

import datetime as dt

import pytest

from aiokproto.cli.plan import (
    PlanError,
    Target,
    choose_target,
    lag_rows,
    parse_datetime,
    parse_topic_spec,
    plan_reset,
)
from aiokproto.structs import TopicPartition

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


def test_topic_specs_and_datetimes() -> None:
    assert parse_topic_spec("t") == ("t", None)
    assert parse_topic_spec("t:2,0") == ("t", (0, 2))
    for bad in ("t:x", ":1", "t:"):
        with pytest.raises(PlanError):
            parse_topic_spec(bad)
    utc = dt.UTC
    assert parse_datetime("1970-01-01T00:00:01Z") == 1000
    assert parse_datetime("1970-01-01T01:00:01+01:00") == 1000
    assert parse_datetime("1970-01-01T00:00:01.5", local=utc) == 1500
    assert parse_datetime("12345") == 12345
    with pytest.raises(PlanError):
        parse_datetime("yesterday")


def test_choose_target_needs_exactly_one() -> None:
    assert choose_target(True, False, None, None, None) == Target("earliest")
    assert choose_target(False, False, 5, None, None) == Target("offset", 5)
    for args in ((False, False, None, None, None), (True, True, None, None, None)):
        with pytest.raises(PlanError, match="exactly one"):
            choose_target(*args)
    with pytest.raises(PlanError):
        choose_target(False, False, -1, None, None)


def test_plan_reset_stays_within_the_log() -> None:
    earliest, latest = {TP0: 10, TP1: 0}, {TP0: 100, TP1: 5}
    committed = {TP0: 50}

    def plan(target: Target, by_time: dict[TopicPartition, int] | None = None) -> list[object]:
        moves = plan_reset(target, [TP1, TP0], committed, earliest, latest, by_time)
        return [(m.partition.partition, m.current, m.new) for m in moves]

    assert plan(Target("earliest")) == [(0, 50, 10), (1, None, 0)]
    assert plan(Target("latest")) == [(0, 50, 100), (1, None, 5)]
    assert plan(Target("offset", 3)) == [(0, 50, 10), (1, None, 3)]
    assert plan(Target("offset", 1000)) == [(0, 50, 100), (1, None, 5)]
    assert plan(Target("shift", -45)) == [(0, 50, 10), (1, None, 0)]
    assert plan(Target("shift", 2)) == [(0, 50, 52), (1, None, 2)]
    # no record at or after the time: the end, as Kafka's tool does
    assert plan(Target("datetime", 1), {TP0: 42, TP1: -1}) == [(0, 50, 42), (1, None, 5)]


def test_lag_rows() -> None:
    rows = lag_rows({TP0: 3}, {TP0: 10, TP1: 4}, {TP1: "m1"})
    assert [(r.partition, r.current, r.end, r.lag, r.member) for r in rows] == [
        (TP0, 3, 10, 7, None),
        (TP1, None, 4, None, "m1"),
    ]
