"""An event loop whose clock jumps ahead whenever nothing is ready.

Client and fake broker run in one thread and talk over loopback sockets, so when the
selector reports nothing ready, nothing can become ready until the next timer: the
loop moves its clock to that timer at once instead of sleeping. Timeouts keep their
meaning (a 1 s request timeout still fires after 1 s of loop time) but cost no wall
time, and a case is deterministic given its seed. A wall-clock watchdog catches
clients that spin without ever letting the clock move.
"""

from __future__ import annotations

import asyncio
import selectors
import socket
import time
from collections.abc import Callable, Mapping
from typing import Any

_START = 1000.0  # loop time at creation; anything but 0, to catch "if deadline:" bugs


class _JumpingSelector(selectors.BaseSelector):
    def __init__(self) -> None:
        self._real = selectors.DefaultSelector()
        self.now = _START
        self.wall_deadline: float | None = None
        self.on_wall_deadline: Callable[[], None] | None = None

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._real.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.modify(fileobj, events, data)

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return self._real.get_map()

    def close(self) -> None:
        self._real.close()

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        # Called once per loop iteration: the natural place for the spin watchdog.
        if self.wall_deadline is not None and time.monotonic() > self.wall_deadline:
            self.wall_deadline = None
            if self.on_wall_deadline is not None:
                self.on_wall_deadline()
        events = self._real.select(0)
        if events or (timeout is not None and timeout <= 0):
            return events
        if timeout is None:
            # No timer at all: only another thread could wake us (never in a case).
            return self._real.select(None)
        self.now += timeout
        return []


class VirtualClockLoop(asyncio.SelectorEventLoop):
    """``SelectorEventLoop`` on a virtual clock (see the module docstring)."""

    def __init__(self) -> None:
        self._jumping = _JumpingSelector()
        super().__init__(self._jumping)

    def time(self) -> float:
        return self._jumping.now

    async def getaddrinfo(
        self, host: Any, port: Any, *, family: int = 0, type: int = 0, proto: int = 0,
        flags: int = 0,
    ) -> list[Any]:
        # Mutated answers name hosts like "127.0.0.1x": no DNS lookups (a thread, real
        # time, the outside network) in a fuzz run. Numeric hosts resolve, names fail
        # as with an unreachable resolver (socket.gaierror).
        return socket.getaddrinfo(host, port, family, type, proto, flags | socket.AI_NUMERICHOST)

    def arm_watchdog(self, wall_seconds: float, on_expiry: Callable[[], None]) -> None:
        """Call ``on_expiry`` (from the loop) once ``wall_seconds`` of real time pass."""
        self._jumping.wall_deadline = time.monotonic() + wall_seconds
        self._jumping.on_wall_deadline = on_expiry

    def disarm_watchdog(self) -> None:
        self._jumping.wall_deadline = None
        self._jumping.on_wall_deadline = None
