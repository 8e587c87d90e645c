"""``SoonestTimer``: one loop timer by the earliest of many deadlines (no sockets; in
the uvloop slice too, whose timer handles round their time to the millisecond)."""

from __future__ import annotations

import asyncio

import pytest

from aiokproto.soonest import SoonestTimer
from tests.timers import timers_armed_by


async def test_a_later_deadline_keeps_the_timer_and_an_earlier_one_replaces_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loop = asyncio.get_running_loop()
    fired: list[float] = []
    timer = SoonestTimer(lambda: fired.append(loop.time()))
    armed = timers_armed_by(timer, monkeypatch)
    start = loop.time()  # uvloop's clock counts whole milliseconds
    first = start + 0.2006
    timer.arm_by(first)
    # later by less than a millisecond: uvloop's handle says the time rounded to the
    # millisecond (here up, to start + 0.201), and comparing with that re-armed for
    # each of these
    for i in range(1, 20):
        timer.arm_by(first + i * 1e-5)
    assert armed == [first]
    timer.arm_by(start + 0.05)
    assert armed == [first, start + 0.05]
    await asyncio.sleep(0.3)
    assert len(fired) == 1 and start + 0.04 <= fired[0] < start + 0.2  # the old one is gone
    assert not timer.armed


async def test_the_callback_may_arm_again_and_cancel_disarms() -> None:
    loop = asyncio.get_running_loop()
    runs = 0

    def again() -> None:
        nonlocal runs
        runs += 1
        if runs < 3:
            timer.arm_by(loop.time() + 0.01)

    timer = SoonestTimer(again)
    timer.arm_by(loop.time() + 0.01)
    await asyncio.sleep(0.2)
    assert runs == 3 and not timer.armed
    timer.arm_by(loop.time() + 0.02)
    assert timer.armed
    timer.cancel()
    timer.cancel()  # idempotent
    await asyncio.sleep(0.1)
    assert runs == 3 and not timer.armed
