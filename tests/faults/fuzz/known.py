"""Known defects: failures that match one are counted apart and do not fail the run.

The list itself lives in ``tests/faults/test_fuzz_replay.py`` (``KNOWN_FAILING``), next
to the xfail tests that replay its example cases.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tests.faults.fuzz.runner import CaseResult


@dataclass(frozen=True)
class KnownDefect:
    name: str
    reason: str  # diagnosis and where it is being fixed
    mutations: tuple[str, ...]  # mutations that can show it (empty: any)
    outcome: str  # prefix of the failing outcome ("HANG", "WRONG-TYPE KeyError")
    detail: str = ""  # text the failure detail or the mutation's description contains
    examples: tuple[str, ...] = ()  # "seed:index" of cases that show it

    def matches(self, result: CaseResult) -> bool:
        return (
            result.failure
            and (not self.mutations or result.plan.mutation in self.mutations)
            and result.outcome.startswith(self.outcome)
            and (self.detail in result.detail or self.detail in result.applied)
        )


def known_defect(defects: Sequence[KnownDefect], result: CaseResult) -> str | None:
    for defect in defects:
        if defect.matches(result):
            return defect.name
    return None
