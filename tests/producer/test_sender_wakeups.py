"""When the sender's drain loop runs: once per new batch, and after a request ends only
if a pass could send something (on the real broker)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aiokproto.producer import Producer
from aiokproto.producer.sender import Sender
from tests.producer.helpers import FAST, create_topic


def _count_drains(p: Producer, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    acc = p._acc
    drain = acc.drain
    calls = [0]

    def counted(*args: Any) -> Any:
        calls[0] += 1
        return drain(*args)

    monkeypatch.setattr(acc, "drain", counted)
    return calls


async def _in_flight(sender: Sender) -> None:
    while sender.requests_in_flight == 0:  # noqa: ASYNC110 (a counter, no event to wait on)
        await asyncio.sleep(0)


async def test_a_request_that_ends_with_nothing_queued_does_not_wake_the_drain_loop(
    kafka: Any, topic_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    async with Producer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=0, **FAST) as p:
        await (await p.send(topic_name, b"warm-up"))  # metadata and connection
        drains = _count_drains(p, monkeypatch)
        for i in range(40):
            meta = await (await p.send(topic_name, b"v%d" % i))
            assert meta.offset == i + 1
    # one pass per record (its new batch); a pass after each answer as well made 80
    assert drains[0] <= 44, drains[0]


async def test_a_batch_queued_behind_the_in_flight_limit_goes_when_the_request_ends(
    kafka: Any, topic_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    async with Producer(
        bootstrap_servers=kafka.bootstrap_servers,
        linger_ms=0,
        max_in_flight_requests_per_connection=1,
        **FAST,
    ) as p:
        await (await p.send(topic_name, b"warm-up"))
        sender = p._sender
        assert sender is not None
        [conn] = [c for c in p._client._conns.values() if c.purpose == "produce"]
        for i in range(20):
            # the answer is read from the socket in the step it arrives (send_now): it
            # is held back until the second batch has queued
            conn._transport.pause_reading()
            first = await p.send(topic_name, b"a%d" % i)
            await asyncio.wait_for(_in_flight(sender), 10)  # the first request is out
            # the one slot is taken: this batch waits in the accumulator, and only the
            # end of the first request can send it (no new batch wakes the loop)
            second = await p.send(topic_name, b"b%d" % i)
            await asyncio.sleep(0.01)
            assert sender.requests_in_flight == 1 and p._acc.has_queued
            conn._transport.resume_reading()
            got = await asyncio.wait_for(asyncio.gather(first, second), 10)
            assert [m.offset for m in got] == [2 * i + 1, 2 * i + 2]


async def test_new_lingering_batches_share_the_pass_at_the_end_of_their_linger(
    kafka: Any, topic_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With linger_ms, a new batch on another partition does not wake the drain loop
    when its timer fires by the end of the new batch's linger anyway: at 1,000
    partitions a pass per new batch (each scanning every queued partition) was most of
    the producer's CPU."""
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=20)
    async with Producer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=200, **FAST) as p:
        warm = [await p.send(topic_name, b"warm", partition=i) for i in range(20)]
        await asyncio.gather(*warm)
        drains = _count_drains(p, monkeypatch)
        futures = []
        for i in range(20):
            futures.append(await p.send(topic_name, b"v%d" % i, partition=i))
            await asyncio.sleep(0)  # the loop turns: a wake would run a pass here
        got = await asyncio.wait_for(asyncio.gather(*futures), 10)
    assert sorted(m.partition for m in got) == list(range(20))
    # the first new batch sets the timer, the others share its pass (the pass itself
    # may find a few not yet ready: one more timer); one pass per batch made 20+
    assert drains[0] <= 6, drains[0]
