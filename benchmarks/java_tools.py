"""Kafka's own Java load generators: classpath resolution (kafka-tools, via
``testing.jars.resolve_pom``, POMs in benchmarks/poms/) and output parsing
(ProducerPerformance, ConsumerPerformance).

``ProducerPerformance`` and ``ConsumerPerformance`` from ``org.apache.kafka:kafka-tools``
are the broker's ceiling on this machine. The classpath is resolved from Maven Central
the way ``aiokproto.testing.jars`` resolves the broker (a POM in ``benchmarks/poms/``, a
private local repository and a libs dir in its cache dir, ``default_cache_dir()``); the parsers turn
the tools' last summary line into numbers and are pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from aiokproto.testing.errors import KafkaHarnessError
from aiokproto.testing.jars import resolve_pom

TOOLS_VERSION = "4.3.1"
PRODUCER_PERFORMANCE = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_PERFORMANCE = "org.apache.kafka.tools.ConsumerPerformance"
# What the shell wrappers kafka-{producer,consumer}-perf-test.sh give the JVM.
TOOL_JVM_OPTIONS: tuple[str, ...] = ("-Xmx512M", "-Djava.awt.headless=true")

_POM = Path(__file__).parent / "poms" / f"kafka-tools-{TOOLS_VERSION}" / "pom.xml"


class JavaToolsError(Exception):
    """The Java tools could not be resolved or their output not understood."""


def resolve(cache_dir: Path | None = None) -> Path:
    """Make sure the tools' classpath is in the cache; return the libs dir."""
    try:
        return resolve_pom(
            f"kafka-tools-{TOOLS_VERSION}",
            _POM.read_text(encoding="utf-8"),
            cache_dir,
            expect=f"kafka-tools-{TOOLS_VERSION}",
            what=f"kafka-tools {TOOLS_VERSION}",
        )
    except KafkaHarnessError as exc:
        raise JavaToolsError(str(exc)) from exc


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
