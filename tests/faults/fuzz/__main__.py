"""Replay one fuzz case, or run a range of them.

    PYTHONHASHSEED=0 python -m tests.faults.fuzz --seed 1 --case 1234     # one case, verbose
    python -m tests.faults.fuzz --seed 1 --cases 0:20000 [--workers 2]     # a range, summary
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from aiokproto.protocol.messages import API_NAMES
from tests.faults.fuzz.corpus import default_corpus
from tests.faults.fuzz.known import KnownDefect
from tests.faults.fuzz.plans import baseline, plan_case
from tests.faults.fuzz.runner import CaseResult, replay_command, run_in_new_loop
from tests.faults.fuzz.shards import run_cases


def _known() -> tuple[KnownDefect, ...]:
    # the list lives with the tests that replay its examples
    from tests.faults.test_fuzz_replay import KNOWN_FAILING

    return KNOWN_FAILING


def _show(result: CaseResult) -> None:
    plan = result.plan
    print(f"case {plan.case_id}: scenario {plan.scenario}, mutation {plan.mutation} on the "
          f"answer #{plan.occurrence} of {API_NAMES.get(plan.api_key, plan.api_key)}")
    if result.session is not None:
        for a in result.session.log:
            same = "recorded" if a.recorded else "similar"
            mark = f"   <== {a.mutated}" if a.mutated else ""
            print(f"  conn {a.connection}: {API_NAMES.get(a.api_key)} v{a.version} ({same}){mark}")
        more = sum(result.session.counts.values()) - len(result.session.log)
        if more:
            print(f"  ... and {more} more requests")
    print(f"outcome: {result.outcome} after {result.loop_seconds:.3f} s loop time, "
          f"{result.wall_seconds * 1000:.1f} ms wall")
    if result.detail:
        print(result.detail)
    print(f"replay: {replay_command(plan)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--case", type=int, help="replay this case alone, verbosely")
    parser.add_argument("--cases", help="run a range START:STOP and print the summary")
    parser.add_argument("--baseline", action="store_true", help="no mutation")
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--log", action="store_true", help="show the client's log")
    args = parser.parse_args(argv)
    if os.environ.get("PYTHONHASHSEED") != "0":
        print("note: run with PYTHONHASHSEED=0 to replay exactly", file=sys.stderr)
    if args.case is not None:
        if args.log:
            logging.basicConfig(level=logging.DEBUG, format="%(name)s: %(message)s")
        else:  # errors are in the case's detail
            logging.getLogger("aiokproto").setLevel(logging.ERROR)
            logging.getLogger("aiokproto").propagate = False
        corpus = default_corpus()
        plan = (baseline if args.baseline else lambda s, i: plan_case(corpus, s, i))(
            args.seed, args.case
        )
        report = run_in_new_loop(corpus, [plan])
        _show(report.results[0])
        for case_id, text in report.never_retrieved:
            print(f"never retrieved ({case_id}): {text}")
        return 1 if report.results[0].failure or report.never_retrieved else 0
    start, _, stop = (args.cases or "0:1000").partition(":")
    summary, elapsed = run_cases(
        args.seed,
        int(start),
        int(stop) - int(start),
        workers=args.workers,
        known=_known(),
        unmutated=args.baseline,
    )
    print(summary.table(elapsed))
    return 1 if summary.failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
