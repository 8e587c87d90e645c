"""Where and with what a benchmark ran: machine, Python, Java, client versions."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

_DISTRIBUTIONS = ("aiokproto", "confluent-kafka", "aiokafka", "kafka-python")


def cpu_model(cpuinfo: str) -> str:
    """The ``model name`` of /proc/cpuinfo's text (first CPU)."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name":
            return value.strip()
    return platform.processor() or "unknown"


def mem_total_gib(meminfo: str) -> float | None:
    for line in meminfo.splitlines():
        if line.startswith("MemTotal:"):
            return round(int(line.split()[1]) / 1024 / 1024, 1)
    return None


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def java_version() -> str | None:
    try:
        proc = subprocess.run(
            ["java", "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = (proc.stderr or proc.stdout).strip().splitlines()
    return lines[0] if lines else None


def client_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for dist in _DISTRIBUTIONS:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    try:
        import confluent_kafka

        out["librdkafka"] = str(confluent_kafka.libversion()[0])
    except ImportError:
        out["librdkafka"] = None
    return out


def describe(kafka: dict[str, Any]) -> dict[str, Any]:
    """Everything a reader needs to judge the numbers."""
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": {
            "cpu_model": cpu_model(_read("/proc/cpuinfo")),
            "cores": os.cpu_count(),
            "ram_gib": mem_total_gib(_read("/proc/meminfo")),
            "os": f"{platform.system()} {platform.release()}",
            "arch": platform.machine(),
            "load_avg_at_start": list(os.getloadavg()),
        },
        "python": sys.version.split()[0],
        "python_impl": platform.python_implementation(),
        "java": java_version(),
        "kafka": kafka,
        "clients": client_versions(),
    }
