"""Retry back-off and dead-letter headers (pure)."""

from __future__ import annotations

from aiokproto.parallel.failures import MAX_MESSAGE_BYTES, backoff_s, dead_letter_headers
from aiokproto.structs import ConsumerRecord


def test_backoff_doubles_up_to_the_cap() -> None:
    assert [backoff_s(a, 100, 1000) for a in (1, 2, 3, 4, 5)] == [0.1, 0.2, 0.4, 0.8, 1.0]
    assert backoff_s(500, 100, 1000) == 1.0  # no overflow on a huge attempt count


def test_dead_letter_headers_keep_the_record_headers_and_say_why() -> None:
    record: ConsumerRecord[object, object] = ConsumerRecord(
        "orders", 3, 42, 0, 0, b"k", b"v", (("trace", b"x"),)
    )
    headers = dict(dead_letter_headers(record, ValueError("bad " * 1000), 4))
    assert headers["trace"] == b"x"
    assert headers["aiokproto.dlt.topic"] == b"orders"
    assert headers["aiokproto.dlt.partition"] == b"3"
    assert headers["aiokproto.dlt.offset"] == b"42"
    assert headers["aiokproto.dlt.error"] == b"builtins.ValueError"
    assert headers["aiokproto.dlt.attempts"] == b"4"
    message = headers["aiokproto.dlt.message"]
    assert message is not None and len(message) == MAX_MESSAGE_BYTES
