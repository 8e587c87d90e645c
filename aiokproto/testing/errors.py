"""The one exception type the test harness raises."""

from __future__ import annotations


class KafkaHarnessError(RuntimeError):
    """A local Kafka could not be resolved, started, probed or stopped.

    ``log_tail`` holds the last lines of the broker's own log (and its stdout/stderr)
    when a broker process was involved, so a failed start explains itself.
    """

    def __init__(self, message: str, log_tail: str = "") -> None:
        self.log_tail = log_tail
        if log_tail:
            message = f"{message}\n--- broker log tail ---\n{log_tail}"
        super().__init__(message)
