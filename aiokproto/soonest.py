"""One event-loop timer for many deadlines: it runs a callback by the earliest time any
of them asked for. A connection's requests and a producer's in-flight batches each
share one, instead of one timer per request (a heap push, then a cancel per answer)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class SoonestTimer:
    """Runs ``callback`` once by the soonest time passed to ``arm_by`` since it last
    ran. Nothing is cancelled when a deadline goes away: the callback finds what is
    due, and arms again for what is still waiting."""

    __slots__ = ("_at", "_callback", "_handle")

    def __init__(self, callback: Callable[[], None]) -> None:
        self._callback = callback
        self._handle: asyncio.TimerHandle | None = None
        # the time asked for: uvloop's ``TimerHandle.when()`` is rounded to the
        # millisecond, and comparing against it re-armed for every later deadline
        # less than a millisecond away
        self._at = 0.0

    @property
    def armed(self) -> bool:
        return self._handle is not None

    def arm_by(self, when: float) -> None:
        """Make sure the callback runs no later than ``when`` (event-loop time); an
        earlier one already armed is kept."""
        handle = self._handle
        if handle is not None:
            if self._at <= when:
                return
            handle.cancel()
        self._at = when
        self._handle = asyncio.get_running_loop().call_at(when, self._fire)

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _fire(self) -> None:
        self._handle = None  # the callback may arm again
        self._callback()
