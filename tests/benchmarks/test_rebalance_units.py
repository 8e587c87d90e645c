"""The rebalance-time benchmark's pure parts: final-state check, gaps, settle time,
moved partitions, medians and the table. No broker."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.rebalance_time import (
    CASES,
    MemberView,
    Views,
    analyse_event,
    duplicates_and_skips,
    is_final,
    longest_gap,
    median_or_none,
    moved_partitions,
    owners,
    phase_delay,
    render_table,
    settled_at,
    state_at,
    summarize,
)


def views(**owned: tuple[int, ...] | list[int]) -> Views:
    return {name: MemberView(frozenset(ps), False) for name, ps in owned.items()}


# -- final state ------------------------------------------------------------------------


def test_final_needs_every_partition_once_balanced_and_nobody_revoking() -> None:
    assert is_final(views(a=[0, 1], b=[2, 3]), 4)
    assert is_final(views(a=[0, 1], b=[2]), 3)  # 2/1: as balanced as 3 over 2 gets
    assert not is_final(views(a=[0, 1, 2], b=[3], c=[]), 4)  # the new member owns nothing
    assert not is_final(views(a=[0, 1, 2], b=[3]), 4)  # unbalanced
    assert not is_final(views(a=[0, 1], b=[1, 2]), 4)  # 1 twice, 3 nowhere
    assert not is_final(views(a=[0, 1], b=[2]), 4)  # 3 unowned
    assert not is_final({}, 4)
    revoking = {"a": MemberView(frozenset({0, 1}), True), "b": MemberView(frozenset({2, 3}), False)}
    assert not is_final(revoking, 4)


def test_owners_and_moved_partitions() -> None:
    before = owners(views(a=[0, 1, 2], b=[3, 4, 5]))
    after = owners(views(a=[0, 1], b=[3, 4], c=[2, 5]))
    assert before[2] == "a" and after[2] == "c"
    assert moved_partitions(before, after) == {2, 5}
    assert moved_partitions(before, before) == set()
    assert moved_partitions({0: "a"}, {}) == {0}


# -- gaps -------------------------------------------------------------------------------


def test_longest_gap_inside_the_window() -> None:
    times = [0.0, 1.0, 1.1, 3.0, 3.1, 10.0]
    assert longest_gap(times, 1.0, 3.1, 10.0) == pytest.approx(1.9)  # 1.1 -> 3.0


def test_longest_gap_is_clipped_at_the_start() -> None:
    # the stretch 0 -> 5 began before the event: only 2 -> 5 is its doing
    assert longest_gap([0.0, 5.0, 5.05], 2.0, 5.05, 9.0) == pytest.approx(3.0)


def test_longest_gap_open_at_the_end_runs_to_the_next_record() -> None:
    # the group settled at 4, but records came back only at 6
    assert longest_gap([1.0, 1.05, 6.0], 1.0, 4.0, 9.0) == pytest.approx(4.95)
    # ... or never within what was watched
    assert longest_gap([1.0, 1.05], 1.0, 4.0, 9.0) == pytest.approx(7.95)
    assert longest_gap([], 1.0, 4.0, 9.0) == pytest.approx(8.0)


def test_longest_gap_of_a_steady_partition_is_its_spacing() -> None:
    times = [i * 0.05 for i in range(200)]
    assert longest_gap(times, 2.0, 6.0, 10.0) == pytest.approx(0.05)


def test_duplicates_and_skips() -> None:
    assert duplicates_and_skips([5, 6, 7, 7, 8]) == (1, 0)
    assert duplicates_and_skips([5, 6, 9]) == (0, 2)
    assert duplicates_and_skips([]) == (0, 0)


# -- settle time over a timeline --------------------------------------------------------


JOIN: list[tuple[float, Views]] = [
    (0.0, views(a=[0, 1, 2], b=[3, 4, 5])),  # steady, 2 members
    (10.01, views(a=[0, 1, 2], b=[3, 4, 5], c=[])),  # c starts at 10.0
    (11.0, views(a=[], b=[], c=[])),  # eager: everything revoked
    (11.5, views(a=[0, 1, 2], b=[3, 4, 5], c=[])),  # looks like before: not final (c)
    (12.0, views(a=[0, 1], b=[2, 3], c=[4, 5])),  # final
]


def test_settled_at_is_the_change_into_the_last_final_state() -> None:
    assert settled_at(JOIN, 10.0, 20.0, 6) == (12.0, 0)
    assert state_at(JOIN, 11.7) == JOIN[3][1]
    assert state_at(JOIN, -1.0) == {}


def test_settled_at_counts_flaps_and_misses() -> None:
    flapping = [
        *JOIN,
        (13.0, views(a=[0, 1], b=[2, 3], c=[4])),
        (14.0, views(a=[0, 1], b=[2, 5], c=[3, 4])),
    ]
    assert settled_at(flapping, 10.0, 20.0, 6) == (14.0, 1)
    assert settled_at(flapping, 10.0, 13.5, 6) == (None, 1)  # ended unowned: not settled
    assert settled_at(JOIN, 10.0, 11.9, 6) == (None, 0)


def test_analyse_event() -> None:
    # records every 0.05 s; partitions 0 and 3 kept their owner and paused 11.0 -> 12.2
    # (eager), the moved ones (2, 4, 5) came back at 12.5; 1 kept its owner, no pause
    def steady(until: float) -> list[float]:
        return [i * 0.05 for i in range(int(until / 0.05) + 1)]

    def paused(resume: float) -> list[float]:
        return steady(11.0) + [resume + i * 0.05 for i in range(100)]

    handouts = {0: paused(12.2), 1: steady(17.0), 2: paused(12.5), 3: paused(12.2),
                4: paused(12.5), 5: paused(12.5)}  # fmt: skip
    revocations = [(11.0, 3), (11.0, 3), (5.0, 1)]
    got = analyse_event(JOIN, handouts, revocations, 10.0, 14.0, 17.0, partitions=6)
    assert got["steady_before"] is True
    assert got["settle_s"] == 2.0
    assert got["flaps"] == 0
    assert got["moved"] == 3 and got["kept"] == [0, 1, 3]
    assert got["revoked"] == 6  # the one at 5.0 was before the event
    assert got["pause_ms"] == pytest.approx(1200, abs=1)
    assert got["handover_ms"] == pytest.approx(1500, abs=1)
    assert got["baseline_gap_ms"] == pytest.approx(50, abs=1)
    assert got["owners_after"]["4"] == "c"


def test_analyse_event_that_never_settles() -> None:
    got = analyse_event(JOIN[:4], {}, [], 10.0, 14.0, 17.0, partitions=6)
    assert got["settle_s"] is None and got["moved"] is None and got["pause_ms"] is None


def test_phase_delays_cover_the_interval_evenly() -> None:
    assert [phase_delay(run, 3, 6.0) for run in range(3)] == [1.0, 3.0, 5.0]
    # join and leave both wait it: the leave's offset from before the join (2d) spreads
    assert sorted(2 * phase_delay(run, 3, 6.0) % 6.0 for run in range(3)) == [0.0, 2.0, 4.0]
    assert phase_delay(0, 1, 5.0) == 2.5


# -- medians and the table ---------------------------------------------------------------


def _event(settle: float | None, pause: float | None = 100.0) -> dict[str, Any]:
    return {"settle_s": settle, "pause_ms": pause, "handover_ms": 900.0, "moved": 3,
            "revoked": 3, "baseline_gap_ms": 60.0}  # fmt: skip


def test_median_or_none() -> None:
    assert median_or_none([3.0, None, 1.0, 2.0]) == 2.0
    assert median_or_none([4.0, 1.0]) == 2.5
    assert median_or_none([None]) is None
    assert median_or_none([]) is None


def test_summarize_takes_medians_over_settled_runs() -> None:
    case = CASES[0].key
    runs = [
        {"case": case, "run": 0, "events": {"join": _event(3.0, 50.0), "leave": _event(1.0)}},
        {"case": case, "run": 1, "events": {"join": _event(1.0, 70.0), "leave": _event(None)}},
        {"case": case, "run": 2, "events": {"join": _event(2.0, 90.0)}},
        {"case": CASES[1].key, "run": 0, "events": {"join": _event(None)}},
    ]
    rows = {(r["case"], r["event"]): r for r in summarize(runs)}
    join = rows[(case, "join")]
    assert (join["runs"], join["settled"]) == (3, 3)
    assert join["settle_s"]["median"] == 2.0
    assert (join["settle_s"]["low"], join["settle_s"]["high"]) == (1.0, 3.0)
    assert join["pause_ms"] == 70.0
    leave = rows[(case, "leave")]
    assert (leave["runs"], leave["settled"]) == (3, 1)
    assert leave["settle_s"]["median"] == 1.0
    stuck = rows[(CASES[1].key, "join")]
    assert (stuck["runs"], stuck["settled"]) == (1, 0)
    assert (CASES[2].key, "join") not in rows  # a case that did not run has no row
    table = render_table(summarize(runs))
    assert "| classic, eager (range) | join | 2.00 (1.00-3.00) | 70 |" in table
    assert "| classic, cooperative-sticky | join | did not settle |" in table
