"""``ParallelConsumer`` refuses bad options and misuse with a clear typed error before
any I/O (its behaviour against a broker: tests/parallel/)."""

from __future__ import annotations

from typing import Any

import pytest

from aiokproto import Consumer, ParallelConsumer
from aiokproto.errors import IllegalStateError, KafkaConfigError


def consumer(**extra: Any) -> Consumer[bytes | None, bytes | None]:
    options: dict[str, Any] = {
        "bootstrap_servers": "127.0.0.1:1",
        "group_id": "g",
        "enable_auto_commit": False,
        **extra,
    }
    return Consumer("t", **options)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"ordering": "keys"}, "ordering must be one of"),
        ({"max_concurrency": 0}, "max_concurrency must be an int >= 1"),
        ({"max_concurrency": True}, "max_concurrency must be an int"),
        ({"max_queued_total": 0}, "max_queued_total must be an int >= 1 or None"),
        ({"commit_interval_ms": 0}, "commit_interval_ms"),
        ({"retries": -1}, "retries must be an int >= 0"),
        ({"on_failure": "ignore"}, "on_failure must be one of"),
        ({"on_failure": "dead_letter"}, "needs dead_letter_producer"),
        ({"dead_letter_topic": "dlt"}, "only with on_failure='dead_letter'"),
        ({"revoke_timeout_ms": -5}, "revoke_timeout_ms"),
    ],
)
def test_bad_options_are_refused(options: dict[str, Any], match: str) -> None:
    with pytest.raises(KafkaConfigError, match=match):
        ParallelConsumer(consumer(), **options)


def test_the_consumer_must_leave_commits_to_it() -> None:
    with pytest.raises(KafkaConfigError, match="enable_auto_commit=False"):
        ParallelConsumer(consumer(enable_auto_commit=True))
    with pytest.raises(KafkaConfigError, match="needs a Consumer with group_id"):
        ParallelConsumer(Consumer("t", bootstrap_servers="127.0.0.1:1"))
    with pytest.raises(KafkaConfigError, match="needs an aiokproto Consumer"):
        ParallelConsumer(object())  # type: ignore[arg-type]


async def handler(record: object) -> None:
    return None


async def test_run_needs_async_with_and_runs_once() -> None:
    pc = ParallelConsumer(consumer())
    with pytest.raises(IllegalStateError, match="async with ParallelConsumer"):
        await pc.run(handler)
    with pytest.raises(KafkaConfigError, match="handler must be callable"):
        await pc.run(42)  # type: ignore[arg-type]
    async with pc:
        pc._stop_requested = True  # a stop() before run(): run() returns at once
        await pc.run(handler)
        assert "stopped" in repr(pc)
    with pytest.raises(IllegalStateError, match="already used"):
        async with pc:
            pass


async def test_one_parallel_consumer_per_consumer_at_a_time() -> None:
    """Two at once on one consumer would share its records, and each would commit the
    safe offset of its own records only: past records the other has not finished."""
    c = consumer()
    async with ParallelConsumer(c):
        with pytest.raises(IllegalStateError, match="already has a ParallelConsumer"):
            async with ParallelConsumer(c):
                pass
    async with ParallelConsumer(c):  # once the first is done, another may follow
        pass


async def test_metrics_belong_to_the_one_entered_and_do_not_pile_up() -> None:
    """A ParallelConsumer per run (one after another on one consumer, as a supervisor
    loop does) leaves nothing behind in the consumer's metrics; one refused (another
    is entered) does not take over the running one's metrics."""
    c = consumer()
    registry = c._registry
    families = len(registry._families)
    for _ in range(3):
        async with ParallelConsumer(c):
            assert len(registry._families) == families + 1
        assert len(registry._families) == families
    async with ParallelConsumer(c) as running:
        running.processed = 7
        refused = ParallelConsumer(c)
        with pytest.raises(IllegalStateError):
            async with refused:
                pass
        assert c.metrics().value("processed-total", "parallel-consumer-metrics") == 7
