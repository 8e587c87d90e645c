"""The sender without sockets: its one delivery-timeout timer for every request in
flight, and ``decide()``, the rule for each partition's answer."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from aiokproto.errors import KafkaTimeoutError
from aiokproto.producer.sender import Action, _InFlightExpiry, decide
from tests.timers import timers_armed_by


def batch(loop: asyncio.AbstractEventLoop, in_s: float) -> Any:
    return SimpleNamespace(
        future=loop.create_future(),
        deadline=loop.time() + in_s,
        record_count=1,
        topic="t",
        split=None,
        parent=None,
        partition=0,
    )


async def test_one_timer_serves_every_request_and_outlives_the_ones_that_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loop = asyncio.get_running_loop()
    expiry = _InFlightExpiry(loop, 1000)
    armed = timers_armed_by(expiry._timer, monkeypatch)
    early, late = batch(loop, 0.05), batch(loop, 1.0)
    first = expiry.watch([early])
    expiry.watch([late])
    for _ in range(20):  # requests that end at once cost no timer of their own
        expiry.done(expiry.watch([batch(loop, 120)]))
    assert armed == [early.deadline]
    expiry.done(first)  # answered: the timer stays, and re-arms for what is still out
    await asyncio.sleep(0.2)
    assert not late.future.done() and not early.future.done()
    assert armed == [early.deadline, late.deadline]
    await asyncio.sleep(late.deadline - loop.time() + 0.05)
    with pytest.raises(KafkaTimeoutError, match="still out"):
        late.future.result()
    assert not early.future.done()  # its request ended: not the expiry's business
    expiry.close()


async def test_an_earlier_deadline_rearms_and_close_disarms() -> None:
    loop = asyncio.get_running_loop()
    expiry = _InFlightExpiry(loop, 1000)
    late, early = batch(loop, 10), batch(loop, 0.03)
    expiry.watch([late])
    expiry.watch([early])
    await asyncio.sleep(0.1)
    with pytest.raises(KafkaTimeoutError, match="delivery_timeout_ms=1000"):
        early.future.result()
    assert not late.future.done()
    expiry.close()
    gone = batch(loop, 0.01)
    expiry.watch([gone])
    expiry.close()
    await asyncio.sleep(0.05)
    assert not gone.future.done()


@pytest.mark.parametrize(
    ("code", "idempotent", "first", "hint", "action"),
    [
        (0, True, True, False, Action.DONE),
        (46, True, True, False, Action.DONE),  # DUPLICATE_SEQUENCE_NUMBER
        (45, True, False, False, Action.RETRY),  # OUT_OF_ORDER behind an unresolved batch
        (45, True, True, False, Action.RESET),  # OUT_OF_ORDER at the head: a real gap
        (59, True, True, False, Action.RESET),  # UNKNOWN_PRODUCER_ID
        (59, True, False, False, Action.RETRY),
        (6, True, True, False, Action.RETRY),  # NOT_LEADER_OR_FOLLOWER
        (6, True, True, True, Action.RETRY_NOW),  # ... with a KIP-951 leader hint
        (19, False, True, False, Action.RETRY),  # NOT_ENOUGH_REPLICAS
        (7, False, True, False, Action.RETRY),  # REQUEST_TIMED_OUT
        (10, False, True, False, Action.FAIL),  # MESSAGE_TOO_LARGE
        (29, False, True, False, Action.FAIL),  # TOPIC_AUTHORIZATION_FAILED
        (45, False, True, False, Action.FAIL),  # not idempotent: nothing to reset
        (87, True, True, False, Action.FAIL),  # INVALID_RECORD
    ],
)
def test_decide(code: int, idempotent: bool, first: bool, hint: bool, action: Action) -> None:
    assert (
        decide(code, idempotent=idempotent, first_unresolved=first, leader_hint_applied=hint)
        is action
    )
