"""Rate-limited logging of a warning that repeats while something stays broken:
``RepeatingWarning`` logs the first of a run of identical warnings, then a summary per
minute with a count (pure, injectable clock).

During an outage every client would otherwise log the same line about once a second
for as long as it lasts. ``RepeatingWarning`` logs the first occurrence of a message,
then, while the same message keeps coming, one summary per ``interval_s`` with how
many were held back, and a final count when the trouble ends (``recovered()``) or a
different message replaces it. Pure apart from the logger: the clock is injectable.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

#: default seconds between two summaries of a repeating warning
SUMMARY_INTERVAL_S = 60.0


class RepeatingWarning:
    """One kind of warning (e.g. "metadata refresh failed") of one component."""

    def __init__(
        self,
        logger: logging.Logger,
        *,
        interval_s: float = SUMMARY_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
        level: int = logging.WARNING,
    ) -> None:
        self._log = logger
        self._interval = interval_s
        self._clock = clock
        self._level = level
        self._last: str | None = None  # the key of the warning being repeated
        self._latest = ""  # its latest text
        self._held = 0  # repeats of _last not logged yet
        self._total = 0  # repeats of _last since it was first logged
        self._since = 0.0
        self._next_summary = 0.0

    def __call__(self, message: str, *, kind: str | None = None) -> None:
        """Report ``message`` now (logged, counted, or summarised). Messages of the same
        ``kind`` (default: the same text) are one repeating warning, whose details (a
        broker's address, say) may change; summaries show the latest text."""
        now = self._clock()
        key = message if kind is None else kind
        if key != self._last:
            self._flush()
            self._last = key
            self._latest = message
            self._held = self._total = 0
            self._since = now
            self._next_summary = now + self._interval
            self._log.log(self._level, "%s", message)
            return
        self._latest = message
        self._held += 1
        self._total += 1
        if now >= self._next_summary:
            self._log.log(
                self._level,
                "%s (%d more time(s) in the last %.0f s; still failing after %.0f s)",
                message,
                self._held,
                self._interval,
                now - self._since,
            )
            self._held = 0
            self._next_summary = now + self._interval

    def recovered(self) -> None:
        """The trouble is over: say how often it repeated since the last line."""
        if self._last is not None:
            self._flush()
            if self._total:
                self._log.info(
                    "recovered after %.0f s: %s", self._clock() - self._since, self._latest
                )
        self._last = None
        self._held = self._total = 0

    def _flush(self) -> None:
        if self._last is not None and self._held:
            self._log.log(self._level, "%s (%d more time(s))", self._latest, self._held)
        self._held = 0
