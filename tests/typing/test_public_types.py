"""The public API under ``mypy --strict``: the snippets in snippets/ mark each line
that must fail with ``# E: <part of the message>``; every other line must pass.

One mypy run over all snippets, sharing the repository's .mypy_cache with ``make
typecheck`` (same options), so a warm run takes a few seconds.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SNIPPETS = Path(__file__).with_name("snippets")
_EXPECT = re.compile(r"#\s*E:\s*(?P<message>.+)$")
_ERROR = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+): error: (?P<message>.+?)(?:  \[[a-z-]+\])?$")


def _expected() -> dict[tuple[str, int], str]:
    out = {}
    for path in sorted(SNIPPETS.glob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            match = _EXPECT.search(line)
            if match:
                out[(path.name, number)] = match["message"].strip()
    return out


def test_mypy_strict_accepts_and_rejects_what_the_snippets_say() -> None:
    pytest.importorskip("mypy")
    start = time.monotonic()
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-error-summary",
            "--cache-dir",
            str(ROOT / ".mypy_cache"),
            str(SNIPPETS),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    took = time.monotonic() - start
    assert run.returncode in (0, 1), run.stderr or run.stdout
    got: dict[tuple[str, int], list[str]] = {}
    for line in run.stdout.splitlines():
        match = _ERROR.match(line)
        if match:
            key = (Path(match["path"]).name, int(match["line"]))
            got.setdefault(key, []).append(match["message"])
    expected = _expected()
    assert len(expected) >= 20, "the snippets lost their expectations"
    missing = {
        f"{name}:{line}: {want}"
        for (name, line), want in expected.items()
        if not any(want in message for message in got.get((name, line), ()))
    }
    unexpected = {
        f"{name}:{line}: {messages}"
        for (name, line), messages in got.items()
        if (name, line) not in expected
    }
    assert not missing, f"mypy did not report (took {took:.1f} s):\n" + "\n".join(sorted(missing))
    assert not unexpected, "mypy rejected lines that must pass:\n" + "\n".join(sorted(unexpected))
