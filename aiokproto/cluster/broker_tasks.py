"""One task per broker, owned by the client that runs them: the fetch loops of the
consumer (``consumer/fetcher.py``) and of the share consumer (``share/fetcher.py``).

``BrokerTasks`` starts a broker's task when its owner asks (a broker that leads
partitions now, or has acknowledgements due), forgets it when it ends (its partitions
moved: the owner starts another when it needs one), and stops them all on ``close()``.
A task that fails (an exception other than a cancellation) is a defect, not a broker
answer: the owner's ``failed`` hook hears it (to raise it from the application's next
call), the owner's ``release`` hook wakes every waiter, and no task starts after it
(fetching has stopped; an endless quiet would hide it). ``close()`` releases the
waiters too: no waiter outlives the tasks it waits on.

``Wakeup`` and ``wait_event`` are how those tasks and their readers wait for a change.
No sockets here: the module runs under a bare event loop
(``tests/unit/cluster/test_broker_tasks.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)


class Wakeup:
    """An event many waiters can wait on without missing a ``set`` between waits."""

    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def set(self) -> None:
        event, self._event = self._event, asyncio.Event()
        event.set()

    def waiter(self) -> asyncio.Event:
        """Take this before checking for work; ``await waiter.wait()`` if there is none."""
        return self._event

    def awaited(self) -> bool:
        """Whether a task is waiting on the current event now (asyncio.Event keeps its
        waiters' futures in ``_waiters`` on 3.11 to 3.13; without it: nobody)."""
        return bool(getattr(self._event, "_waiters", None))


async def wait_event(event: asyncio.Event, seconds: float | None) -> None:
    """Wait for ``event``, at most ``seconds`` (forever if None).

    asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation that
    lands as the event fires, and a ``stop()`` then waits on a task that goes on."""
    if seconds is None:
        await event.wait()
        return
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await event.wait()


class BrokerTasks:
    """The per-broker tasks of one client, keyed by node id."""

    __slots__ = ("_failed", "_log", "_name", "_release", "_tasks", "closed", "failure")

    def __init__(
        self,
        name: str,
        *,
        failed: Callable[[int, BaseException], None],
        release: Callable[[], None],
        logger: logging.Logger = log,
    ) -> None:
        """``name`` prefixes the task names (``f"{name}-{node}"``); ``failed(node, exc)``
        hears a task's failure; ``release()`` wakes the owner's waiters; a failure is
        logged on ``logger`` (the owner's documented logger)."""
        self._name = name
        self._log = logger
        self._failed = failed
        self._release = release
        self._tasks: dict[int, asyncio.Task[None]] = {}
        #: the first task failure; once set, ``start`` starts nothing
        self.failure: BaseException | None = None
        self.closed = False

    def __contains__(self, node: object) -> bool:
        return node in self._tasks

    def __len__(self) -> int:
        return len(self._tasks)

    def nodes(self) -> list[int]:
        """The brokers with a running task, sorted."""
        return sorted(self._tasks)

    def start(self, node: int, job: Callable[[int], Awaitable[None]]) -> bool:
        """Run ``job(node)`` as ``node``'s task unless one runs already, one failed, or
        the tasks are closed. True if it started one."""
        if node in self._tasks or self.failure is not None or self.closed:
            return False
        # the coroutine is made inside the task: one cancelled before it ran leaves
        # no never-awaited coroutine behind
        self._tasks[node] = asyncio.get_running_loop().create_task(
            self._run(node, job), name=f"{self._name}-{node}"
        )
        return True

    async def _run(self, node: int, job: Callable[[int], Awaitable[None]]) -> None:
        try:
            await job(node)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            self._log.exception("aiokproto task %s failed", f"{self._name}-{node}")
            if self.failure is None:
                self.failure = exc
            try:
                self._failed(node, exc)
            finally:
                self._release()
        finally:
            if self._tasks.get(node) is asyncio.current_task():
                del self._tasks[node]

    async def join(self) -> None:
        """Wait until the running tasks end on their own (the owner told them to);
        their failures were already reported."""
        tasks = list(self._tasks.values())
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def close(self) -> None:
        """Release the waiters, cancel every task and wait for them all to end."""
        self.closed = True
        self._release()
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
