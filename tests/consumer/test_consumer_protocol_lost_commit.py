"""Consumer groups (KIP-848, group_protocol="consumer"): a commit() issued while
on_partitions_lost runs (from the application's own task) names partitions whose
ownership already ended. It must fail with CommitFailedError and never be sent in a
later member epoch with the positions taken before the loss, even when the rejoin
hands the same partition back; so must a commit that began while the member owned the
partition and is retried after the loss. The classic protocol's twin is
test_classic_lost_commit.py."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from aiokproto.consumer import CommitFailedError, Consumer
from aiokproto.consumer.group.consumer_driver import ConsumerGroupDriver
from aiokproto.consumer.group.consumer_machine import State
from aiokproto.errors import FencedMemberEpochError, KafkaConnectionError, UnknownMemberIdError
from aiokproto.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from aiokproto.structs import OffsetAndMetadata, TopicPartition
from tests.consumer.conftest import set_group_timeouts
from tests.consumer.lost_commit import HoldsTheLoss, forty_records, record_commits
from tests.consumer.test_consume_group_e2e import take
from tests.consumer.test_group_guarantees import until


def member(kafka: Any, topic: str, group: str, **options: Any) -> Consumer:
    defaults: dict[str, Any] = {
        "auto_offset_reset": "earliest",
        "enable_auto_commit": False,
        "default_api_timeout_ms": 30_000,
        "group_protocol": "consumer",
    }
    return Consumer(
        topic,
        bootstrap_servers=kafka.bootstrap_servers,
        group_id=group,
        **{**defaults, **options},
    )


def record_heartbeats(
    driver: ConsumerGroupDriver, monkeypatch: Any, bump_epoch: Callable[[], bool]
) -> list[tuple[int, int]]:
    """Every heartbeat answer from now on: (epoch sent, error code). While
    ``bump_epoch()`` holds, a heartbeat goes out with an epoch the broker never gave
    (it answers FENCED_MEMBER_EPOCH)."""
    real = driver._send
    answers: list[tuple[int, int]] = []

    async def spy(conn: Any, request: ConsumerGroupHeartbeatRequest) -> Any:
        if request.member_epoch > 0 and bump_epoch():
            request.member_epoch += 1000
        response = await real(conn, request)
        answers.append((request.member_epoch, response.error_code))
        return response

    monkeypatch.setattr(driver, "_send", spy)
    return answers


async def leave_on_behalf_of(driver: ConsumerGroupDriver) -> None:
    """A leave heartbeat (epoch -1) for the driver's member, which does not know: the
    broker forgets it, as after a session timeout; its next heartbeat is answered
    UNKNOWN_MEMBER_ID."""
    node = await driver._offsets.coordinator()
    conn = await driver._client.connection(node, "group")
    request = ConsumerGroupHeartbeatRequest(
        group_id=driver.config.group_id, member_id=driver.member_id, member_epoch=-1
    )
    response = await driver._send(conn, request)
    assert response.error_code == 0, response


@pytest.mark.parametrize("how", ["unknown member", "fenced epoch", "poll timeout"])
async def test_a_commit_issued_while_partitions_are_lost_fails_and_is_never_sent_later(
    kafka: Any, topic_name: str, monkeypatch: Any, how: str
) -> None:
    # a consumes 20 of 40 records and commits 10, then loses the partition: the broker
    # forgot it ("unknown member": its next heartbeat is answered UNKNOWN_MEMBER_ID), its
    # heartbeat is answered FENCED_MEMBER_EPOCH ("fenced epoch"), or it did not poll for
    # max_poll_interval_ms ("poll timeout": it sends the leave heartbeat). While its
    # on_partitions_lost runs, the application's loop polls and calls commit(), which
    # names the lost partition at position 20. The rejoin gives a the same partition
    # back; that commit must fail, not go out as 20 in the new member epoch. With
    # "unknown member" and "poll timeout" the broker no longer counts a as a member, so
    # b owns the partition in between, consumes to 40 and commits: a stale 20 would take
    # b's progress back (records 20-39 read twice).
    tp = await forty_records(kafka.bootstrap_servers, topic_name)
    group = f"g-{topic_name}"
    # heartbeats every 500 ms (the broker's default is 5 s)
    await set_group_timeouts(kafka.bootstrap_servers, group, session_ms=20_000, heartbeat_ms=500)
    extra: dict[str, Any] = {"max_poll_interval_ms": 3000} if how == "poll timeout" else {}
    a = member(kafka, topic_name, group, **extra)
    listener = HoldsTheLoss()
    a.subscribe([topic_name], listener=listener)
    async with asyncio.timeout(90):
        async with a:
            driver = a.group_coordinator
            assert isinstance(driver, ConsumerGroupDriver)
            await take(a, 20)
            await a.commit({tp: 10})
            epoch = driver.member_epoch
            reconciliations = driver.reconciliations
            sent = record_commits(driver, monkeypatch)
            fence = how == "fenced epoch"
            answers = record_heartbeats(driver, monkeypatch, lambda: fence)
            committing: list[asyncio.Future[None]] = []
            parked = asyncio.Event()  # the commit waits for the member to rejoin
            real_until = driver._until

            async def until_spy(
                predicate: Callable[[], bool], timeout_s: float | None = None
            ) -> bool:
                if committing and asyncio.current_task() is committing[0]:
                    parked.set()
                return await real_until(predicate, timeout_s)

            monkeypatch.setattr(driver, "_until", until_spy)
            if how == "unknown member":
                await leave_on_behalf_of(driver)
            # "poll timeout": nothing polls from here until the listener runs
            await until(listener.entered.is_set, 20)
            fence = False
            assert listener.lost == [frozenset({tp})]
            losing: State = State.STALE if how == "poll timeout" else State.FENCED
            assert driver.state is losing
            if how == "poll timeout":
                await a.getmany(timeout_ms=0)  # the loop polls again: a rejoins after
            committing.append(asyncio.ensure_future(a.commit()))  # the loop's own task
            await until(lambda: parked.is_set() or committing[0].done(), 10)
            done_before_release = committing[0].done()
            progress = 10
            if how != "fenced epoch":
                b = member(kafka, topic_name, group)
                async with b:
                    await take(b, 30)  # from the committed 10 to the end
                    await b.commit()
                progress = 40
            listener.release.set()
            try:
                await committing[0]
                outcome: BaseException | None = None
            except Exception as exc:  # asserted below, with what was sent
                outcome = exc
            # the rejoin gives a the same partition back (the loop keeps polling)
            while not (
                driver.state is State.STABLE
                and driver.reconciliations > reconciliations
                and a.assignment() == {tp}
            ):
                await a.getmany(timeout_ms=100)
            rejoined = driver.member_epoch
    async with member(kafka, topic_name, group) as check:
        committed = await check.committed(tp)
    codes = {code for _, code in answers if code}
    seen = (
        f"commit() -> {outcome!r} (done before the listener returned: "
        f"{done_before_release}); OffsetCommits sent (epoch, offsets): {sent}; committed "
        f"{committed}; member epoch {epoch} -> {rejoined}; heartbeat errors {codes}"
    )
    print(seen)
    expected = {
        "unknown member": {UnknownMemberIdError.errno},
        "fenced epoch": {FencedMemberEpochError.errno},
        "poll timeout": set(),
    }
    assert codes == expected[how], seen  # the loss came as intended
    assert isinstance(outcome, CommitFailedError), seen
    if how != "poll timeout":  # (after a poll timeout: "not a member of group ... now")
        assert f"{topic_name}-0" in str(outcome), seen  # it names the lost partition
    # no OffsetCommit carried the position taken before the loss, in any epoch
    assert not [offsets for _, offsets in sent if offsets.get(tp) == 20], seen
    assert committed == progress, seen


async def test_a_commit_retried_across_a_loss_fails_and_is_never_sent_later(
    kafka: Any, topic_name: str, monkeypatch: Any
) -> None:
    # a consumes 20 of 40 records, commits 10, then calls commit() (position 20) while
    # it owns the partition; that OffsetCommit gets no answer (the connection died) and
    # the commit waits to retry. Meanwhile the broker forgets a (its next heartbeat is
    # answered UNKNOWN_MEMBER_ID), a loses the partition, b takes it, consumes to 40,
    # commits and leaves, and a's rejoin gives a the partition back. The retry must
    # fail: sent with the new member epoch, 20 would take b's progress back.
    tp = await forty_records(kafka.bootstrap_servers, topic_name)
    group = f"g-{topic_name}"
    await set_group_timeouts(kafka.bootstrap_servers, group, session_ms=20_000, heartbeat_ms=500)
    a = member(kafka, topic_name, group)
    listener = HoldsTheLoss()  # held until b is done: a's rejoin would take it back
    a.subscribe([topic_name], listener=listener)
    async with asyncio.timeout(90):
        async with a:
            driver = a.group_coordinator
            assert isinstance(driver, ConsumerGroupDriver)
            await take(a, 20)
            await a.commit({tp: 10})
            epoch = driver.member_epoch
            reconciliations = driver.reconciliations
            sent = record_commits(driver, monkeypatch)
            answers = record_heartbeats(driver, monkeypatch, lambda: False)
            real_commit_once = driver._offsets.commit_once  # (the spy)
            cut = [True]

            async def first_one_lost(
                offsets: dict[TopicPartition, OffsetAndMetadata],
                generation: int,
                member_id: str,
                deadline: float,
            ) -> dict[TopicPartition, int]:
                if cut.pop() if cut else False:
                    sent.append((generation, {tp: om.offset for tp, om in offsets.items()}))
                    raise KafkaConnectionError("test: the connection died, no answer")
                return await real_commit_once(offsets, generation, member_id, deadline)

            monkeypatch.setattr(driver._offsets, "commit_once", first_one_lost)
            parked = asyncio.Event()  # the commit waits to retry
            resume = asyncio.Event()
            real_backoff = driver._commit_backoff

            async def parked_backoff(
                backoff: Any, deadline: float, limit_s: float, last: BaseException | None
            ) -> None:
                if not parked.is_set():
                    parked.set()
                    await resume.wait()
                await real_backoff(backoff, deadline, limit_s, last)

            monkeypatch.setattr(driver, "_commit_backoff", parked_backoff)
            committing = asyncio.ensure_future(a.commit())  # the loop's own task
            await until(lambda: parked.is_set() or committing.done(), 10)
            assert sent == [(epoch, {tp: 20})], sent  # it owned the partition then
            await leave_on_behalf_of(driver)
            await until(listener.entered.is_set, 20)
            assert listener.lost == [frozenset({tp})]
            b = member(kafka, topic_name, group)
            async with b:
                await take(b, 30)  # from the committed 10 to the end
                await b.commit()
            listener.release.set()
            # the rejoin gives a the same partition back (the loop keeps polling)
            while not (
                driver.state is State.STABLE
                and driver.reconciliations > reconciliations
                and a.assignment() == {tp}
            ):
                await a.getmany(timeout_ms=100)
            rejoined = driver.member_epoch
            resume.set()
            try:
                await committing
                outcome: BaseException | None = None
            except Exception as exc:  # asserted below, with what was sent
                outcome = exc
    async with member(kafka, topic_name, group) as check:
        committed = await check.committed(tp)
    codes = {code for _, code in answers if code}
    seen = (
        f"commit() -> {outcome!r}; OffsetCommits sent (epoch, offsets): {sent}; committed "
        f"{committed}; member epoch {epoch} -> {rejoined}; heartbeat errors {codes}"
    )
    print(seen)
    assert codes == {UnknownMemberIdError.errno}, seen  # the loss came as intended
    assert isinstance(outcome, CommitFailedError), seen
    assert f"{topic_name}-0" in str(outcome), seen
    # the only OffsetCommit with 20 is the first one, sent while a owned the partition
    assert [offsets for _, offsets in sent if offsets.get(tp) == 20] == [{tp: 20}], seen
    assert committed == 40, seen
