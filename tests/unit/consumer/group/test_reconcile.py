"""KIP-848 reconciliation, pure: topic ids to names, revoke first, one at a time."""

from __future__ import annotations

import uuid
from uuid import UUID

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiokproto.consumer.group.reconcile import (
    NONE,
    LocalAssignment,
    Outcome,
    Reconciler,
    freeze,
)
from aiokproto.structs import TopicPartition as TP

A, B, C = (UUID(int=i + 1) for i in range(3))
NAMES = {A: "a", B: "b", C: "c"}


def reconciler(known: dict[UUID, str] | None = None) -> tuple[Reconciler, dict[UUID, str]]:
    metadata = dict(NAMES if known is None else known)
    return Reconciler(metadata.get), metadata


def run(r: Reconciler) -> None:
    """One whole reconciliation: start, revoke done, assign done."""
    assert r.outcome() is Outcome.START
    plan = r.start()
    assert r.assign() is plan
    r.finish()


def test_a_first_target_assigns_everything_and_is_then_reconciled() -> None:
    r, _ = reconciler()
    assert r.receive({A: [0, 1], B: [0]})
    plan = r.start()
    assert plan.revoked == frozenset()
    assert plan.added == plan.assigned == {TP("a", 0), TP("a", 1), TP("b", 0)}
    assert not plan.unresolved
    r.assign()
    r.finish()
    assert r.reconciled and r.outcome() is Outcome.NOTHING
    assert r.current == LocalAssignment(0, freeze({A: [0, 1], B: [0]}))
    assert r.owned == plan.assigned


def test_revocation_is_computed_against_what_is_owned() -> None:
    r, _ = reconciler()
    r.receive({A: [0, 1]})
    run(r)
    r.receive({A: [1], B: [0]})
    plan = r.start()
    assert plan.revoked == {TP("a", 0)}
    assert plan.added == {TP("b", 0)}
    assert plan.assigned == {TP("a", 1), TP("b", 0)}
    assert r.owned == {TP("a", 0), TP("a", 1)}, "owned changes only at the assign step"
    r.assign()
    assert r.owned == plan.assigned


def test_the_same_partitions_again_are_not_a_new_target() -> None:
    r, _ = reconciler()
    assert r.receive({A: [0]})
    epoch = r.target.local_epoch
    assert not r.receive({A: {0}})
    assert not r.would_change({A: [0], B: []}), "a topic with no partitions assigns nothing"
    assert r.target.local_epoch == epoch


def test_an_empty_first_assignment_is_still_reconciled_and_acknowledged() -> None:
    # Java: NONE differs from an empty assignment, so the member reconciles it (no
    # revoke, nothing added) and its heartbeat acknowledges [].
    r, _ = reconciler()
    assert r.receive({})
    assert r.target == LocalAssignment(0) and r.target != NONE
    plan = r.start()
    assert plan.assigned == plan.revoked == plan.added == frozenset()
    r.assign()
    r.finish()
    assert r.current == LocalAssignment(0) and r.reconciled


def test_unknown_topic_ids_stay_pending_until_metadata_knows_them() -> None:
    r, metadata = reconciler({A: "a"})
    r.receive({A: [0], B: [0]})
    plan = r.start()
    assert plan.unresolved == {B}
    assert plan.assigned == {TP("a", 0)}
    r.assign()
    r.finish()
    assert not r.reconciled, "B is still owed"
    assert r.outcome() is Outcome.NOTHING, "nothing to do until metadata knows B"
    assert r.unresolved() == {B}
    metadata[B] = "b"
    assert r.outcome() is Outcome.START
    plan = r.start()
    assert plan.added == {TP("b", 0)} and plan.revoked == frozenset()
    r.assign()
    r.finish()
    assert r.reconciled


def test_a_resolvable_part_equal_to_what_is_owned_is_only_acknowledged() -> None:
    r, _ = reconciler({A: "a"})
    r.receive({A: [0]})
    run(r)
    r.receive({A: [0], B: [0]})  # B unknown: the resolvable part is what is owned
    assert r.outcome() is Outcome.ACKNOWLEDGE
    assert r.acknowledge() == {B}
    assert r.current.local_epoch == r.target.local_epoch
    assert dict(r.current.partitions) == {A: frozenset({0})}
    assert r.outcome() is Outcome.NOTHING, "acknowledged once, then wait for metadata"


def test_one_reconciliation_at_a_time_and_a_newer_target_is_handled_after() -> None:
    r, _ = reconciler()
    r.receive({A: [0]})
    first = r.start()
    r.receive({B: [0]})  # arrives mid-reconciliation
    assert r.outcome() is Outcome.NOTHING
    with pytest.raises(RuntimeError):
        r.start()
    r.assign()
    r.finish()
    assert r.current == first.resolved
    assert not r.reconciled
    second = r.start()
    assert second.token != first.token
    assert second.revoked == {TP("a", 0)} and second.added == {TP("b", 0)}


def test_a_revoked_topic_gone_from_metadata_is_named_from_the_assigned_names() -> None:
    r, metadata = reconciler()
    r.receive({A: [0], B: [0]})
    run(r)
    del metadata[A]  # the topic was deleted: metadata forgot its id
    r.receive({B: [0]})
    plan = r.start()
    assert plan.revoked == {TP("a", 0)}
    assert not plan.unresolved
    r.assign()
    r.finish()
    assert r.names == {B: "b"}, "names of topics no longer assigned are forgotten"


def test_results_of_an_abandoned_reconciliation_do_not_count() -> None:
    r, _ = reconciler()
    r.receive({A: [0]})
    plan = r.start()
    r.abort()
    assert not r.is_live(plan.token)
    with pytest.raises(RuntimeError):
        r.assign()
    with pytest.raises(RuntimeError):
        r.finish()


def test_a_failed_reconciliation_is_retried_later() -> None:
    r, _ = reconciler()
    r.receive({A: [0]})
    r.start()
    r.fail()
    assert r.outcome() is Outcome.START


def test_release_gives_up_everything() -> None:
    r, _ = reconciler()
    r.receive({A: [0, 1]})
    run(r)
    assert r.release() == {TP("a", 0), TP("a", 1)}
    assert r.owned == frozenset() and r.current == NONE and r.target == NONE
    assert not r.names


# -- properties ---------------------------------------------------------------------

topic_ids = st.sampled_from([A, B, C])
targets = st.dictionaries(topic_ids, st.frozensets(st.integers(0, 3), max_size=4), max_size=3)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("target"), targets),
        st.tuples(st.just("learn"), topic_ids),
        st.tuples(st.just("forget"), topic_ids),
        st.tuples(st.just("work"), st.none()),
    ),
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(steps)
def test_any_sequence_keeps_plans_consistent_and_converges(
    seq: list[tuple[str, object]],
) -> None:
    metadata: dict[UUID, str] = {}
    r = Reconciler(metadata.get)
    for kind, arg in seq:
        if kind == "target":
            r.receive(arg)  # type: ignore[arg-type]
        elif kind == "learn":
            metadata[arg] = NAMES[arg]  # type: ignore[index]
        elif kind == "forget":
            metadata.pop(arg, None)  # type: ignore[call-overload]
        else:
            outcome = r.outcome()
            if outcome is Outcome.START:
                before = r.owned
                plan = r.start()
                assert plan.revoked <= before
                assert not plan.added & before
                assert not plan.revoked & plan.assigned
                assert plan.assigned == (before - plan.revoked) | plan.added
                named = {NAMES[t] for t in plan.resolved.partitions}
                assert {tp.topic for tp in plan.assigned} <= named
                r.assign()
                r.finish()
                assert r.current == plan.resolved
            elif outcome is Outcome.ACKNOWLEDGE:
                owned = r.owned
                r.acknowledge()
                assert r.owned == owned
    # Once metadata knows every id, repeated work reaches the target exactly.
    metadata.update(NAMES)
    for _ in range(3):
        outcome = r.outcome()
        if outcome is Outcome.START:
            run(r)
        elif outcome is Outcome.ACKNOWLEDGE:
            r.acknowledge()
    assert r.reconciled
    expected = {TP(NAMES[t], p) for t, ps in r.target.partitions.items() for p in ps}
    if not r.target.is_none:
        assert r.owned == expected


def test_uuid_keys_are_compared_by_value() -> None:
    r, _ = reconciler({uuid.UUID(int=7): "x"})
    r.receive({UUID(int=7): [0]})
    assert not r.receive({uuid.UUID(int=7): [0]})
