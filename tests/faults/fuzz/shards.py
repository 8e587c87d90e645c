"""Many cases over several processes; each process runs chunks on its own loop."""

from __future__ import annotations

import logging
import multiprocessing
import os
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

from tests.faults.fuzz.corpus import default_corpus
from tests.faults.fuzz.known import KnownDefect, known_defect
from tests.faults.fuzz.plans import Plan, baseline, plan_case
from tests.faults.fuzz.report import Summary
from tests.faults.fuzz.runner import rss_bytes, run_in_new_loop


@dataclass(frozen=True)
class Chunk:
    seed: int
    start: int
    stop: int
    known: tuple[KnownDefect, ...] = ()
    unmutated: bool = False
    progress_dir: str | None = None  # where workers say which case they are running


def _quiet_client_logs() -> None:
    # Every case provokes warnings by design; they would drown the report. Errors go
    # to the runner's crash log only.
    client_log = logging.getLogger("aiokproto")
    client_log.setLevel(logging.ERROR)
    client_log.propagate = False


def plans_for(chunk: Chunk) -> list[Plan]:
    corpus = default_corpus()
    if chunk.unmutated:
        return [baseline(chunk.seed, i) for i in range(chunk.start, chunk.stop)]
    return [plan_case(corpus, chunk.seed, i) for i in range(chunk.start, chunk.stop)]


def run_chunk(chunk: Chunk) -> Summary:
    _quiet_client_logs()
    plans = plans_for(chunk)
    progress = None
    if chunk.progress_dir is not None:
        progress = os.path.join(chunk.progress_dir, f"{os.getpid()}.case")
    report = run_in_new_loop(default_corpus(), plans, progress=progress)
    summary = Summary(wall_seconds=report.wall_seconds)
    for result in report.results:
        summary.add(result, known_defect(chunk.known, result))
    summary.add_never_retrieved(report, {p.case_id: p for p in plans})
    summary.rss_growth[os.getpid()] = (rss_bytes(), rss_bytes())
    return summary


def run_cases(
    seed: int,
    start: int,
    count: int,
    *,
    workers: int = 0,
    chunk_size: int = 500,
    known: Sequence[KnownDefect] = (),
    unmutated: bool = False,
) -> tuple[Summary, float]:
    """Run cases ``start .. start+count-1`` of ``seed``; returns the summary and the wall
    time. ``workers=0``: one per CPU (1: in this process)."""
    workers = workers or os.cpu_count() or 1
    began = time.perf_counter()
    total = Summary()
    if workers == 1:
        for a in range(start, start + count, chunk_size):
            stop = min(a + chunk_size, start + count)
            total.merge(run_chunk(Chunk(seed, a, stop, tuple(known), unmutated)))
        return total, time.perf_counter() - began
    with tempfile.TemporaryDirectory(prefix="aiokproto-fuzz-") as progress_dir:
        chunks = [
            Chunk(seed, a, min(a + chunk_size, start + count), tuple(known), unmutated,
                  progress_dir)
            for a in range(start, start + count, chunk_size)
        ]
        _in_pool(chunks, workers, total)
    return total, time.perf_counter() - began


class WorkerDied(RuntimeError):
    """A worker process ended in the middle of a case (faulthandler's hard limit: some
    callback never returned)."""


def _in_pool(chunks: list[Chunk], workers: int, total: Summary) -> None:
    # Spawned workers with a fixed hash seed: a case behaves the same as when it is
    # replayed alone with the printed command.
    saved = os.environ.get("PYTHONHASHSEED")
    os.environ["PYTHONHASHSEED"] = "0"
    try:
        context = multiprocessing.get_context("spawn")
        # A worker that dies breaks the pool loudly (BrokenProcessPool) instead of
        # leaving its chunk waiting forever.
        with ProcessPoolExecutor(workers, mp_context=context) as pool:
            for future in as_completed([pool.submit(run_chunk, c) for c in chunks]):
                try:
                    total.merge(future.result())
                except BrokenProcessPool:
                    raise WorkerDied(_in_flight(chunks)) from None
    finally:
        if saved is None:
            del os.environ["PYTHONHASHSEED"]
        else:
            os.environ["PYTHONHASHSEED"] = saved


def _in_flight(chunks: list[Chunk]) -> str:
    directory = chunks[0].progress_dir
    assert directory is not None
    cases = []
    for name in sorted(os.listdir(directory)):
        with open(os.path.join(directory, name)) as f:
            cases.append(f.read().strip())
    return (
        "a fuzz worker died in the middle of a case (a callback that never returned?); "
        "the cases running then were: " + ", ".join(
            f"{case} (PYTHONHASHSEED=0 .venv/bin/python -m tests.faults.fuzz --seed "
            f"{case.split(':')[0]} --case {case.split(':')[1]})" for case in cases
        )
    )
