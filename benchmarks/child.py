"""One benchmark run in its own process: ``python -m benchmarks.child '<job json>'``:
the client adapter and its meter (wall and CPU time per phase), peak RSS (``VmHWM``).

A fresh process per (client, scenario, run) keeps runs from contaminating each other
(imports, allocator state, threads left behind) and makes ``getrusage(RUSAGE_SELF)``
the client's own CPU time and ``VmHWM`` its own peak RSS. The adapter sets the client up, calls
``meter.start()`` right before the first record moves and ``meter.stop()`` when the
last one is acknowledged or consumed; the result is one JSON line on stdout after
``RESULT_MARKER``.
"""

from __future__ import annotations

import importlib
import json
import os
import resource
import sys
import time
import traceback
from typing import Any

from benchmarks.clients import ADAPTERS
from benchmarks.scenarios import Job

RESULT_MARKER = "BENCH-RESULT "


class Meter:
    """Wall time and CPU time of the measured phase of one run (``start()`` again
    restarts it: consume runs move the start to their first batch)."""

    def __init__(self) -> None:
        self._t0: float | None = None
        self._cpu0 = 0.0
        self.elapsed_s: float | None = None
        self.cpu_s: float | None = None

    @staticmethod
    def _cpu() -> float:
        ru = resource.getrusage(resource.RUSAGE_SELF)  # all threads: librdkafka's too
        return ru.ru_utime + ru.ru_stime

    def start(self) -> None:
        self._cpu0 = self._cpu()
        self._t0 = time.perf_counter()

    def stop(self) -> None:
        if self._t0 is None:
            raise RuntimeError("meter stopped before it was started")
        self.elapsed_s = time.perf_counter() - self._t0
        self.cpu_s = self._cpu() - self._cpu0

    def fields(self) -> dict[str, Any]:
        return {"elapsed_s": self.elapsed_s, "cpu_s": self.cpu_s, "cpu_scope": "phase"}


def _event_loop() -> None:
    """``BENCH_EVENT_LOOP=uvloop`` (an adapter's env): asyncio.run() runs on uvloop."""
    if os.environ.get("BENCH_EVENT_LOOP") == "uvloop":
        import asyncio

        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


def _aiokproto_from_elsewhere() -> None:
    """``BENCH_AIOKPROTO_PATH`` (the ``aiokproto-base`` adapter's env): import aiokproto
    from that checkout, ahead of this one and of the editable install."""
    path = os.environ.get("BENCH_AIOKPROTO_PATH")
    if path is None:
        return
    if not path or not os.path.isdir(os.path.join(path, "aiokproto")):
        raise RuntimeError(
            f"BENCH_AIOKPROTO_PATH={path!r} is not a checkout of aiokproto: set "
            "BENCH_AIOKPROTO_BASE (or use make bench-base BASE=<git rev>)"
        )
    if "aiokproto" in sys.modules:
        raise RuntimeError("aiokproto was imported before BENCH_AIOKPROTO_PATH applied")
    sys.path.insert(0, path)


def run_job(job: Job) -> dict[str, Any]:
    """Run ``job`` with its client's adapter; never raises (errors become the result)."""
    result: dict[str, Any] = {
        "client": job.client,
        "scenario_id": job.scenario.id,
        "run": job.run,
        "topic": job.topic,
        "error": None,
    }
    meter = Meter()
    try:
        _event_loop()
        _aiokproto_from_elsewhere()
        module = importlib.import_module(ADAPTERS[job.client].module)
        result["client_version"] = module.version()
        runner = getattr(module, job.scenario.entry)
        outcome = runner(job, meter)
        if outcome.get("cpu_scope") != "process":  # the java wrapper measures its JVM
            outcome.update(meter.fields())
        result.update(outcome)
    except BaseException as exc:  # reported to the parent, which marks the run FAILED
        result["error"] = f"{type(exc).__name__}: {exc}"
        result["traceback"] = traceback.format_exc(limit=8)
    result.setdefault("max_rss_kb", peak_rss_kb())  # java reports its JVM's instead
    return result


def peak_rss_kb(pid: int | str = "self") -> int | None:
    """Peak RSS (KiB) of this process image: ``VmHWM`` of /proc/<pid>/status.

    Not ``ru_maxrss``: Linux carries the parent's peak over fork and exec, so every
    child would report at least the orchestrator's size.
    """
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m benchmarks.child '<job json>'", file=sys.stderr)
        return 2
    job = Job.from_json(json.loads(argv[0]))
    result = run_job(job)
    sys.stdout.write(RESULT_MARKER + json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
