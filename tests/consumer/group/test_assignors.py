"""Assignors: known answers, coverage, balance, determinism, stickiness, cooperation."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiokproto.consumer.group.assignors import (
    Assignor,
    CooperativeStickyAssignor,
    GroupMember,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
)
from aiokproto.consumer.group.assignors.balance import resolve_claims, sticky_balance
from aiokproto.consumer.group.protocol import (
    Assignment,
    Subscription,
)
from aiokproto.structs import TopicPartition as TP

ALL = [RangeAssignor, RoundRobinAssignor, StickyAssignor, CooperativeStickyAssignor]


names = st.sampled_from(["t0", "t1", "t2", "t3"])


def member(
    mid: str,
    *topics: str,
    owned: tuple[TP, ...] = (),
    generation: int = -1,
    user_data: bytes | None = None,
    instance: str | None = None,
) -> GroupMember:
    return GroupMember(mid, instance, Subscription(topics, user_data, owned, generation))


def group(*members: GroupMember) -> dict[str, GroupMember]:
    return {m.member_id: m for m in members}


def shares(result: Mapping[str, Assignment]) -> dict[str, list[TP]]:
    return {m: list(a.partitions) for m, a in result.items()}


def check_complete(
    counts: Mapping[str, int], members: Mapping[str, GroupMember], result: Mapping[str, Assignment]
) -> None:
    """Each partition of a subscribed existing topic exactly once, to a subscriber."""
    seen: dict[TP, str] = {}
    for mid, a in result.items():
        for tp in a.partitions:
            assert tp not in seen, f"{tp} given to {seen[tp]} and {mid}"
            seen[tp] = mid
            assert tp.topic in members[mid].subscription.topics
    wanted = {
        TP(t, p)
        for m in members.values()
        for t in m.subscription.topics
        for p in range(counts.get(t, 0))
    }
    assert set(seen) == wanted


def test_range_known_answer() -> None:
    r = RangeAssignor().assign(
        {"t0": 3, "t1": 3}, group(member("c0", "t0", "t1"), member("c1", "t0", "t1"))
    )
    assert shares(r) == {
        "c0": [TP("t0", 0), TP("t0", 1), TP("t1", 0), TP("t1", 1)],
        "c1": [TP("t0", 2), TP("t1", 2)],
    }


def test_roundrobin_known_answers() -> None:
    r = RoundRobinAssignor().assign(
        {"t0": 3, "t1": 3}, group(member("c0", "t0", "t1"), member("c1", "t0", "t1"))
    )
    assert shares(r) == {
        "c0": [TP("t0", 0), TP("t0", 2), TP("t1", 1)],
        "c1": [TP("t0", 1), TP("t1", 0), TP("t1", 2)],
    }
    r = RoundRobinAssignor().assign(
        {"t0": 1, "t1": 2, "t2": 3},
        group(member("c0", "t0"), member("c1", "t0", "t1"), member("c2", "t0", "t1", "t2")),
    )
    assert shares(r) == {
        "c0": [TP("t0", 0)],
        "c1": [TP("t1", 0)],
        "c2": [TP("t1", 1), TP("t2", 0), TP("t2", 1), TP("t2", 2)],
    }


def test_static_members_ordered_by_instance_id() -> None:
    members = group(
        member("zzz", "t", instance="a"), member("aaa", "t", instance="b"), member("mmm", "t")
    )
    r = RangeAssignor().assign({"t": 3}, members)
    assert shares(r) == {"zzz": [TP("t", 0)], "aaa": [TP("t", 1)], "mmm": [TP("t", 2)]}


@pytest.mark.parametrize("cls", ALL)
def test_missing_topics_and_idle_members(cls: type[Assignor]) -> None:
    members = group(member("a", "t", "gone"), member("b", "t"), member("c", "other"))
    r = cls().assign({"t": 2}, members)
    check_complete({"t": 2}, members, r)
    assert r["c"].partitions == ()


@st.composite
def groups(
    draw: st.DrawFn, same_topics: bool = False
) -> tuple[dict[str, int], dict[str, GroupMember]]:
    counts = draw(st.dictionaries(names, st.integers(0, 9), min_size=1))
    n = draw(st.integers(1, 6))
    common = draw(st.lists(names, min_size=1, unique=True))
    members = {}
    for i in range(n):
        topics = common if same_topics else draw(st.lists(names, min_size=1, unique=True))
        mid = f"m{draw(st.integers(0, 99)):02d}-{i}"
        members[mid] = member(mid, *topics)
    return counts, members


@pytest.mark.parametrize("cls", ALL)
@given(data=groups())
@settings(max_examples=60, deadline=None)
def test_every_partition_once_and_deterministic(
    cls: type[Assignor], data: tuple[dict[str, int], dict[str, GroupMember]]
) -> None:
    counts, members = data
    r = cls().assign(counts, members)
    check_complete(counts, members, r)
    reversed_members = dict(reversed(list(members.items())))
    assert cls().assign(counts, reversed_members) == r


@pytest.mark.parametrize("cls", [RoundRobinAssignor, StickyAssignor, CooperativeStickyAssignor])
@given(data=groups(same_topics=True))
@settings(max_examples=60, deadline=None)
def test_balanced_for_equal_subscriptions(
    cls: type[Assignor], data: tuple[dict[str, int], dict[str, GroupMember]]
) -> None:
    counts, members = data
    sizes = [len(a.partitions) for a in cls().assign(counts, members).values()]
    assert max(sizes) - min(sizes) <= 1


@given(data=groups())
@settings(max_examples=60, deadline=None)
def test_sticky_no_single_move_improves_balance(
    data: tuple[dict[str, int], dict[str, GroupMember]],
) -> None:
    counts, members = data
    r = StickyAssignor().assign(counts, members)
    size = {m: len(a.partitions) for m, a in r.items()}
    for mid, a in r.items():
        for tp in a.partitions:
            for other, g in members.items():
                if tp.topic in g.subscription.topics:
                    assert size[other] >= size[mid] - 1


@st.composite
def membership_change(draw: st.DrawFn) -> tuple[int, list[str], list[str]]:
    partitions = draw(st.integers(0, 30))
    before = draw(st.lists(st.sampled_from([f"m{i}" for i in range(8)]), min_size=1, unique=True))
    after = draw(st.lists(st.sampled_from([f"m{i}" for i in range(8)]), min_size=1, unique=True))
    return partitions, before, after


@given(membership_change())
@settings(max_examples=100, deadline=None)
def test_sticky_keeps_what_balance_allows(case: tuple[int, list[str], list[str]]) -> None:
    partitions, before, after = case
    counts = {"t": partitions}
    first = CooperativeStickyAssignor().assign(counts, group(*(member(m, "t") for m in before)))
    second_members = group(
        *(
            member(m, "t", owned=first[m].partitions if m in first else (), generation=1)
            for m in after
        )
    )
    second = CooperativeStickyAssignor().assign(counts, second_members)
    check_complete(counts, second_members, second)
    floor = partitions // len(after)
    for m in after:
        prev = set(first[m].partitions) if m in first else set()
        kept = prev & set(second[m].partitions)
        assert len(kept) >= min(len(prev), floor)
    sizes = [len(a.partitions) for a in second.values()]
    assert max(sizes) - min(sizes) <= 1


def test_sticky_moves_only_what_it_must() -> None:
    counts = {"t": 6}
    owned = {"a": (TP("t", 0), TP("t", 1), TP("t", 2)), "b": (TP("t", 3), TP("t", 4), TP("t", 5))}
    members = group(
        *(member(m, "t", owned=owned.get(m, ()), generation=3) for m in ("a", "b", "c"))
    )
    r = CooperativeStickyAssignor().assign(counts, members)
    assert len(set(r["a"].partitions) & set(owned["a"])) == 2
    assert len(set(r["b"].partitions) & set(owned["b"])) == 2
    assert len(r["c"].partitions) == 2


def test_claims_higher_generation_wins_ties_drop() -> None:
    topics_of = {"a": frozenset({"t"}), "b": frozenset({"t"}), "c": frozenset({"t"})}
    claims = {
        "a": (frozenset({TP("t", 0), TP("t", 1)}), 4),
        "b": (frozenset({TP("t", 0)}), 5),
        "c": (frozenset({TP("t", 1), TP("t", 9)}), 4),
    }
    owners = resolve_claims({"t": 3}, topics_of, claims)
    assert owners == {TP("t", 0): "b"}  # t-1 tied at generation 4; t-9 does not exist
    result = sticky_balance({"t": 3}, topics_of, owners)
    assert TP("t", 0) in result["b"]


def test_eager_sticky_carries_previous_assignment_in_user_data() -> None:
    a, b = StickyAssignor(), StickyAssignor()
    assert a.subscription_user_data(frozenset({"t"})) is None
    a.on_assignment(Assignment((TP("t", 0), TP("t", 1), TP("t", 2))), 4)
    b.on_assignment(Assignment((TP("t", 3),)), 4)
    members = group(
        member("a", "t", user_data=a.subscription_user_data(frozenset({"t"}))),
        member("b", "t", user_data=b.subscription_user_data(frozenset({"t"}))),
        member("c", "t", user_data=b"\xff garbage"),
    )
    r = StickyAssignor().assign({"t": 4}, members)
    assert TP("t", 3) in r["b"].partitions
    assert len(set(r["a"].partitions) & {TP("t", 0), TP("t", 1), TP("t", 2)}) == 2
    assert len(r["c"].partitions) == 1
    check_complete({"t": 4}, members, r)


def test_cooperative_sticky_reads_generation_from_user_data_for_old_subscriptions() -> None:
    a = CooperativeStickyAssignor()
    a.on_assignment(Assignment((TP("t", 0),)), 9)
    data = a.subscription_user_data(frozenset({"t"}))
    assert data == (9).to_bytes(4, "big")
    m = GroupMember("x", None, Subscription(("t",), data, (TP("t", 0),), -1))
    assert a._claim(m) == (frozenset({TP("t", 0)}), 9)
