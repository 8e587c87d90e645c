"""Protocol fuzzing by replay: recorded answers of a real broker, one mutated per case.

``make test`` runs a slice (``FAULT_SLICE`` cases), ``make faults`` the full run
(``FAULT_FULL``); the seed is ``$AIOKPROTO_FUZZ_SEED`` (default 1). A failing case
prints a command that replays exactly it; the summary table is printed at the end of
the pytest run. How it works: ``tests/faults/fuzz/__init__.py``.
"""

from __future__ import annotations

import os

import pytest

from tests.faults.conftest import FaultScale
from tests.faults.fuzz.corpus import default_corpus
from tests.faults.fuzz.known import KnownDefect
from tests.faults.fuzz.plans import REPLAYED, baseline, plan_case
from tests.faults.fuzz.report import Summary
from tests.faults.fuzz.runner import SUCCESS, run_in_new_loop
from tests.faults.fuzz.shards import run_cases

SEED = int(os.environ.get("AIOKPROTO_FUZZ_SEED", "1"))
FAULT_SLICE = 2_500
FAULT_FULL = 100_000
RSS_GROWTH_LIMIT = 64 * 2**20  # per worker process, over the whole run

# Defects the fuzzer found in code other engineers own. A failing case that matches
# one is counted apart ("known-failing") instead of failing the run; the xfail test
# below replays the examples and starts passing (XPASS, strict: so it fails) once the
# defect is fixed: then delete the entry.
KNOWN_FAILING: tuple[KnownDefect, ...] = ()

# Cases that once failed, each a defect fixed since (replayed in every run, whatever
# the slice): "seed:index" -> what was wrong.
REGRESSIONS: dict[str, str] = {
    "1:4086": "a broker host with a NUL byte escaped as ValueError",
    "1:3853": "a broker host IDNA cannot encode escaped as UnicodeError",
    "1:7075": "an epoch bump answered with the same epoch spun InitProducerId",
    "1:21729": "a batch at offset 2**63-1 made the next Fetch unencodable",
    "1:89652": "a batch at offset 2**63-1 made the next Fetch unencodable",
    "1:8435": "a batch claiming 2 GiB pushed partition_max_bytes past int32",
    "1:61427": "a batch claiming 2 GiB pushed partition_max_bytes past int32",
    "1:81372": "a batch claiming 2 GiB pushed partition_max_bytes past int32",
    "1:24474": "a JoinGroup answer without a member id killed the group task",
    "1:53094": "a JoinGroup answer without a member id killed the group task",
    "1:63354": "a JoinGroup answer without a member id killed the group task",
}


def test_every_scenario_replays_unmutated() -> None:
    """Without a mutation every scenario succeeds, answered from identical recorded
    requests: the replay is faithful, so the mutated cases test what they claim."""
    corpus = default_corpus()
    report = run_in_new_loop(corpus, [baseline(SEED, i) for i in range(len(REPLAYED))])
    for result in report.results:
        assert result.outcome == SUCCESS, (result.plan.scenario, result.detail)
        log = result.session.log if result.session else []
        identical = sum(a.recorded for a in log)
        assert identical >= 0.8 * len(log), (result.plan.scenario, identical, len(log))
    assert not report.never_retrieved


def test_a_case_replays_identically() -> None:
    corpus = default_corpus()
    plans = [plan_case(corpus, SEED, i) for i in range(60)]
    first, second = run_in_new_loop(corpus, plans), run_in_new_loop(corpus, plans)
    for a, b in zip(first.results, second.results, strict=True):
        assert (a.outcome, a.applied) == (b.outcome, b.applied), a.plan
        assert a.session is not None and b.session is not None
        assert [(x.api_key, x.mutated) for x in a.session.log] == [
            (x.api_key, x.mutated) for x in b.session.log
        ], a.plan


class _PrintSummary:
    """Prints the fuzzing table in pytest's terminal summary (no ``-s`` needed)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        terminalreporter.section("protocol fuzzing")
        for line in self.text.splitlines():
            terminalreporter.write_line(line)


def test_fuzz_replay(fault_scale: FaultScale, request: pytest.FixtureRequest) -> None:
    count = fault_scale.pick(FAULT_SLICE, FAULT_FULL)
    summary, elapsed = run_cases(SEED, 0, count, known=KNOWN_FAILING)
    table = summary.table(elapsed)
    print(table)
    request.config.pluginmanager.register(_PrintSummary(table), "aiokproto-fuzz-summary")
    assert summary.cases == count
    # the mutated answer came up in (nearly) every case: the plans match the replays
    assert summary.applied >= 0.95 * count, table
    for pid, (first, last) in summary.rss_growth.items():
        assert last - first < RSS_GROWTH_LIMIT, f"worker {pid} grew: {table}"
    assert not summary.failed, _failures(summary)


def _failures(summary: Summary) -> str:
    lines = [f"{summary.failed} case(s) failed; samples (replay one with its command):"]
    for failure in summary.failures:
        lines.append(failure.line())
        lines += [f"    {d}" for d in failure.detail.splitlines()[-12:]]
    return "\n".join(lines)


@pytest.mark.parametrize(
    "defect",
    [
        pytest.param(d, marks=pytest.mark.xfail(strict=True, reason=d.reason), id=d.name)
        for d in KNOWN_FAILING
    ],
)
def test_known_failing_cases(defect: KnownDefect) -> None:
    corpus = default_corpus()
    plans = []
    for example in defect.examples:
        seed, index = map(int, example.split(":"))
        plans.append(plan_case(corpus, seed, index))
    # a spinning client is recognised after 5 s here instead of 20 s
    report = run_in_new_loop(corpus, plans, wall_limit_s=5.0)
    failed = [r for r in report.results if r.failure]
    assert not failed, "\n".join(f"{r.line()}\n{r.detail}" for r in failed)


def test_cases_that_once_failed_stay_fixed() -> None:
    corpus = default_corpus()
    plans = []
    for example in REGRESSIONS:
        seed, index = map(int, example.split(":"))
        plans.append(plan_case(corpus, seed, index))
    report = run_in_new_loop(corpus, plans, wall_limit_s=5.0)
    failed = [r for r in report.results if r.failure]
    assert not failed, "\n".join(f"{r.line()}\n{r.detail}" for r in failed)
    assert not report.never_retrieved
