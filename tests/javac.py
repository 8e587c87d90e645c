"""Java test programs and broker plugins, compiled once per source and Kafka version."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from aiokproto.testing.jars import classpath


def compiled(source: Path, kafka_version: str) -> Path:
    """The folder holding ``source``'s classes, compiled against Kafka's jars under tmp
    (reused while the source and the version are the same); skips without ``javac``."""
    javac = shutil.which("javac")
    if javac is None:
        pytest.skip("javac is not on PATH")
    key = hashlib.sha256(source.read_bytes() + kafka_version.encode()).hexdigest()[:16]
    prefix = f"aiokproto-{source.stem}-"
    out = Path(tempfile.gettempdir()) / f"{prefix}{key}"
    if (out / f"{source.stem}.class").exists():
        return out
    building = Path(tempfile.mkdtemp(prefix=prefix))
    done = subprocess.run(
        [javac, "-cp", classpath(kafka_version), "-d", str(building), str(source)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"javac failed:\n{done.stderr}"
    try:
        building.rename(out)  # atomic: a concurrent build of the same source won first
    except OSError:
        shutil.rmtree(building, ignore_errors=True)
    return out
