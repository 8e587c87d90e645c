"""The metadata cache never floods a broker: refreshes are at least retry_backoff apart,
and a tracked topic that stays unknown is polled less and less often."""

from __future__ import annotations

import asyncio

import pytest

from aiokproto.errors import KafkaTimeoutError
from tests.clients import client_for
from tests.fake_broker import FakeBroker, Received


def _metadata_requests(fake: FakeBroker) -> int:
    return sum(1 for r in fake.received if r.api_key == 3)


async def test_waiting_for_a_missing_topic_asks_once_per_backoff() -> None:
    # It asked again after every answer: some 6,500 Metadata requests a second for as
    # long as a send() to a topic that does not exist waited (max_block_ms).
    async with FakeBroker() as fake:
        client = client_for(fake.bootstrap, retry_backoff_ms=100, retry_backoff_max_ms=1000)
        async with client:
            client.metadata.track(["missing"])
            before = _metadata_requests(fake)
            with pytest.raises(KafkaTimeoutError):
                await client.metadata.wait_for(lambda s: "missing" in s.topics, 1.0)
            asked = _metadata_requests(fake) - before
    assert 2 <= asked <= 12, asked  # about 10; before: 11,219


async def test_a_topic_that_stays_unknown_is_polled_with_growing_backoff() -> None:
    async with FakeBroker() as fake:
        client = client_for(fake.bootstrap, retry_backoff_ms=100, retry_backoff_max_ms=400)
        async with client:
            client.metadata.track(["missing"])
            await asyncio.sleep(0.5)  # 100 + 200 ms, then 400 ms apart
            start = _metadata_requests(fake)
            await asyncio.sleep(2.0)
            asked = _metadata_requests(fake) - start
    # 100 ms apart (the back-off never growing) would be 20; one pending poll per
    # refresh, not one per refresh piling up
    assert 2 <= asked <= 7, asked


async def test_a_refresh_asked_for_during_the_backoff_still_happens() -> None:
    async with FakeBroker() as fake:
        client = client_for(fake.bootstrap, retry_backoff_ms=300)
        async with client:
            await client.metadata.refresh()
            loop = asyncio.get_running_loop()
            start = loop.time()
            before = _metadata_requests(fake)
            await client.metadata.refresh()  # within the back-off: delayed, not dropped
            waited = loop.time() - start
            assert _metadata_requests(fake) == before + 1
    assert 0.2 <= waited < 2.0, waited


async def test_a_newly_tracked_topic_is_asked_for_at_once() -> None:
    # the back-off is for asking again, not for a topic the last refresh did not name
    async with FakeBroker() as fake:
        client = client_for(fake.bootstrap, retry_backoff_ms=3000)
        async with client:
            await client.metadata.refresh()
            loop = asyncio.get_running_loop()
            start = loop.time()
            before = _metadata_requests(fake)
            client.metadata.track(["new"])
            await fake.wait_received(lambda got: _metadata_requests(fake) > before)
            assert loop.time() - start < 1.0
            # asking again for the same (still missing) topic waits for the back-off
            client.metadata.request_refresh()
            await asyncio.sleep(0.5)
            assert _metadata_requests(fake) == before + 1


async def test_a_topic_tracked_during_the_backoff_cuts_it_short() -> None:
    # found in review: a refresh waiting out the back-off for one missing topic held
    # back the first lookup of every other new topic
    async with FakeBroker() as fake:
        client = client_for(fake.bootstrap, retry_backoff_ms=2000, retry_backoff_max_ms=2000)
        async with client:
            loop = asyncio.get_running_loop()
            client.metadata.track(["x"])
            waiting = asyncio.ensure_future(
                client.metadata.wait_for(lambda s: "x" in s.topics, None)
            )
            await asyncio.sleep(0.3)  # x was asked for; asking again waits the back-off
            start = loop.time()
            client.metadata.track(["y"])

            def asked_for_y(got: list[Received]) -> bool:
                return any(
                    r.api_key == 3 and any(t.name == "y" for t in r.request.topics or ())
                    for r in got
                )

            async with asyncio.timeout(5):
                await fake.wait_received(asked_for_y)
            waiting.cancel()
    assert loop.time() - start < 1.0
