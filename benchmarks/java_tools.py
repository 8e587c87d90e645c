"""Kafka's own Java load generators: classpath resolution and output parsing.

``ProducerPerformance`` and ``ConsumerPerformance`` from ``org.apache.kafka:kafka-tools``
are the broker's ceiling on this machine. The classpath is resolved from Maven Central
the way ``aiokproto.testing.jars`` resolves the broker (a POM in ``benchmarks/poms/``, a
private local repository and a libs dir under ``.cache/aiokproto/``); the parsers turn
the tools' last summary line into numbers and are pure.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from aiokproto.testing import default_cache_dir

TOOLS_VERSION = "4.3.1"
PRODUCER_PERFORMANCE = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_PERFORMANCE = "org.apache.kafka.tools.ConsumerPerformance"
# What the shell wrappers kafka-{producer,consumer}-perf-test.sh give the JVM.
TOOL_JVM_OPTIONS: tuple[str, ...] = ("-Xmx512M", "-Djava.awt.headless=true")

_POM = Path(__file__).parent / "poms" / f"kafka-tools-{TOOLS_VERSION}" / "pom.xml"
_MARKER = ".resolved.json"
_RESOLVE_TIMEOUT_S = 900.0


class JavaToolsError(Exception):
    """The Java tools could not be resolved or their output not understood."""


def libs_dir(cache_dir: Path | None = None) -> Path:
    return (cache_dir or default_cache_dir()) / f"kafka-tools-{TOOLS_VERSION}" / "libs"


def _pom_digest() -> str:
    return hashlib.sha256(_POM.read_bytes()).hexdigest()


def _is_resolved(libs: Path) -> bool:
    try:
        marker = json.loads((libs / _MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    jars = marker.get("jars") if isinstance(marker, dict) else None
    return (
        marker.get("pom_sha256") == _pom_digest()
        and isinstance(jars, list)
        and bool(jars)
        and all((libs / str(j)).is_file() for j in jars)
    )


def resolve(cache_dir: Path | None = None) -> Path:
    """Make sure the tools' classpath is in the cache; return the libs dir."""
    cache = cache_dir or default_cache_dir()
    libs = libs_dir(cache)
    if _is_resolved(libs):
        return libs
    mvn = shutil.which("mvn")
    if mvn is None:
        raise JavaToolsError("Maven ('mvn') is not on PATH; it is needed once for kafka-tools")
    cache.mkdir(parents=True, exist_ok=True)
    with (cache / f"kafka-tools-{TOOLS_VERSION}.lock").open("a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)  # another process may be resolving
        if _is_resolved(libs):
            return libs
        work = libs.parent
        work.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(_POM, work / "pom.xml")
        if libs.exists():
            shutil.rmtree(libs)
        cmd = [
            mvn, "-q", "-B", "-f", str(work / "pom.xml"), "dependency:copy-dependencies",
            f"-DoutputDirectory={libs}",
            # shared with the broker's resolution: most jars are already there
            f"-Dmaven.repo.local={cache / 'm2'}",
        ]  # fmt: skip
        try:
            proc = subprocess.run(
                cmd, capture_output=True, text=True, timeout=_RESOLVE_TIMEOUT_S, check=False
            )
        except subprocess.TimeoutExpired as exc:
            raise JavaToolsError("Maven did not resolve kafka-tools in time") from exc
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-30:])
            raise JavaToolsError(f"Maven failed to resolve kafka-tools: {tail}")
        jars = sorted(p.name for p in libs.glob("*.jar"))
        if f"kafka-tools-{TOOLS_VERSION}.jar" not in jars:
            raise JavaToolsError(f"Maven ran but {libs} has no kafka-tools jar")
        marker = {"pom_sha256": _pom_digest(), "jars": jars, "resolved_at": time.time()}
        (libs / _MARKER).write_text(json.dumps(marker, indent=1), encoding="utf-8")
    return libs


def classpath(cache_dir: Path | None = None) -> str:
    return str(resolve(cache_dir) / "*")


# -- output parsing (pure) --------------------------------------------------------------


@dataclass(frozen=True)
class ProducerSummary:
    records: int
    records_per_s: float
    mb_per_s: float
    avg_latency_ms: float
    max_latency_ms: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    p999_ms: float


# e.g. "100000 records sent, 96711.798839 records/sec (9.22 MB/sec), 12.34 ms avg latency,
# 321.00 ms max latency, 5 ms 50th, 40 ms 95th, 60 ms 99th, 80 ms 99.9th."
_PRODUCER_RE = re.compile(
    r"(?P<n>\d+) records sent, (?P<rps>[\d.]+) records/sec \((?P<mbs>[\d.]+) MB/sec\), "
    r"(?P<avg>[\d.]+) ms avg latency, (?P<max>[\d.]+) ms max latency, "
    r"(?P<p50>[\d.]+) ms 50th, (?P<p95>[\d.]+) ms 95th, (?P<p99>[\d.]+) ms 99th, "
    r"(?P<p999>[\d.]+) ms 99\.9th"
)


def parse_producer_performance(output: str) -> ProducerSummary:
    """The final summary line of ``ProducerPerformance`` (the last match wins: the tool
    prints interim windows in a shorter form first)."""
    matches = list(_PRODUCER_RE.finditer(output))
    if not matches:
        raise JavaToolsError(f"no ProducerPerformance summary in its output: {_tail(output)}")
    m = matches[-1]
    return ProducerSummary(
        records=int(m["n"]),
        records_per_s=float(m["rps"]),
        mb_per_s=float(m["mbs"]),
        avg_latency_ms=float(m["avg"]),
        max_latency_ms=float(m["max"]),
        p50_ms=float(m["p50"]),
        p95_ms=float(m["p95"]),
        p99_ms=float(m["p99"]),
        p999_ms=float(m["p999"]),
    )


@dataclass(frozen=True)
class ConsumerSummary:
    records: int
    megabytes: float
    fetch_time_ms: float
    rebalance_time_ms: float
    total_ms: float


def parse_consumer_performance(output: str) -> ConsumerSummary:
    """The CSV line of ``ConsumerPerformance`` after its header line:
    start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
    rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec."""
    lines = [ln.strip() for ln in output.splitlines()]
    for i, line in enumerate(lines):
        if not line.startswith("start.time"):
            continue
        header = [h.strip() for h in line.split(",")]
        for data in lines[i + 1 :]:
            fields = [f.strip() for f in data.split(",")]
            if len(fields) != len(header):
                continue
            row = dict(zip(header, fields, strict=True))
            try:
                return ConsumerSummary(
                    records=int(row["data.consumed.in.nMsg"]),
                    megabytes=float(row["data.consumed.in.MB"]),
                    fetch_time_ms=float(row["fetch.time.ms"]),
                    rebalance_time_ms=float(row["rebalance.time.ms"]),
                    total_ms=_span_ms(row["start.time"], row["end.time"]),
                )
            except (KeyError, ValueError) as exc:
                raise JavaToolsError(f"bad ConsumerPerformance line {data!r}: {exc}") from exc
    raise JavaToolsError(f"no ConsumerPerformance result in its output: {_tail(output)}")


def _span_ms(start: str, end: str) -> float:
    fmt = "%Y-%m-%d %H:%M:%S:%f"
    from datetime import datetime

    return (datetime.strptime(end, fmt) - datetime.strptime(start, fmt)).total_seconds() * 1e3


def _tail(output: str, lines: int = 15) -> str:
    return "\n".join(output.strip().splitlines()[-lines:]) or "(no output)"
