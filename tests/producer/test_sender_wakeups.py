"""When the sender's drain loop runs: once per new batch, and after a request ends only
if a pass could send something (on the real broker)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aiokproto.errors import KafkaTimeoutError
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


async def _no_requests(sender: Sender) -> None:
    while sender.requests_in_flight:  # noqa: ASYNC110 (a counter, no event to wait on)
        await asyncio.sleep(0.01)


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


async def test_lingers_ending_while_every_request_slot_is_taken_run_no_drain(
    kafka: Any, topic_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While every broker has max_in_flight requests out, a drain can send nothing: the
    loop skips it (a pass per linger end scanned every queued partition for nothing, a
    fifth of the CPU at 1,000 partitions) and drains when the request ends. A queued
    batch still expires at its deadline meanwhile."""
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=20)
    async with Producer(
        bootstrap_servers=kafka.bootstrap_servers,
        linger_ms=1,
        max_in_flight_requests_per_connection=1,
        request_timeout_ms=500,
        delivery_timeout_ms=600,
        **FAST,
    ) as p:
        warm = [await p.send(topic_name, b"warm", partition=i) for i in range(20)]
        await asyncio.gather(*warm)
        sender = p._sender
        assert sender is not None
        [conn] = [c for c in p._client._conns.values() if c.purpose == "produce"]
        # the request holds the broker's only slot while its answer is left unread (it
        # is read in the step it arrives: send_now)
        conn._transport.pause_reading()
        first = await p.send(topic_name, b"first", partition=0)
        await asyncio.wait_for(_in_flight(sender), 10)
        drains = _count_drains(p, monkeypatch)
        futures = []
        for i in range(20):
            futures.append(await p.send(topic_name, b"v%d" % i, partition=i))
            await asyncio.sleep(0.002)  # each batch's linger ends on its own
        assert drains[0] == 0, drains[0]  # twenty lingers ended: no pass for any
        conn._transport.resume_reading()
        got = await asyncio.wait_for(asyncio.gather(first, *futures), 10)
        assert sorted(m.partition for m in got[1:]) == list(range(20))
        assert got[1].offset == got[0].offset + 1  # partition 0 in order

        # the slot taken again: a batch queued behind it expires at its deadline,
        # not when the request ends
        conn._transport.pause_reading()
        await p.send(topic_name, b"blocker", partition=0)  # it holds the slot
        await asyncio.wait_for(_in_flight(sender), 10)
        queued = await p.send(topic_name, b"queued", partition=1)
        started = asyncio.get_running_loop().time()
        with pytest.raises(KafkaTimeoutError, match="expired"):
            await asyncio.wait_for(queued, 10)
        waited = asyncio.get_running_loop().time() - started
        assert 0.4 < waited < 2.0, waited  # its deadline: 0.6 s after its creation
        assert sender.requests_in_flight == 1  # the request still holds the slot
        conn._transport.resume_reading()
        await asyncio.wait_for(_no_requests(sender), 10)
