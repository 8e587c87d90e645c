"""``Scheduler`` (pure): per-lane FIFO in offset order, lanes concurrent, dropping a
revoked partition's queue, and the back-pressure bounds."""

from __future__ import annotations

import random
from collections.abc import Hashable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiokproto.parallel.scheduling import Lane, Ordering, Scheduler
from aiokproto.structs import TopicPartition

P0 = TopicPartition("t", 0)
P1 = TopicPartition("t", 1)


def sched(ordering: Ordering, per: int = 100, total: int = 1000) -> Scheduler[int]:
    return Scheduler(ordering, max_queued_per_partition=per, max_queued_total=total)


def add(s: Scheduler[int], tp: TopicPartition, key: object, offset: int) -> None:
    s.add(tp, key, offset)


def test_key_ordering_runs_one_record_per_key_at_a_time() -> None:
    s = sched("key")
    for offset, key in enumerate([b"a", b"a", b"b", b"a", b"b"]):
        add(s, P0, key, offset)
    first = s.take()
    second = s.take()
    assert first is not None and second is not None
    assert (first[2], second[2]) == (0, 2)  # a's first, then b's first: a is busy
    assert s.take() is None  # both keys busy
    s.release(first[1])
    got = s.take()
    assert got is not None and got[2] == 1
    assert s.queued(P0) == 2 and s.queued_total == 2


def test_partition_ordering_and_unordered() -> None:
    s = sched("partition")
    for offset in range(3):
        add(s, P0, b"k%d" % offset, offset)
    add(s, P1, b"x", 0)
    a, b = s.take(), s.take()
    assert a is not None and b is not None and s.take() is None
    assert {a[0], b[0]} == {P0, P1}
    u = sched("unordered")
    for offset in range(3):
        add(u, P0, b"same", offset)
    assert [u.take() is not None for _ in range(4)] == [True, True, True, False]


def test_unhashable_key_falls_back_to_the_partition_lane() -> None:
    s = sched("key")
    assert s.lane_of(P0, {"a": 1}) == P0
    assert s.lane_of(P0, None) == (P0, None)
    with pytest.raises(ValueError, match="ordering must be one of"):
        Scheduler("keys", max_queued_per_partition=1, max_queued_total=1)  # type: ignore[arg-type]


def test_unhashable_keys_share_their_partition_lane() -> None:
    s = sched("key")
    add(s, P0, {"a": 1}, 0)
    add(s, P0, [2], 1)
    add(s, P0, b"k", 2)
    first, second = s.take(), s.take()
    assert first is not None and second is not None and s.take() is None
    assert (first[2], second[2]) == (0, 2)  # [2] waits for {"a": 1}: one lane, P0's
    assert first[1] is not None and first[1].id == P0
    s.release(first[1])
    third = s.take()
    assert third is not None and third[2] == 1


def test_a_running_lane_stays_busy_through_a_drop() -> None:
    """A rewind drops a partition's queue and adds records again: one of a key whose
    record is still running must wait for it (per-key order across the rewind)."""
    s = sched("key")
    add(s, P0, b"k", 0)
    add(s, P0, b"k", 1)
    running = s.take()
    assert running is not None
    assert s.drop({P0}) == [1] and s.queued_total == 0
    add(s, P0, b"k", 1)
    add(s, P0, b"other", 2)
    got = s.take()
    assert got is not None and got[2] == 2 and s.take() is None
    s.release(running[1])
    got = s.take()
    assert got is not None and got[2] == 1


@pytest.mark.parametrize("ordering", ["key", "partition", "unordered"])
def test_drop_forgets_only_the_revoked_partitions(ordering: Ordering) -> None:
    s = sched(ordering)
    for offset in range(4):
        add(s, P0, b"k%d" % (offset % 2), offset)
        add(s, P1, b"k%d" % (offset % 2), offset)
    taken = s.take()
    assert taken is not None
    dropped = s.drop({P0} if taken[0] == P1 else {P1})
    assert len(dropped) == 4 and s.queued_total == 3
    s.release(taken[1])
    rest = []
    while (got := s.take()) is not None:
        assert got[0] == taken[0]
        rest.append(got[2])
        s.release(got[1])
    assert sorted(rest) == [1, 2, 3] and s.queued_total == 0


def test_back_pressure_bounds_with_hysteresis() -> None:
    s = sched("key", per=4, total=6)
    s.partitions = 2  # a fair share of the total is 3
    for offset in range(3):
        add(s, P0, b"k", offset)
    assert not s.over_limit(P0)
    add(s, P0, b"k", 3)
    assert s.over_limit(P0) and not s.under_limit(P0)  # its own bound
    add(s, P1, b"k", 0)
    add(s, P1, b"k", 1)
    # the total is at its bound, but P1 is below its share: it keeps fetching, so a
    # partition that filled the total first does not starve it
    assert s.queued_total == 6 and not s.over_limit(P1)
    add(s, P1, b"k", 2)
    assert s.over_limit(P1) and not s.under_limit(P1)
    got = s.take()  # P0's first; its key is busy now, so nothing else starts
    assert got is not None and got[0] == P0
    assert not s.under_limit(P0)
    for _ in range(2):  # P1's key is a lane of its own: one at a time too
        s.release(got[1])
        got = s.take()
        assert got is not None
    s.release(got[1])
    # 2 left of each: within half their own bound (2), but the total 4 is above half
    # its bound (3) and each holds more than half its share (1): both stay paused
    assert (s.queued(P0), s.queued(P1)) == (2, 2)
    assert not s.under_limit(P0) and not s.under_limit(P1)
    got = s.take()
    assert got is not None
    s.release(got[1])
    assert s.queued_total == 3 and s.under_limit(P0) and s.under_limit(P1)
    while (got := s.take()) is not None:
        s.release(got[1])
    assert s.under_limit(P0) and s.under_limit(P1) and not s.over_limit(P0)


@settings(max_examples=200, deadline=None)
@given(
    ordering=st.sampled_from(["key", "partition", "unordered"]),
    keys=st.lists(st.tuples(st.integers(0, 1), st.integers(0, 4)), min_size=1, max_size=80),
    seed=st.integers(0, 2**32),
)
def test_random_completions_keep_lane_order(
    ordering: Ordering, keys: list[tuple[int, int]], seed: int
) -> None:
    """Items finish in a random order: a lane never has two items running, each lane's
    items start in the order added, and every item starts exactly once."""
    rnd = random.Random(seed)
    s = sched(ordering)
    tps = (P0, P1)
    next_offset = [0, 0]
    lanes: dict[int, Hashable] = {}
    for i, (p, k) in enumerate(keys):
        tp = tps[p]
        lane = s.lane_of(tp, k)
        lanes[i] = lane
        s.add(tp, k, i)
        next_offset[p] += 1
    running: list[tuple[Lane[int] | None, int]] = []
    started: list[int] = []
    while True:
        got = s.take()
        if got is not None:
            _, lane, item = got
            if lane is not None:
                assert lane.id == lanes[item]
                assert all(lane.id != other.id for other, _ in running if other is not None)
            running.append((lane, item))
            started.append(item)
            continue
        if not running:
            break
        lane, item = running.pop(rnd.randrange(len(running)))
        s.release(lane)
    assert sorted(started) == list(range(len(keys)))
    if ordering != "unordered":
        for lane in set(lanes.values()):
            mine = [i for i in started if lanes[i] == lane]
            assert mine == sorted(mine)


_KEYS: list[object] = [b"a", b"b", None, 1, True, {"u": 1}, ["u"]]  # 1 == True: one lane


def _lane_key(ordering: Ordering, tp: TopicPartition, key: object) -> Hashable:
    if ordering == "partition":
        return tp
    try:
        hash(key)
    except TypeError:
        return tp
    return (tp, key)


def _random_ops(rnd: random.Random) -> list[tuple[str, int, int, int]]:
    kinds = ("add", "take", "release", "drop")
    return [
        (rnd.choice(kinds), rnd.randrange(2), rnd.randrange(len(_KEYS)), rnd.randint(1, 5))
        for _ in range(rnd.randint(0, 120))
    ]


@pytest.mark.parametrize("ordering", ["key", "partition", "unordered"])
def test_lanes_reused_while_records_come_and_go(ordering: Ordering) -> None:
    """Records added while their key runs, lanes ending and reused by other keys and
    partitions, partitions dropped (a revoke, a rewind) with records running and then
    added again, None and unhashable keys: a key never has two records running, its
    records start in the order added, and the counts add up."""
    for seed in range(300):  # (seeded: hypothesis's lists rarely reach a reused lane)
        rnd = random.Random(seed)
        check_lanes(ordering, _random_ops(rnd), rnd)


def check_lanes(
    ordering: Ordering, ops: list[tuple[str, int, int, int]], rnd: random.Random
) -> None:
    s = sched(ordering)
    tps = (P0, P1)
    seq = 0
    running: list[tuple[Lane[int] | None, int]] = []
    key_of: dict[int, Hashable] = {}
    queued: dict[TopicPartition, set[int]] = {P0: set(), P1: set()}
    last_started: dict[Hashable, int] = {}
    for op, p, k, n in ops:
        tp = tps[p]
        if op == "add":
            items = list(range(seq, seq + n))
            seq += n
            keys = [_KEYS[(k + i) % len(_KEYS)] for i in range(n)]
            for item, key in zip(items, keys, strict=True):
                key_of[item] = _lane_key(ordering, tp, key)
            s.add_many(tp, items, keys)
            queued[tp].update(items)
        elif op == "take":
            for _ in range(n):
                got = s.take()
                if got is None:
                    break
                got_tp, lane, item = got
                assert item in queued[got_tp]
                queued[got_tp].discard(item)
                if ordering != "unordered":
                    lk = key_of[item]
                    assert lane is not None and lane.id == lk
                    assert all(key_of[other] != lk for _, other in running)
                    assert last_started.get(lk, -1) < item  # in the order added
                    last_started[lk] = item
                running.append((lane, item))
        elif op == "release" and running:
            lane, _ = running.pop(rnd.randrange(len(running)))
            s.release(lane)
        elif op == "drop":
            assert sorted(s.drop({tp})) == sorted(queued[tp])
            queued[tp].clear()
        assert s.queued_total == len(queued[P0]) + len(queued[P1])
        assert (s.queued(P0), s.queued(P1)) == (len(queued[P0]), len(queued[P1]))
    while running or s.ready_count:  # everything left still starts, once
        got = s.take()
        if got is None:
            lane, _ = running.pop()
            s.release(lane)
            continue
        queued[got[0]].discard(got[2])
        running.append((got[1], got[2]))
    assert not queued[P0] and not queued[P1] and s.queued_total == 0
