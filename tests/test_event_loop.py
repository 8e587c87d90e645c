"""`--event-loop uvloop` really runs the async tests on uvloop (make test has such a pass)."""

from __future__ import annotations

import asyncio


async def test_async_tests_run_on_the_selected_loop(event_loop_name: str) -> None:
    loop_module = type(asyncio.get_running_loop()).__module__
    assert loop_module.split(".")[0] == event_loop_name
