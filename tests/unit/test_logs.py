"""RepeatingWarning: one line per outage, then summaries, instead of one per second."""

from __future__ import annotations

import logging

import pytest

from aiokproto.logs import RepeatingWarning


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records]


def test_a_repeating_warning_is_logged_once_then_summarised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    warn = RepeatingWarning(logging.getLogger("t.repeat"), interval_s=60, clock=clock)
    with caplog.at_level(logging.INFO, logger="t.repeat"):
        for second in range(150):  # a 150 s outage, one failure per second
            clock.now = float(second)
            warn("metadata refresh failed: cannot connect")
        clock.now = 150.0
        warn.recovered()
    lines = messages(caplog)
    assert lines[0] == "metadata refresh failed: cannot connect"
    assert len(lines) == 5, lines  # first, two summaries, the tail count, recovery
    assert "60 more time(s)" in lines[1] and "60 more time(s)" in lines[2]
    assert "29 more time(s)" in lines[3]
    assert lines[4].startswith("recovered after 150 s")


def test_a_different_message_is_logged_at_once(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    warn = RepeatingWarning(logging.getLogger("t.other"), interval_s=60, clock=clock)
    with caplog.at_level(logging.INFO, logger="t.other"):
        warn("a")
        warn("a")
        warn("b")
        warn.recovered()
        warn.recovered()  # nothing pending: silent
    assert messages(caplog) == ["a", "a (1 more time(s))", "b"]
