"""The local test broker for the small benchmarks: the running one, else one started
here and stopped at the end (``python -m aiokproto.testing broker``)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def local_broker() -> Iterator[str]:
    """Yields the bootstrap address. A broker already running (someone else's) is
    used and left running."""
    cmd = [sys.executable, "-m", "aiokproto.testing", "broker"]
    status = subprocess.run([*cmd, "status"], capture_output=True, text=True, check=False)
    started = status.returncode != 0
    if started:
        out = subprocess.run([*cmd, "start"], check=True, capture_output=True, text=True)
        bootstrap = out.stdout.splitlines()[0].strip()
    else:
        bootstrap = json.loads(status.stdout)["bootstrap_servers"]
    try:
        yield bootstrap
    finally:
        if started:
            subprocess.run([*cmd, "stop"], check=False, capture_output=True)
