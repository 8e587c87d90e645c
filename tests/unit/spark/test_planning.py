"""Offset-range planning: bounds, data loss, rate limiting and splitting, without I/O."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiokproto.errors import KafkaConfigError
from aiokproto.spark.errors import DataLossError
from aiokproto.spark.offsets import AtTimestamp, ByTimestamp, Earliest, Latest, Specific
from aiokproto.spark.planning import (
    DataLoss,
    LogBounds,
    OffsetRange,
    clamp,
    rate_limit,
    resolve,
    split,
    stream_end,
    timestamps_to_look_up,
)
from aiokproto.structs import TopicPartition as TP

A0, A1, B0 = TP("a", 0), TP("a", 1), TP("b", 0)
BOUNDS = LogBounds(earliest={A0: 0, A1: 10, B0: 5}, latest={A0: 100, A1: 20, B0: 5})


def test_resolve_offsets() -> None:
    assert resolve(Earliest(), BOUNDS, ending=False) == {A0: 0, A1: 10, B0: 5}
    assert resolve(Latest(), BOUNDS, ending=True) == {A0: 100, A1: 20, B0: 5}
    specific = Specific({A0: 42, A1: -2, B0: -1})
    assert resolve(specific, BOUNDS, ending=False) == {A0: 42, A1: 10, B0: 5}


def test_specific_offsets_must_cover_every_partition() -> None:
    with pytest.raises(KafkaConfigError, match="missing a-1, b-0"):
        resolve(Specific({A0: 1}), BOUNDS, ending=False)
    with pytest.raises(KafkaConfigError, match="do not exist: c-0"):
        resolve(Specific({A0: 1, A1: 1, B0: 1, TP("c", 0): 1}), BOUNDS, ending=False)


def test_resolve_timestamps() -> None:
    bound = AtTimestamp(1000)
    assert timestamps_to_look_up(bound, [A0, A1]) == {A0: 1000, A1: 1000}
    hits = {A0: 50, A1: -1, B0: -1}
    with pytest.raises(KafkaConfigError, match="a-1 has a timestamp"):
        resolve(bound, BOUNDS, hits, ending=False)
    assert resolve(bound, BOUNDS, hits, ending=False, strategy="latest") == {
        A0: 50,
        A1: 20,
        B0: 5,
    }
    assert resolve(bound, BOUNDS, hits, ending=True) == {A0: 50, A1: 20, B0: 5}
    by = ByTimestamp({A0: 1, A1: 2, B0: 3})
    assert timestamps_to_look_up(by, [A0, B0]) == {A0: 1, B0: 3}
    with pytest.raises(KafkaConfigError, match="OffsetsByTimestamp must list"):
        resolve(ByTimestamp({A0: 1}), BOUNDS, {A0: 4}, ending=False)


def test_clamp_plain() -> None:
    loss = DataLoss(fail=True)
    ranges = clamp({A0: 0, A1: 10, B0: 5}, {A0: 100, A1: 15, B0: 5}, BOUNDS, loss)
    loss.settle()
    assert ranges == [OffsetRange("a", 0, 0, 100), OffsetRange("a", 1, 10, 15)]


def test_clamp_deleted_offsets() -> None:
    loss = DataLoss(fail=True)
    ranges = clamp({A1: 3}, {A1: 20}, BOUNDS, loss)
    assert ranges == [OffsetRange("a", 1, 10, 20)]
    with pytest.raises(DataLossError, match=r"offsets 3\.\.9 of a-1 were deleted"):
        loss.settle()
    lenient = DataLoss(fail=False)
    assert clamp({A1: 3}, {A1: 20}, BOUNDS, lenient) == [OffsetRange("a", 1, 10, 20)]
    lenient.settle()  # logs, does not raise


def test_clamp_offsets_went_back_and_gone_partitions() -> None:
    loss = DataLoss(fail=False)
    ranges = clamp({A0: 500, TP("gone", 0): 3}, {A0: 100}, BOUNDS, loss)
    assert ranges == []
    assert any("went back from 500 to 100" in m for m in loss.messages)
    assert any("gone-0 is gone" in m for m in loss.messages)


def test_clamp_new_partition_starts_at_earliest() -> None:
    loss = DataLoss(fail=True)
    ranges = clamp({A0: 100}, {A0: 100, A1: 20}, BOUNDS, loss)
    assert ranges == [OffsetRange("a", 1, 10, 20)]
    # a new partition that already lost its first records is reported
    with pytest.raises(DataLossError, match="new partition a-1 starts at offset 10"):
        loss.settle()


def test_rate_limit_proportional_and_exact() -> None:
    start = {A0: 0, A1: 10, B0: 5}
    latest = {A0: 100, A1: 20, B0: 5}
    end = rate_limit(start, latest, 11)
    assert sum(end[tp] - start[tp] for tp in start) == 11
    assert end == {A0: 10, A1: 11, B0: 5}
    assert rate_limit(start, latest, 1000) == latest
    assert rate_limit(start, latest, None) == latest
    # one offset over many partitions still makes progress
    assert sum(rate_limit(start, latest, 1)[tp] - start[tp] for tp in start) == 1


@given(
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)), min_size=1, max_size=30),
    st.integers(1, 10**7),
)
def test_rate_limit_properties(spans: list[tuple[int, int]], limit: int) -> None:
    start = {TP("t", i): s for i, (s, _) in enumerate(spans)}
    latest = {TP("t", i): s + n for i, (s, n) in enumerate(spans)}
    end = rate_limit(start, latest, limit)
    total = sum(n for _, n in spans)
    assert sum(end[tp] - start[tp] for tp in start) == min(total, limit)
    for tp in start:
        assert start[tp] <= end[tp] <= latest[tp]


def test_stream_end_counts_new_partitions_from_earliest() -> None:
    end = stream_end({A0: 90}, BOUNDS, None)
    assert end == {A0: 100, A1: 20, B0: 5}
    end = stream_end({A0: 90}, BOUNDS, 4)  # backlog 10 + 10: shared 2 + 2
    assert end == {A0: 92, A1: 12, B0: 5}
    # a start below the earliest offset does not use up the trigger's share
    assert stream_end({A0: 0, A1: 0, B0: 5}, BOUNDS, 10)[A1] == 11


def test_split() -> None:
    big, small = OffsetRange("a", 0, 0, 90), OffsetRange("a", 1, 0, 10)
    assert split([big, small], None) == [big, small]
    assert split([big, small], 2) == [big, small]
    out = split([big, small], 10)
    assert len(out) == 10
    assert [r for r in out if r.partition == 1] == [small]
    assert [(r.start, r.end) for r in out if r.partition == 0] == [
        (i * 10, i * 10 + 10) for i in range(9)
    ]
    # never a piece without offsets
    assert split([OffsetRange("a", 0, 5, 7)], 10) == [
        OffsetRange("a", 0, 5, 6),
        OffsetRange("a", 0, 6, 7),
    ]


@given(
    st.lists(st.integers(1, 10**6), min_size=1, max_size=20),
    st.integers(1, 200),
)
def test_split_properties(sizes: list[int], min_partitions: int) -> None:
    ranges = [OffsetRange("t", i, 1000, 1000 + n) for i, n in enumerate(sizes)]
    out = split(ranges, min_partitions)
    assert len(out) >= min(min_partitions, sum(sizes))
    for r in ranges:
        pieces = [p for p in out if p.partition == r.partition]
        assert pieces[0].start == r.start and pieces[-1].end == r.end
        assert all(a.end == b.start for a, b in itertools.pairwise(pieces))
        assert max(p.size for p in pieces) - min(p.size for p in pieces) <= 1
