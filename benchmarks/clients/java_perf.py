"""Kafka's Java ``ProducerPerformance`` / ``ConsumerPerformance``, the broker's ceiling.

The JVM is this child's only child process: ``getrusage(RUSAGE_CHILDREN)`` gives its
CPU time and polling its ``VmHWM`` its peak RSS (the whole JVM, start-up and JIT
included). Throughput is the
tool's own measurement, which excludes JVM start-up (and, for the consumer, the group
join).
"""

from __future__ import annotations

import os
import resource
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from aiokproto.testing.node import find_java
from benchmarks import java_tools
from benchmarks.child import peak_rss_kb
from benchmarks.clients.common import MeterLike
from benchmarks.payloads import payload_file_bytes, value_pool
from benchmarks.scenarios import BATCH_SIZE, Job


def version() -> str:
    return f"kafka-tools {java_tools.TOOLS_VERSION}"


def _run(argv: list[str], timeout_s: float, cwd: Path) -> tuple[str, dict[str, Any]]:
    out_path = cwd / "tool.out"
    with out_path.open("wb") as out:
        proc = subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    # VmHWM only grows: the last reading before the JVM exits is its peak RSS (to within
    # one poll). ru_maxrss would include this Python process's size, inherited at exec.
    peak_kb = 0
    deadline = time.monotonic() + timeout_s
    while proc.poll() is None:
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise TimeoutError(f"the Java tool did not finish in {timeout_s:.0f}s")
        peak_kb = max(peak_kb, peak_rss_kb(proc.pid) or 0)
        time.sleep(0.05)
    # the JVM is this process's only waited-for child: RUSAGE_CHILDREN is its CPU time
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    text = out_path.read_text(encoding="utf-8", errors="replace")
    if proc.returncode != 0:
        raise RuntimeError(f"java exited {proc.returncode}: {text[-2000:]}")
    return text, {"cpu_s": ru.ru_utime + ru.ru_stime, "max_rss_kb": peak_kb or None,
                  "cpu_scope": "process"}


def _java(main_class: str) -> list[str]:
    java = find_java()
    if java is None:
        raise RuntimeError("java is not on PATH")
    return [java, *java_tools.TOOL_JVM_OPTIONS, "-cp", java_tools.classpath(), main_class]


def produce(job: Job, meter: MeterLike) -> dict[str, Any]:
    s = job.scenario
    with tempfile.TemporaryDirectory(prefix="bench-java-") as tmp:
        work = Path(tmp)
        payload = work / "payload.txt"
        payload.write_bytes(payload_file_bytes(value_pool(s.value_size)))
        argv = [
            *_java(java_tools.PRODUCER_PERFORMANCE),
            "--topic", job.topic,
            "--num-records", str(s.records),
            "--throughput", "-1",
            "--payload-file", str(payload),
            "--command-property",
            f"bootstrap.servers={job.bootstrap_servers}",
            f"acks={s.acks}",
            f"compression.type={s.compression}",
            f"linger.ms={s.linger_ms}",
            f"batch.size={BATCH_SIZE}",
            "enable.idempotence=false",
        ]  # fmt: skip
        text, usage = _run(argv, job.timeout_s * 0.9, work)
    summary = java_tools.parse_producer_performance(text)
    return {
        **usage,
        "acked": summary.records,
        "failed": s.records - summary.records,
        "delivery_error": _first_exception(text),
        "elapsed_s": summary.records / summary.records_per_s if summary.records_per_s else None,
        "tool_latency_ms": {"p50": summary.p50_ms, "p99": summary.p99_ms,
                            "p999": summary.p999_ms},
    }


def consume(job: Job, meter: MeterLike) -> dict[str, Any]:
    s = job.scenario
    with tempfile.TemporaryDirectory(prefix="bench-java-") as tmp:
        argv = [
            *_java(java_tools.CONSUMER_PERFORMANCE),
            "--bootstrap-server", job.bootstrap_servers,
            "--topic", job.topic,
            "--num-records", str(s.records),
            "--group", job.group_id or f"bench-java-{job.topic}-{os.getpid()}",
            "--timeout", "30000",
        ]  # fmt: skip
        text, usage = _run(argv, job.timeout_s * 0.9, Path(tmp))
    summary = java_tools.parse_consumer_performance(text)
    return {
        **usage,
        "consumed": summary.records,
        # the tool prints MB (2^20 bytes) with 4 decimals: exact to about 105 bytes
        "bytes": round(summary.megabytes * 1024 * 1024),
        "bytes_resolution": 105,
        "bad_size": 0,
        "elapsed_s": summary.fetch_time_ms / 1000,
        "rebalance_ms": summary.rebalance_time_ms,
    }


def _first_exception(text: str) -> str | None:
    for line in text.splitlines():
        if "Exception" in line:
            return line.strip()[:300]
    return None
