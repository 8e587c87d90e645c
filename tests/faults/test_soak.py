"""Soak smoke test: ``python -m tests.faults.chaos.soak`` for 1 minute (5 in a full
run) against the session broker. The 30-minute soak is run by hand (not in CI):

    .venv/bin/python -m tests.faults.chaos.soak --minutes 30
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.faults.chaos import evidence
from tests.faults.chaos.members import REPO
from tests.faults.chaos.soak import Sample, judge, slope

if TYPE_CHECKING:
    from tests.faults.conftest import FaultScale


def test_trend_verdicts() -> None:
    """The checker itself: a steady series is flat, a leaking one is not, and a short
    window only tolerates noise-sized drift."""
    assert slope([0, 1, 2, 3], [5, 7, 9, 11]) == pytest.approx(2.0)
    hour = [Sample(t * 60.0, 100.0 + (t % 2), 20, 10) for t in range(61)]
    assert all(judge(hour, 0)[k]["flat"] for k in ("rss_mib", "fds", "tasks"))
    # one descriptor leaked per minute for an hour
    leak = [Sample(t * 60.0, 100.0, 20 + t, 10) for t in range(61)]
    assert not judge(leak, 0)["fds"]["flat"]
    # a task a second in a one-minute run
    short = [Sample(float(t), 100.0, 20, 10 + t) for t in range(0, 60, 2)]
    assert not judge(short, 0)["tasks"]["flat"]


def test_soak_smoke(
    kafka: Any, fault_scale: FaultScale, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # make test's slice: 36 s, 15 of them warm-up (make soak runs 30 minutes)
    minutes = 5.0 if fault_scale.full else 0.6
    out = tmp_path / "soak.json"
    argv = [
        sys.executable, "-m", "tests.faults.chaos.soak",
        "--minutes", str(minutes), "--bootstrap", kafka.bootstrap_servers,
        "--sample-seconds", "2", "--json", str(out),
    ]  # fmt: skip
    done = subprocess.run(
        argv, cwd=REPO, capture_output=True, text=True, timeout=minutes * 60 + 240, check=False
    )
    assert out.exists(), f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    result = json.loads(out.read_text(encoding="utf-8"))
    facts = {k: v for k, v in result.items() if k != "samples"}
    evidence.emit(capsys, f"soak ({minutes} min)", facts)
    counts = result["counts"]
    assert counts["sent"] >= 0.8 * result["rate"] * minutes * 60  # the load really ran
    assert result["data_ok"], counts
    assert result["trend"]["samples"] >= minutes * 15  # sampled every 2 s after warm-up
    assert result["flat"], result["trend"]
    assert done.returncode == 0, done.stderr[-3000:]
