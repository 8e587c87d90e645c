"""What ``ParallelConsumer`` does when a handler raises (sans-I/O): the retry back-off
and the headers a dead-lettered record carries saying why.

A failed record is retried ``retries`` times with exponential back-off (its key or
partition waits meanwhile: order is kept), then ``on_failure`` decides: ``"stop"``
(``run()`` raises the handler's exception; the record never finishes, so no commit
passes it), ``"skip"`` (it counts as done) or ``"dead_letter"`` (sent with the user's
producer to the dead-letter topic, then done).
"""

from __future__ import annotations

from typing import Literal

from aiokproto.structs import ConsumerRecord

OnFailure = Literal["stop", "skip", "dead_letter"]
ON_FAILURE: tuple[OnFailure, ...] = ("stop", "skip", "dead_letter")

#: header keys of a dead-lettered record (its own headers come first, unchanged)
DLT_TOPIC = "aiokproto.dlt.topic"
DLT_PARTITION = "aiokproto.dlt.partition"
DLT_OFFSET = "aiokproto.dlt.offset"
DLT_ERROR = "aiokproto.dlt.error"
DLT_MESSAGE = "aiokproto.dlt.message"
DLT_ATTEMPTS = "aiokproto.dlt.attempts"

#: a longer exception message is cut (a header is not a log)
MAX_MESSAGE_BYTES = 1024


def backoff_s(attempt: int, base_ms: int, max_ms: int) -> float:
    """The wait before retry ``attempt`` (1 for the first): base doubled each time,
    capped at ``max_ms``."""
    return min(max_ms, base_ms * (1 << min(attempt - 1, 30))) / 1000


def dead_letter_headers(
    record: ConsumerRecord[object, object], exc: BaseException, attempts: int
) -> list[tuple[str, bytes | None]]:
    """The record's headers plus where it came from and why it failed."""
    message = str(exc).encode("utf-8", "replace")[:MAX_MESSAGE_BYTES]
    error = f"{type(exc).__module__}.{type(exc).__qualname__}"
    return [
        *record.headers,
        (DLT_TOPIC, record.topic.encode()),
        (DLT_PARTITION, str(record.partition).encode()),
        (DLT_OFFSET, str(record.offset).encode()),
        (DLT_ERROR, error.encode()),
        (DLT_MESSAGE, message),
        (DLT_ATTEMPTS, str(attempts).encode()),
    ]
