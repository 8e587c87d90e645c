"""Watching which timers an object arms on the running event loop."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest


def timers_armed_by(owner: object, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The loop times of the timers that ``owner``'s bound methods arm from now on
    (through ``call_at``, which ``call_later`` uses too), in order."""
    loop = asyncio.get_running_loop()
    armed: list[float] = []
    real_call_at = loop.call_at

    def call_at(when: float, callback: Any, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
        if getattr(callback, "__self__", None) is owner:
            armed.append(when)
        return real_call_at(when, callback, *args, **kwargs)

    monkeypatch.setattr(loop, "call_at", call_at)
    return armed
