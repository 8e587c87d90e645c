"""Classic groups: a commit() issued while on_partitions_lost runs (from the
application's own task) names partitions whose ownership already ended. It must fail
with CommitFailedError, as Java's ConsumerCoordinator fails a commit made without a
stable generation, and never be sent in a later generation with the positions taken
before the loss, even when the rejoin hands the same partition back."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aiokproto.consumer import CommitFailedError, Consumer
from aiokproto.consumer.group import ClassicGroupDriver
from aiokproto.consumer.group.classic_machine import State
from tests.consumer.lost_commit import HoldsTheLoss, forty_records, record_commits
from tests.consumer.test_consume_group_e2e import take
from tests.consumer.test_group_guarantees import until


def member(kafka: Any, topic: str, group: str, **options: Any) -> Consumer:
    defaults: dict[str, Any] = {
        "auto_offset_reset": "earliest",
        "enable_auto_commit": False,
        "session_timeout_ms": 6000,
        "heartbeat_interval_ms": 500,
        "default_api_timeout_ms": 30_000,
    }
    return Consumer(
        topic,
        bootstrap_servers=kafka.bootstrap_servers,
        group_id=group,
        **{**defaults, **options},
    )


@pytest.mark.parametrize("how", ["unknown member", "poll timeout"])
async def test_a_commit_issued_while_partitions_are_lost_fails_and_is_never_sent_later(
    kafka: Any, topic_name: str, monkeypatch: Any, how: str
) -> None:
    # a consumes 20 of 40 records and commits 10, then loses the partition: the broker
    # forgot it ("unknown member": its next heartbeat is answered UNKNOWN_MEMBER_ID), or
    # it did not poll for max_poll_interval_ms ("poll timeout"). While its
    # on_partitions_lost runs, the application's loop polls and calls commit(), which
    # names the lost partition at position 20. The rejoin gives a the same partition
    # back; that commit must fail, not go out as 20 in the new generation. With
    # "unknown member", b owns the partition in between, consumes to 40 and commits:
    # a stale 20 would take b's progress back (records 20-39 read twice).
    tp = await forty_records(kafka.bootstrap_servers, topic_name)
    group = f"g-{topic_name}"
    extra: dict[str, Any] = {"max_poll_interval_ms": 3000} if how == "poll timeout" else {}
    a = member(kafka, topic_name, group, **extra)
    listener = HoldsTheLoss()
    a.subscribe([topic_name], listener=listener)
    async with asyncio.timeout(90):
        async with a:
            coordinator = a.group_coordinator
            assert isinstance(coordinator, ClassicGroupDriver)
            await take(a, 20)
            await a.commit({tp: 10})
            generation = coordinator.generation_id
            sent = record_commits(coordinator, monkeypatch)
            waiting = asyncio.Event()  # the commit parked until the group lets it commit
            until_possible = coordinator._until_commit_possible

            async def parked(deadline: float) -> None:
                waiting.set()
                await until_possible(deadline)

            monkeypatch.setattr(coordinator, "_until_commit_possible", parked)
            if how == "unknown member":
                # a LeaveGroup on a's behalf: the broker forgets the member, as after
                # a session timeout, and a's machine does not know yet
                await coordinator._leave_group(coordinator.member_id)
            # "poll timeout": nothing polls from here until the listener runs
            await until(listener.entered.is_set, 20)
            assert listener.lost == [frozenset({tp})]
            if how == "poll timeout":
                await a.getmany(timeout_ms=0)  # the loop polls again: a rejoins after
            committing = asyncio.ensure_future(a.commit())  # the loop's own task
            await until(lambda: waiting.is_set() or committing.done(), 10)
            progress = 10
            if how == "unknown member":
                b = member(kafka, topic_name, group)
                async with b:
                    await take(b, 30)  # from the committed 10 to the end
                    await b.commit()
                progress = 40
            listener.release.set()
            try:
                await committing
                outcome: BaseException | None = None
            except Exception as exc:  # asserted below, with what was sent
                outcome = exc
            # the rejoin gives a the same partition back, in a later generation
            await until(
                lambda: (
                    coordinator.state is State.STABLE
                    and coordinator.generation_id > generation
                    and a.assignment() == {tp}
                ),
                30,
            )
            rejoined = coordinator.generation_id
    async with member(kafka, topic_name, group) as check:
        committed = await check.committed(tp)
    seen = (
        f"commit() -> {outcome!r}; OffsetCommits sent (generation, offsets): {sent}; "
        f"committed {committed}; generation {generation} -> {rejoined}"
    )
    assert isinstance(outcome, CommitFailedError), seen
    assert f"{topic_name}-0" in str(outcome), seen  # it names the lost partition
    assert rejoined != generation, seen
    # no OffsetCommit carried the position taken before the loss, in any generation
    assert not [offsets for _, offsets in sent if offsets.get(tp) == 20], seen
    assert committed == progress, seen
