"""KIP-227 fetch session bookkeeping (pure)."""

from __future__ import annotations

import uuid

from aiokproto.consumer.session import FetchSession, PartitionFetch
from aiokproto.structs import TopicPartition

ID = uuid.uuid4()
A0 = TopicPartition("a", 0)
A1 = TopicPartition("a", 1)


def spec(offset: int, topic_id: uuid.UUID = ID) -> PartitionFetch:
    return PartitionFetch(topic_id, offset, 0, -1, 1 << 20)


def test_first_request_is_full_and_opens_a_session() -> None:
    s = FetchSession()
    plan = s.plan({A0: spec(0), A1: spec(0)})
    assert plan.full and plan.session_id == 0 and plan.epoch == 0
    assert set(plan.send) == {A0, A1} and not plan.forgotten
    s.on_response(plan, 0, 42)
    assert (s.session_id, s.epoch) == (42, 1)
    assert dict(s.known) == {A0: spec(0), A1: spec(0)}


def test_incremental_sends_only_changes_and_forgets() -> None:
    s = FetchSession()
    s.on_response(s.plan({A0: spec(0), A1: spec(0)}), 0, 7)
    # A0 got data (new offset); A1 unchanged: not named, still fetched by the session
    plan = s.plan({A0: spec(5), A1: spec(0)})
    assert not plan.full and (plan.session_id, plan.epoch) == (7, 1)
    assert dict(plan.send) == {A0: spec(5)} and not plan.forgotten
    s.on_response(plan, 0, 7)
    assert s.epoch == 2
    # A1 has buffered data now: it must be forgotten, not silently fetched again
    plan = s.plan({A0: spec(5)})
    assert not plan.send and dict(plan.forgotten) == {A1: ID}
    s.on_response(plan, 0, 7)
    assert dict(s.known) == {A0: spec(5)} and s.epoch == 3
    # and added back with its new offset later
    plan = s.plan({A0: spec(5), A1: spec(9)})
    assert dict(plan.send) == {A1: spec(9)}


def test_session_errors_fall_back_to_full_fetch() -> None:
    for code, keeps_id in ((70, False), (71, True)):
        s = FetchSession()
        s.on_response(s.plan({A0: spec(0)}), 0, 7)
        plan = s.plan({A0: spec(3)})
        s.on_response(plan, code, 0)
        assert s.epoch == 0 and not s.known
        nxt = s.plan({A0: spec(3)})
        assert nxt.full and dict(nxt.send) == {A0: spec(3)}
        # INVALID_FETCH_SESSION_EPOCH closes the old session by id; NOT_FOUND has none
        assert nxt.session_id == (7 if keeps_id else 0)


def test_failure_unanswered_request_restarts() -> None:
    s = FetchSession()
    s.on_response(s.plan({A0: spec(0)}), 0, 7)
    s.on_failure()
    plan = s.plan({A0: spec(0)})
    assert plan.full and plan.epoch == 0 and plan.session_id == 7


def test_broker_without_session_and_old_versions() -> None:
    s = FetchSession()
    plan = s.plan({A0: spec(0)})
    s.on_response(plan, 0, 0)  # the broker declined to open a session
    assert s.plan({A0: spec(1)}).full
    legacy = s.plan({A0: spec(1)}, sessions=False)
    assert legacy.full and legacy.epoch == -1 and legacy.session_id == 0
    s.on_response(legacy, 0, 0)
    assert s.epoch == 0


def test_recreated_topic_restarts_session() -> None:
    s = FetchSession()
    s.on_response(s.plan({A0: spec(0)}), 0, 7)
    plan = s.plan({A0: spec(0, uuid.uuid4())})
    assert plan.full


def test_epoch_wraps_to_one() -> None:
    s = FetchSession()
    s.on_response(s.plan({A0: spec(0)}), 0, 7)
    s.epoch = 0x7FFFFFFF
    s.on_response(s.plan({A0: spec(0)}), 0, 7)
    assert s.epoch == 1
