"""An event-loop alarm with microsecond resolution: a Linux timerfd that the loop
watches, so an asyncio latency run wakes at each send time with the loop asleep (a busy
wait took a CPU from the broker:
``test_async_pacing_sleeps_in_the_loop_instead_of_spinning``).

asyncio's timers wake through the selector's timeout, which epoll takes in whole
milliseconds, rounded up. At 1,000 records/s that rounding is the whole interval. So the
latency scenario used to pace asyncio clients by yielding to the loop in a busy loop
until each send time. That busy loop kept one of this machine's two CPUs busy, and the
broker needed it: confluent-kafka's own p99 went from 0.86 to 1.20 ms (median of three
10,000-record runs) when its pacing spun the same way. A timerfd set to the send time
makes the loop's file descriptor readable at that time, so the loop sleeps in epoll and
wakes on time.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import os
import time
from collections.abc import Callable

_CLOCK_MONOTONIC = 1
_TFD_TIMER_ABSTIME = 1


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


def _timerfd_api() -> tuple[Callable[[], int], Callable[[int, int], None]] | None:
    """(create, set_absolute_ns) for CLOCK_MONOTONIC timer fds, or None where there are
    none. os has them from Python 3.13; before that, libc's through ctypes."""
    # the send times are perf_counter_ns() values: the timer must run on that clock
    if "CLOCK_MONOTONIC)" not in time.get_clock_info("perf_counter").implementation:
        return None
    flags = os.O_NONBLOCK | os.O_CLOEXEC  # TFD_NONBLOCK and TFD_CLOEXEC share their values
    create_fd = getattr(os, "timerfd_create", None)
    settime_ns = getattr(os, "timerfd_settime_ns", None)
    if create_fd is not None and settime_ns is not None:
        return (
            lambda: int(create_fd(_CLOCK_MONOTONIC, flags=flags)),
            lambda fd, due_ns: settime_ns(fd, flags=_TFD_TIMER_ABSTIME, initial=due_ns),
        )
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name, use_errno=True)
        c_create = libc.timerfd_create
        c_settime = libc.timerfd_settime
    except (OSError, AttributeError):
        return None

    def create() -> int:
        fd = int(c_create(_CLOCK_MONOTONIC, flags))
        if fd < 0:
            raise OSError(ctypes.get_errno(), "timerfd_create failed")
        return fd

    def set_absolute(fd: int, due_ns: int) -> None:
        spec = _Itimerspec()
        spec.it_value.tv_sec, spec.it_value.tv_nsec = divmod(due_ns, 1_000_000_000)
        if c_settime(fd, _TFD_TIMER_ABSTIME, ctypes.byref(spec), None) != 0:
            raise OSError(ctypes.get_errno(), "timerfd_settime failed")

    return create, set_absolute


class Alarm:
    """Wakes a coroutine at a ``perf_counter_ns()`` time; one waiter at a time."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, fd: int, settime: Callable[[int, int], None]
    ) -> None:
        self._loop = loop
        self._fd = fd
        self._settime = settime
        self._waiter: asyncio.Future[None] | None = None
        loop.add_reader(fd, self._fired)

    @classmethod
    def open(cls) -> Alarm | None:
        """An alarm on the running loop, or None where the platform or the loop has no
        timer fds (the caller paces another way)."""
        api = _timerfd_api()
        if api is None:
            return None
        create, settime = api
        loop = asyncio.get_running_loop()
        try:
            fd = create()
        except OSError:
            return None
        try:
            return cls(loop, fd, settime)
        except (NotImplementedError, OSError):  # a loop that cannot watch fds
            os.close(fd)
            return None

    async def until(self, due_ns: int) -> None:
        """Return at ``due_ns`` or later (at once if it has passed)."""
        while time.perf_counter_ns() < due_ns:
            waiter = self._waiter = self._loop.create_future()
            self._settime(self._fd, due_ns)
            try:
                await waiter
            finally:
                self._waiter = None

    def _fired(self) -> None:
        try:
            os.read(self._fd, 8)  # the expiry count; reading it re-arms readability
        except BlockingIOError:
            return
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def close(self) -> None:
        self._loop.remove_reader(self._fd)
        os.close(self._fd)
