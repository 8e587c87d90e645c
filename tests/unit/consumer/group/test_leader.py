"""The leader's step through ``perform_assignment``: the cooperative protocol never
hands a partition over in one rebalance, each member gets its own version, a broken
assignor is caught."""

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
    RebalanceProtocol,
)
from aiokproto.consumer.group.leader import JoinedMember, decode_members, perform_assignment
from aiokproto.consumer.group.protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    encode_subscription,
)
from aiokproto.structs import TopicPartition as TP


def run_round(
    counts: dict[str, int], owned: dict[str, frozenset[TP]], generation: int
) -> dict[str, frozenset[TP]]:
    joined = [
        JoinedMember(
            m,
            None,
            encode_subscription(Subscription(("t",), None, tuple(sorted(ps)), generation)),
        )
        for m, ps in owned.items()
    ]
    encoded = perform_assignment(
        CooperativeStickyAssignor(), RebalanceProtocol.COOPERATIVE, counts, decode_members(joined)
    )
    return {m: frozenset(decode_assignment(b).partitions) for m, b in encoded.items()}


@given(st.integers(1, 24), st.integers(1, 5), st.integers(1, 5))
@settings(max_examples=60, deadline=None)
def test_cooperative_never_hands_over_in_one_rebalance(partitions: int, n1: int, n2: int) -> None:
    counts = {"t": partitions}
    owned = run_round(counts, {f"m{i}": frozenset() for i in range(n1)}, -1)
    # membership changes: some leave (their partitions are free), new ones join
    members = {f"m{i}": owned.get(f"m{i}", frozenset()) for i in range(n2)}
    first = run_round(counts, members, 1)
    for m, got in first.items():
        others = set().union(*(ps for o, ps in members.items() if o != m))
        assert not (got - members[m]) & others, "a partition changed owner in one rebalance"
    # every member revokes what it lost (owned - assigned) and keeps the rest; rejoin
    after_revoke = {m: members[m] & first[m] | (first[m] - members[m]) for m in members}
    second = run_round(counts, after_revoke, 2)
    everything = [tp for ps in second.values() for tp in ps]
    assert sorted(everything) == [TP("t", p) for p in range(partitions)]
    sizes = [len(ps) for ps in second.values()]
    assert max(sizes) - min(sizes) <= 1


def test_cooperative_adjust_applies_to_any_assignor() -> None:
    owned = {"a": frozenset({TP("t", 0), TP("t", 1)}), "b": frozenset()}
    joined = [
        JoinedMember(m, None, encode_subscription(Subscription(("t",), None, tuple(sorted(ps)), 1)))
        for m, ps in owned.items()
    ]
    # range gives t-1 to b, but a still owns it: held back this round
    encoded = perform_assignment(
        RangeAssignor(), RebalanceProtocol.COOPERATIVE, {"t": 2}, decode_members(joined)
    )
    assert decode_assignment(encoded["a"]).partitions == (TP("t", 0),)
    assert decode_assignment(encoded["b"]).partitions == ()


def test_leader_answers_in_each_members_version() -> None:
    joined = [
        JoinedMember("old", None, encode_subscription(Subscription(("t",)), 0)),
        JoinedMember("new", None, encode_subscription(Subscription(("t",)))),
        JoinedMember("bad", None, b"\x00"),
    ]
    encoded = perform_assignment(
        RangeAssignor(), RebalanceProtocol.EAGER, {"t": 2}, decode_members(joined)
    )
    assert encoded["old"][:2] == b"\x00\x00" and encoded["new"][:2] == b"\x00\x03"
    assert decode_assignment(encoded["bad"]).partitions == ()


def test_broken_assignor_is_caught() -> None:
    class Greedy(Assignor):
        name = "greedy"

        def assign(
            self, partitions_per_topic: Mapping[str, int], members: Mapping[str, GroupMember]
        ) -> dict[str, Assignment]:
            return {m: Assignment((TP("t", 0),)) for m in members}

    joined = [JoinedMember(m, None, encode_subscription(Subscription(("t",)))) for m in "ab"]
    with pytest.raises(Exception, match="to both"):
        perform_assignment(Greedy(), RebalanceProtocol.EAGER, {"t": 1}, decode_members(joined))
