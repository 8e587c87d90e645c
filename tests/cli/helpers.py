"""Test helper: the ``aiokproto`` command run in a subprocess, as a user runs it, in an
environment without the developer's ``AIOKPROTO_*`` variables."""

from __future__ import annotations

import os
import subprocess
import sys


def clean_env() -> dict[str, str]:
    """This process's environment now (a fixture may have set KRB5_CONFIG), without
    the AIOKPROTO_* variables: a developer's must not steer the tests."""
    return {k: v for k, v in os.environ.items() if not k.startswith("AIOKPROTO_")}


ENV = clean_env()


def cli(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``python -m aiokproto <args>``, its output as text; ``env`` added to ``clean_env()``."""
    return subprocess.run(
        [sys.executable, "-m", "aiokproto", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**clean_env(), **(env or {})},
    )
