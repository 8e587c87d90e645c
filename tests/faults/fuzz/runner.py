"""Run cases and check them: typed outcome, bounded time, nothing left behind.

A case runs its scenario against the replaying fake on a ``VirtualClockLoop``. It
passes if the scenario ends in success or a ``KafkaError`` within the scenario's bound
(loop time), no task it created is still pending afterwards, and the loop's exception
handler is never called (that is where "Task/Future exception was never retrieved"
and exceptions escaping protocol callbacks end up).
"""

from __future__ import annotations

import asyncio
import faulthandler
import gc
import logging
import os
import random
import time
import traceback
import weakref
from collections.abc import Coroutine, Iterable
from dataclasses import dataclass, field
from typing import Any, TextIO

from aiokproto.errors import KafkaError
from aiokproto.protocol.messages import API_NAMES
from tests.faults.fuzz.corpus import Corpus
from tests.faults.fuzz.plans import NO_MUTATION, Plan
from tests.faults.fuzz.replay import ReplayServer, ReplaySession
from tests.faults.fuzz.scenarios import BOUND_S, SCENARIOS, Names
from tests.faults.fuzz.vloop import VirtualClockLoop

SUCCESS = "success"
# failure kinds
HANG = "HANG"  # not finished within the scenario's bound (loop time)
SPIN = "SPIN"  # the loop clock never got there: busy for WALL_LIMIT_S of real time
WRONG_TYPE = "WRONG-TYPE"  # an exception that is not a KafkaError
PENDING = "PENDING-TASKS"  # tasks of the case still pending after it ended
LOOP_ERROR = "LOOP-ERROR"  # the loop's exception handler was called during the case
NEVER_RETRIEVED = "NEVER-RETRIEVED"  # a task/future exception nobody retrieved
MEMORY = "MEMORY"  # the process's peak RSS grew by more than MEMORY_LIMIT in one case
CRASH = "CRASH"  # the client logged a non-Kafka exception its catch-all caught (a bug)
HARNESS = "HARNESS-ERROR"  # a mutation itself failed: a bug in the fuzzer, not the client

# Answers are at most ~100 KiB: a case allocating more than this trusted a length.
MEMORY_LIMIT = 32 * 2**20

WALL_LIMIT_S = 20.0
# A callback that never returns cannot be cancelled: faulthandler dumps the stacks and
# ends the process when a window of cases takes this long (normally 1-2 s).
HARD_LIMIT_S = 120
CANCEL_GRACE_S = 30.0  # loop time a hung scenario gets to unwind after cancel()
_NEVER = ("Task exception was never retrieved", "Future exception was never retrieved")


def replay_command(plan: Plan) -> str:
    flag = " --baseline" if plan.mutation == NO_MUTATION else ""
    return (
        f"PYTHONHASHSEED=0 .venv/bin/python -m tests.faults.fuzz "
        f"--seed {plan.seed} --case {plan.index}{flag}"
    )


@dataclass
class CaseResult:
    plan: Plan
    outcome: str  # SUCCESS, a KafkaError class name, or a failure kind
    failure: bool
    detail: str = ""
    applied: str = ""  # what the mutation did ("" if its answer never came up)
    loop_seconds: float = 0.0
    wall_seconds: float = 0.0
    session: ReplaySession | None = field(default=None, repr=False)

    def line(self) -> str:
        return (
            f"case {self.plan.case_id} {self.plan.scenario} [{self.applied or self.plan.mutation}]"
            f" -> {self.outcome}; replay: {replay_command(self.plan)}"
        )


async def _wait_bounded(
    loop: VirtualClockLoop, tasks: list[asyncio.Task[Any]], timeout_s: float, wall_s: float
) -> None:
    """Wait for ``tasks`` up to ``timeout_s`` of loop time, or ``wall_s`` of real time
    if the loop clock cannot move (tasks that keep something always ready)."""
    stop: asyncio.Future[None] = loop.create_future()

    def give_up() -> None:
        if not stop.done():
            stop.set_result(None)

    loop.arm_watchdog(wall_s, give_up)
    deadline = loop.time() + timeout_s
    try:
        remaining: set[asyncio.Future[Any]] = {t for t in tasks if not t.done()}
        while remaining and not stop.done() and loop.time() < deadline:
            _, left = await asyncio.wait(
                [*remaining, stop], timeout=deadline - loop.time(),
                return_when=asyncio.FIRST_COMPLETED,
            )
            remaining = {t for t in left if t is not stop}
    finally:
        loop.disarm_watchdog()
        stop.cancel()


def _busiest(session: ReplaySession) -> str:
    """Which request the client kept sending (a spin is usually one request in a loop)."""
    if not session.counts:
        return "no requests"
    api_key, n = session.counts.most_common(1)[0]
    total = sum(session.counts.values())
    return f"most frequent request: {API_NAMES.get(api_key, api_key)} ({n} of {total})"


def _stacks(tasks: list[asyncio.Task[Any]]) -> str:
    lines = []
    for task in tasks:
        if task.done():
            continue
        frames = task.get_stack(limit=8)
        where = " <- ".join(f"{f.f_code.co_name}:{f.f_lineno}" for f in reversed(frames))
        lines.append(f"  {_describe(task)}: {where}")
    return "tasks then:\n" + "\n".join(lines)


class _CrashLog(logging.Handler):
    """Collects the client's logged tracebacks of exceptions that are not KafkaErrors:
    its catch-alls ("failed unexpectedly") log those before turning them into a bare
    KafkaError, so the caller alone would see a typed error."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.found: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is None or isinstance(exc, KafkaError | asyncio.CancelledError):
            return
        trace = "".join(traceback.format_exception(exc)).rstrip()
        self.found.append(f"{record.name}: {record.getMessage()}\n{trace}")


def _describe(task: asyncio.Task[Any]) -> str:
    coro = task.get_coro()
    name = getattr(coro, "__qualname__", repr(coro))
    return f"{task.get_name()} ({name})"


class CaseRunner:
    """Runs cases one after another on the current (virtual-clock) loop."""

    def __init__(
        self, corpus: Corpus, progress: str | None = None, wall_limit_s: float = WALL_LIMIT_S
    ) -> None:
        self.wall_limit_s = wall_limit_s
        self._progress = None if progress is None else os.open(progress, os.O_WRONLY | os.O_CREAT)
        self.server = ReplayServer(corpus)
        self.names = Names.from_corpus(corpus.names)
        # The case's tasks; weak, so that thousands of finished ones are not kept alive.
        self._tracked: weakref.WeakSet[asyncio.Task[Any]] | None = None
        self.loop_errors: list[str] = []  # every exception-handler call, in order
        self.memory = PeakMemory()
        self._crashes = _CrashLog()
        self._log_level = logging.NOTSET

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        loop.set_task_factory(self._task_factory)  # type: ignore[arg-type]
        loop.set_exception_handler(self._on_loop_error)
        await self.server.start()
        client_log = logging.getLogger("aiokproto")
        client_log.addHandler(self._crashes)
        self._log_level = client_log.level
        if client_log.getEffectiveLevel() > logging.ERROR:
            client_log.setLevel(logging.ERROR)

    async def stop(self) -> None:
        client_log = logging.getLogger("aiokproto")
        client_log.removeHandler(self._crashes)
        client_log.setLevel(self._log_level)
        await self.server.stop()
        self.memory.close()
        if self._progress is not None:
            os.close(self._progress)

    def _task_factory(
        self,
        loop: asyncio.AbstractEventLoop,
        coro: Coroutine[Any, Any, Any],
        context: Any = None,
    ) -> asyncio.Task[Any]:
        task = asyncio.Task(coro, loop=loop, context=context)
        if self._tracked is not None:
            self._tracked.add(task)
        return task

    def _on_loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        text = str(context.get("message", ""))
        if exc is not None:
            text += "\n" + "".join(traceback.format_exception(exc)).rstrip()
        self.loop_errors.append(text)

    async def run(self, plan: Plan) -> CaseResult:
        loop = asyncio.get_running_loop()
        assert isinstance(loop, VirtualClockLoop)
        if self._progress is not None:
            os.pwrite(self._progress, plan.case_id.encode().ljust(40), 0)
        random.seed(f"client:{plan.seed}:{plan.index}")  # back-off jitter and the like
        session = self.server.begin(plan)
        errors_before = len(self.loop_errors)
        self._crashes.found.clear()
        self._tracked = weakref.WeakSet()
        rss_before = rss_bytes()
        self.memory.reset()
        start_loop, start_wall = loop.time(), time.perf_counter()
        scenario = SCENARIOS[plan.scenario](self.server.bootstrap, self.names)
        main = asyncio.ensure_future(scenario)
        spun: list[str] = []  # what was running when the wall-clock watchdog fired

        def on_spin() -> None:
            # The clock cannot move: something is always ready. Stop it all.
            tasks = list(self._tracked or ())
            spun.append(f"{_busiest(session)}\n{_stacks(tasks)}")
            self.server.end()
            for task in tasks:
                task.cancel()

        loop.arm_watchdog(self.wall_limit_s, on_spin)
        try:
            done, _ = await asyncio.wait({main}, timeout=BOUND_S[plan.scenario])
            hung = not done
            if hung:
                main.cancel()
                await _wait_bounded(loop, [main], CANCEL_GRACE_S, self.wall_limit_s)
        finally:
            loop.disarm_watchdog()
        tracked, self._tracked = list(self._tracked), None
        pending = [t for t in tracked if t is not main and not t.done()]
        result = CaseResult(
            plan,
            SUCCESS,
            False,
            applied=session.applied,
            loop_seconds=loop.time() - start_loop,
            wall_seconds=time.perf_counter() - start_wall,
            session=session,
        )
        self._judge(result, main, hung, spun, self.wall_limit_s)
        grown = self.memory.peak() - rss_before
        if self.memory.available and grown > MEMORY_LIMIT and not result.failure:
            result.outcome, result.failure = MEMORY, True
            result.detail = f"peak RSS {grown / 2**20:.0f} MiB above the case's start"
        if pending and not result.failure:
            result.outcome, result.failure = PENDING, True
            result.detail = "\n".join(_describe(t) for t in pending)
        self.server.end()
        await self._clean_up(pending, main, self.wall_limit_s)
        new_errors = [e for e in self.loop_errors[errors_before:] if not e.startswith(_NEVER)]
        if new_errors and not result.failure:
            result.outcome, result.failure = LOOP_ERROR, True
            result.detail = "\n\n".join(new_errors)
        if session.harness_error:
            result.outcome, result.failure = HARNESS, True
            result.detail = session.harness_error
        elif self._crashes.found and not result.failure:
            result.detail = "\n\n".join([*self._crashes.found, result.detail]).rstrip()
            result.outcome, result.failure = f"{CRASH} after {result.outcome}", True
        return result

    @staticmethod
    def _judge(
        result: CaseResult, main: asyncio.Task[None], hung: bool, spun: list[str], wall_s: float
    ) -> None:
        if spun:
            result.outcome, result.failure = SPIN, True
            result.detail = (
                f"the loop clock did not reach the bound in {wall_s} s of real time; "
                f"{spun[0]}"
            )
            return
        if hung:
            result.outcome, result.failure = HANG, True
            result.detail = f"still running after {BOUND_S[result.plan.scenario]} s (loop time)"
            if not main.done():
                result.detail += "; and ignored cancel()"
            return
        if main.cancelled():  # nobody cancelled it: the client let a CancelledError out
            result.outcome, result.failure = f"{WRONG_TYPE} CancelledError", True
            return
        exc = main.exception()
        if exc is None:
            return
        if isinstance(exc, KafkaError):
            result.outcome = type(exc).__name__
            result.detail = str(exc)
            return
        result.outcome, result.failure = f"{WRONG_TYPE} {type(exc).__name__}", True
        result.detail = "".join(traceback.format_exception(exc)).rstrip()

    @staticmethod
    async def _clean_up(
        pending: list[asyncio.Task[Any]], main: asyncio.Task[None], wall_s: float
    ) -> None:
        """Leave nothing to the next case: cancel leftovers, let aborted sockets close."""
        for task in pending:
            task.cancel()
        if not main.done():
            main.cancel()
        leftovers = [*pending, main]
        loop = asyncio.get_running_loop()
        assert isinstance(loop, VirtualClockLoop)
        await _wait_bounded(loop, leftovers, CANCEL_GRACE_S, wall_s)
        for task in leftovers:
            if task.done() and not task.cancelled():
                task.exception()  # retrieved: its failure is already judged
        await asyncio.sleep(0)
        await asyncio.sleep(0)


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class PeakMemory:
    """The process's peak RSS since ``reset()`` (Linux: VmHWM, reset via clear_refs)."""

    def __init__(self) -> None:
        self._reset_file: TextIO | None
        try:
            self._reset_file = open("/proc/self/clear_refs", "w")
        except OSError:
            self._reset_file = None

    @property
    def available(self) -> bool:
        return self._reset_file is not None

    def reset(self) -> None:
        if self._reset_file is not None:
            self._reset_file.write("5")  # "5": reset the peak RSS to the current RSS
            self._reset_file.flush()

    @staticmethod
    def peak() -> int:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        return 0

    def close(self) -> None:
        if self._reset_file is not None:
            self._reset_file.close()


@dataclass
class BatchReport:
    """What a run of many cases in one process found."""

    results: list[CaseResult] = field(default_factory=list)
    never_retrieved: list[tuple[str, str]] = field(default_factory=list)  # (case id, text)
    rss_start: int = 0
    rss_end: int = 0
    wall_seconds: float = 0.0


async def _run_window(runner: CaseRunner, plans: list[Plan]) -> list[CaseResult]:
    return [await runner.run(plan) for plan in plans]


async def run_plans(
    corpus: Corpus,
    plans: Iterable[Plan],
    gc_every: int = 250,
    progress: str | None = None,
    wall_limit_s: float = WALL_LIMIT_S,
) -> BatchReport:
    """Run ``plans`` on the running (virtual-clock) loop. The garbage collector runs
    every ``gc_every`` cases; a never-retrieved exception it reveals is pinned on its
    case by running that window's cases again one by one, collecting after each.
    ``progress``: a file that always names the case running (for a process that dies)."""
    runner = CaseRunner(corpus, progress, wall_limit_s)
    await runner.start()
    report = BatchReport(rss_start=rss_bytes())
    began = time.perf_counter()
    todo = list(plans)
    try:
        for at in range(0, len(todo), gc_every):
            window = todo[at : at + gc_every]
            seen = len(runner.loop_errors)
            faulthandler.dump_traceback_later(HARD_LIMIT_S, exit=True)
            report.results += await _run_window(runner, window)
            faulthandler.cancel_dump_traceback_later()
            gc.collect()
            if any(e.startswith(_NEVER) for e in runner.loop_errors[seen:]):
                report.never_retrieved += await _pin_never_retrieved(runner, window)
    finally:
        await runner.stop()
    report.wall_seconds = time.perf_counter() - began
    report.rss_end = rss_bytes()
    return report


async def _pin_never_retrieved(runner: CaseRunner, window: list[Plan]) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for plan in window:
        seen = len(runner.loop_errors)
        await runner.run(plan)
        gc.collect()
        for text in runner.loop_errors[seen:]:
            if text.startswith(_NEVER):
                found.append((plan.case_id, text))
    if not found:  # not reproducible one by one: report it against the window
        found.append((f"{window[0].case_id}..{window[-1].case_id}", "never retrieved (window)"))
    return found


def run_in_new_loop(
    corpus: Corpus,
    plans: Iterable[Plan],
    gc_every: int = 250,
    progress: str | None = None,
    wall_limit_s: float = WALL_LIMIT_S,
) -> BatchReport:
    loop = VirtualClockLoop()
    try:
        return loop.run_until_complete(
            run_plans(corpus, plans, gc_every, progress, wall_limit_s)
        )
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
