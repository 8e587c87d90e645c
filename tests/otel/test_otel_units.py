"""aiokproto.otel without a broker: importing the clients imports no OpenTelemetry."""

from __future__ import annotations

import subprocess
import sys


def test_import_aiokproto_does_not_import_opentelemetry() -> None:
    code = (
        "import sys, aiokproto, aiokproto.producer, aiokproto.consumer, aiokproto.admin;"
        "print([m for m in sys.modules if m.startswith('opentelemetry')])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
