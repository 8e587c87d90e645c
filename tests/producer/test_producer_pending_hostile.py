"""Records sent to a topic whose metadata is not known yet (``producer/pending.py``),
used as a hostile caller would: every handle settles, typed, nothing hangs, no record
is lost, duplicated or reordered, and the buffer memory they held comes back."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from aiokproto.errors import KafkaError, KafkaTimeoutError
from aiokproto.producer import Producer
from tests.producer.helpers import FAST, create_topic


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _nothing_held(p: Producer) -> None:
    assert p._acc is not None
    assert (p._reserved, p._acc.used, len(p._pending)) == (0, 0, 0)


async def test_a_sender_failure_fails_the_records_waiting_for_their_topic(kafka: Any) -> None:
    # The sender's loop died (a bug: it fails every buffered record and every later
    # call). A record still waiting for its topic was placed behind it once the topic
    # appeared, and its handle, flush() and a commit waited for ever.
    later = _name("after-fatal")
    async with Producer(
        bootstrap_servers=kafka.bootstrap_servers, allow_auto_create_topics=False, **FAST
    ) as p:
        handle = await p.send(later, b"v")
        assert p._acc is not None and p._sender is not None

        def broken(*_args: Any) -> Any:
            raise RuntimeError("a bug in the drain")

        p._acc.drain = broken  # type: ignore[method-assign]
        p._sender.wake()
        for _ in range(100):
            if p._sender.fatal is not None:
                break
            await asyncio.sleep(0.01)
        assert p._sender.fatal is not None
        await create_topic(kafka.bootstrap_servers, later)
        with pytest.raises(KafkaError, match="sender failed"):
            await asyncio.wait_for(handle, 10)
        await asyncio.wait_for(p.flush(), 10)
        assert p._reserved == 0 and not p._pending


async def test_buffer_memory_held_by_records_waiting_for_a_topic_is_named(kafka: Any) -> None:
    # Records for a topic that never comes hold their buffer memory until they fail
    # (max_block_ms); a send() meanwhile waits for it. Its error said "0 bytes are
    # buffered in 0 batch(es)" and blamed the brokers, and buffer-available-bytes
    # counted their memory as free.
    good = await create_topic(kafka.bootstrap_servers, _name("good"))
    missing = _name("missing")
    async with Producer(
        bootstrap_servers=kafka.bootstrap_servers,
        buffer_memory=3000,
        batch_size=1500,
        allow_auto_create_topics=False,
        **{**FAST, "max_block_ms": 1000},
    ) as p:
        await p.partitions_for(good)
        held = [await p.send(missing, b"x" * 1000) for _ in range(2)]
        # they are not available to others (the gauge said all 3000 bytes were)
        assert p.metrics().value("buffer-available-bytes") < 1000
        with pytest.raises(KafkaTimeoutError, match=f"waiting for the metadata of .*{missing}"):
            await p.send(good, b"y" * 1000)
        for handle in held:
            with pytest.raises(KafkaTimeoutError, match=missing):
                await handle
        _nothing_held(p)  # their memory came back
        assert p.metrics().value("buffer-available-bytes") == 3000
        assert (await (await p.send(good, b"y" * 1000))).offset >= 0


async def test_stop_fails_a_record_for_a_missing_topic_saying_so(kafka: Any) -> None:
    # It raised IllegalStateError("the Producer is stopped; create a new one to send")
    # for a record sent while it was running.
    missing = _name("missing")
    seen: list[Any] = []
    p = Producer(
        bootstrap_servers=kafka.bootstrap_servers,
        allow_auto_create_topics=False,
        **{**FAST, "max_block_ms": 30_000},
    )
    await p.start()
    handle = await p.send(missing, b"v", on_delivery=lambda e, m: seen.append(e))
    await p.stop(timeout_ms=5000)
    with pytest.raises(KafkaTimeoutError, match=f"stopped before topic '{missing}'"):
        await handle
    await asyncio.sleep(0)
    assert len(seen) == 1 and isinstance(seen[0], KafkaTimeoutError)
    assert p._reserved == 0
