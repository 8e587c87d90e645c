"""Pure parts of ``aiokproto perf``: pacing, latency statistics, payloads, the live figures."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from aiokproto.cli.perfstats import (
    Recorder,
    Throttle,
    consume_line,
    consume_summary,
    payload,
    percentile,
    produce_line,
    produce_summary,
    window_text,
)


def test_throttle_schedule_is_absolute() -> None:
    t = Throttle(100.0, start=10.0)
    assert t.delay(0, 10.0) == 0.0
    assert t.delay(50, 10.2) == pytest.approx(0.3)  # due at 10.5
    assert t.delay(50, 10.4995) == 0.0  # under a millisecond ahead: send now
    assert t.delay(50, 11.0) == 0.0  # late: no sleep, and no catching up beyond the rate
    assert Throttle(None, 0.0).delay(10**9, 0.0) == 0.0


def test_recorder_percentiles_windows_and_lines() -> None:
    rec = Recorder(expected=10, now=0.0, max_samples=5)  # every 2nd latency is sampled
    for i in range(1, 11):
        rec.add(100, float(i))
    assert rec.every == 2 and list(rec.samples) == [2.0, 4.0, 6.0, 8.0, 10.0]
    assert percentile(sorted(rec.samples), 0.5) == 6.0 and percentile([], 0.5) == 0.0
    w = rec.take_window(2.0)
    assert (w.records, w.rate, w.latency_max_ms, w.latency_avg_ms) == (10, 5.0, 10.0, 5.5)
    assert rec.take_window(3.0).records == 0
    assert "5 rec/s" in window_text(w, latency=True) and "p99 10.0" in window_text(w, True)
    s = produce_summary(rec, 2.0)
    assert s["latency_ms"]["avg"] == 5.5 and s["latency_ms"]["max"] == 10.0
    assert produce_line(s).startswith("10 records sent, 5.0 records/sec (0.00 MB/sec), "
                                      "5.50 ms avg latency, 10.00 ms max latency, 6.0 ms 50th")
    c = Recorder(4, 0.0)
    c.add_many(4, 2 * 1024 * 1024)
    line = consume_line(consume_summary(c, 2.0, 0.25))
    assert line == ("4 records consumed, 2.0 records/sec (1.00 MB/sec), 2.00 MB in 2.00 s, "
                    "250 ms to the first record.")
    assert consume_line(consume_summary(Recorder(1, 0.0), 1.0, None)).endswith(
        "no record received.")


def test_payload_is_letters_of_the_size() -> None:
    assert re.fullmatch(rb"[A-Z]{1000}", payload(1000, seed=1))
    assert payload(0) == b""


def test_live_display_figures_render() -> None:
    rec = Recorder(2, 0.0)
    rec.add(1_048_576, 3.0)
    console = Console(file=io.StringIO(), force_terminal=True, width=120)
    console.print(window_text(rec.take_window(1.0), latency=True), highlight=False)
    assert console.file.getvalue() == (
        "1 rec/s  1.00 MB/s  latency avg 3.0 p50 3.0 p99 3.0 max 3.0 ms\n")
