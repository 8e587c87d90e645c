"""Aggregated results of many cases (picklable, mergeable) and the summary table."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from tests.faults.fuzz.plans import Plan
from tests.faults.fuzz.runner import NEVER_RETRIEVED, BatchReport, CaseResult, replay_command

_SAMPLES_PER_KIND = 20


@dataclass(frozen=True)
class Failure:
    plan: Plan
    outcome: str
    detail: str
    applied: str

    def line(self) -> str:
        return (
            f"case {self.plan.case_id} {self.plan.scenario} "
            f"[{self.applied or self.plan.mutation + ' (not applied)'}] -> {self.outcome}\n"
            f"  replay: {replay_command(self.plan)}"
        )


@dataclass
class Summary:
    cases: int = 0
    applied: int = 0  # cases whose target answer came up and was mutated
    outcomes: Counter[str] = field(default_factory=Counter)
    by_mutation: Counter[tuple[str, str]] = field(default_factory=Counter)  # (mutation, ok|FAIL)
    failures: list[Failure] = field(default_factory=list)  # samples, a few per kind
    failure_counts: Counter[str] = field(default_factory=Counter)
    known: Counter[str] = field(default_factory=Counter)  # known-failing cases, by defect
    known_samples: dict[str, list[Failure]] = field(default_factory=dict)
    wall_seconds: float = 0.0  # summed over processes
    loop_seconds: float = 0.0
    rss_growth: dict[int, tuple[int, int]] = field(default_factory=dict)  # pid: (first, last)

    def add(self, result: CaseResult, known: str | None = None) -> None:
        self.cases += 1
        self.applied += bool(result.applied)
        self.loop_seconds += result.loop_seconds
        if known is not None:
            self.outcomes[f"known-failing: {known}"] += 1
            self.known[known] += 1
            samples = self.known_samples.setdefault(known, [])
            if len(samples) < _SAMPLES_PER_KIND:
                samples.append(_failure(result))
            self.by_mutation[(result.plan.mutation, "known")] += 1
            return
        key = f"FAIL {result.outcome}" if result.failure else result.outcome
        self.outcomes[key] += 1
        self.by_mutation[(result.plan.mutation, "FAIL" if result.failure else "ok")] += 1
        if result.failure:
            self._sample(_failure(result))

    def _sample(self, failure: Failure, count: bool = True) -> None:
        kind = failure.outcome.split(" ")[0]
        if count:
            self.failure_counts[kind] += 1
        if sum(1 for f in self.failures if f.outcome.split(" ")[0] == kind) < _SAMPLES_PER_KIND:
            self.failures.append(failure)

    def add_never_retrieved(self, report: BatchReport, plans: dict[str, Plan]) -> None:
        for case_id, text in report.never_retrieved:
            plan = plans.get(case_id)
            self.outcomes[f"FAIL {NEVER_RETRIEVED}"] += 1
            if plan is not None:
                self._sample(Failure(plan, NEVER_RETRIEVED, text, ""))
            else:  # not pinned on one case: counted, no replay command
                self.failure_counts[NEVER_RETRIEVED] += 1

    def merge(self, other: Summary) -> None:
        self.cases += other.cases
        self.applied += other.applied
        self.outcomes.update(other.outcomes)
        self.by_mutation.update(other.by_mutation)
        self.known.update(other.known)
        for name, samples in other.known_samples.items():
            mine = self.known_samples.setdefault(name, [])
            mine += samples[: _SAMPLES_PER_KIND - len(mine)]
        self.failure_counts.update(other.failure_counts)
        for failure in other.failures:
            self._sample(failure, count=False)
        self.wall_seconds += other.wall_seconds
        self.loop_seconds += other.loop_seconds
        for pid, (first, last) in other.rss_growth.items():
            start = self.rss_growth.get(pid, (first, last))[0]
            self.rss_growth[pid] = (start, last)

    @property
    def failed(self) -> int:
        return sum(n for k, n in self.outcomes.items() if k.startswith("FAIL "))

    def table(self, elapsed: float | None = None) -> str:
        lines = [f"protocol fuzzing: {self.cases} cases, {self.applied} with the mutation applied"]
        if elapsed is not None:
            lines.append(
                f"  {elapsed:.0f} s wall ({self.cases / max(elapsed, 1e-9):.0f} cases/s), "
                f"{self.loop_seconds:.0f} s of client time on the virtual clock"
            )
        for pid, (first, last) in sorted(self.rss_growth.items()):
            lines.append(
                f"  worker {pid}: RSS {first / 2**20:.1f} -> {last / 2**20:.1f} MiB "
                f"({(last - first) / 2**20:+.1f} MiB)"
            )
        lines.append(f"  {'outcome':<58} {'cases':>8}")
        # error_code mutations reach every broker error class: rare ones are summed up
        rare = max(1, self.cases // 1000)
        order = sorted(self.outcomes.items(), key=lambda kv: (kv[0].startswith("FAIL"), -kv[1]))
        others = [(k, n) for k, n in order if n < rare and _typed(k)]
        for outcome, n in order:
            if (outcome, n) not in others:
                lines.append(f"  {outcome:<58} {n:>8}")
        if others:
            label = f"other KafkaError subclasses ({len(others)} classes, < {rare} each)"
            lines.append(f"  {label:<58} {sum(n for _, n in others):>8}")
        lines.append(f"  {'mutation':<24} {'ok':>8} {'known':>8} {'FAIL':>8}")
        for mutation in sorted({m for m, _ in self.by_mutation}):
            ok, known, bad = (self.by_mutation[(mutation, k)] for k in ("ok", "known", "FAIL"))
            lines.append(f"  {mutation:<24} {ok:>8} {known:>8} {bad:>8}")
        for name, samples in sorted(self.known_samples.items()):
            lines.append(f"known-failing {name} (samples):")
            lines += [f.line() for f in samples[:3]]
        if self.failures:
            lines.append("failures (samples):")
            lines += [f.line() for f in self.failures]
        return "\n".join(lines)


def _typed(outcome: str) -> bool:
    """A KafkaError class name (not success, a failure or a known defect)."""
    return outcome != "success" and not outcome.startswith(("FAIL ", "known-failing"))


def _failure(result: CaseResult) -> Failure:
    return Failure(result.plan, result.outcome, result.detail, result.applied)
