"""``ShareSession``: a share session's epochs and the partitions it adds and forgets,
without sockets."""

from __future__ import annotations

from aiokproto.share.session import CLOSE_EPOCH, ShareSession
from aiokproto.structs import TopicPartition

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def test_session_first_request_opens_with_every_partition() -> None:
    s = ShareSession()
    assert not s.is_open
    step = s.plan(frozenset({TP0, TP1}), frozenset())
    assert (step.epoch, step.add, step.forget) == (0, {TP0, TP1}, frozenset())
    s.succeeded(step)
    assert s.is_open and s.epoch == 1 and s.partitions == {TP0, TP1}


def test_session_later_requests_name_only_changes_and_acks() -> None:
    s = ShareSession()
    s.succeeded(s.plan(frozenset({TP0, TP1}), frozenset()))
    step = s.plan(frozenset({TP0, TP1}), frozenset())
    assert (step.epoch, step.add, step.forget) == (1, frozenset(), frozenset())
    step = s.plan(frozenset({TP0, TP1}), frozenset({TP1}))
    assert step.add == {TP1} and not step.forget
    s.succeeded(step)
    assert s.epoch == 2 and s.partitions == {TP0, TP1}
    tp2 = TopicPartition("t", 2)
    step = s.plan(frozenset({TP0, tp2}), frozenset())
    assert step.add == {tp2} and step.forget == {TP1}
    s.succeeded(step)
    assert s.partitions == {TP0, tp2} and s.epoch == 3


def test_session_forgets_a_partition_only_after_its_acks_are_out() -> None:
    s = ShareSession()
    s.succeeded(s.plan(frozenset({TP0, TP1}), frozenset()))
    # TP1 is no longer assigned but has acknowledgements to carry: kept this time
    step = s.plan(frozenset({TP0}), frozenset({TP1}))
    assert TP1 in step.add and TP1 not in step.forget
    s.succeeded(step)
    assert TP1 in s.partitions
    # no more acknowledgements: forgotten now
    step = s.plan(frozenset({TP0}), frozenset())
    assert step.forget == {TP1} and not step.add
    s.succeeded(step)
    assert s.partitions == {TP0}


def test_session_acks_for_a_partition_never_in_it_are_not_added() -> None:
    s = ShareSession()
    s.succeeded(s.plan(frozenset({TP0}), frozenset()))
    step = s.plan(frozenset({TP0}), frozenset({TP1}))
    assert TP1 not in step.add


def test_session_acknowledged_moves_only_the_epoch() -> None:
    s = ShareSession()
    s.succeeded(s.plan(frozenset({TP0}), frozenset()))
    s.acknowledged()
    assert s.epoch == 2 and s.partitions == {TP0}


def test_session_reset() -> None:
    s = ShareSession()
    s.succeeded(s.plan(frozenset({TP0}), frozenset()))
    s.reset()
    assert s.epoch == 0 and not s.is_open and s.partitions == frozenset()
    step = s.plan(frozenset({TP1}), frozenset({TP0}))
    assert step.epoch == 0 and step.add == {TP1} and not step.forget


def test_session_epoch_wraps_to_one_not_zero() -> None:
    s = ShareSession()
    s.succeeded(s.plan(frozenset({TP0}), frozenset()))
    s.epoch = 2**31 - 1
    s.succeeded(s.plan(frozenset({TP0}), frozenset()))
    assert s.epoch == 1
    s.epoch = 2**31 - 1
    s.acknowledged()
    assert s.epoch == 1 and s.is_open
    assert CLOSE_EPOCH == -1
