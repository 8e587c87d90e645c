"""The metadata cache never floods a broker: refreshes are at least retry_backoff apart,
and a tracked topic that stays unknown is polled less and less often."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

import pytest

from aiokproto.errors import KafkaTimeoutError
from tests.clients import client_for
from tests.fake_broker import FakeBroker, Received, Reply, metadata_naming


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


def _answer_asked(fake: FakeBroker) -> Callable[[Received], Reply | None]:
    """Script: a Metadata request is answered with exactly the topics it asks for."""

    def script(rec: Received) -> Reply | None:
        if rec.api_key != 3:
            return None
        names = [t.name for t in rec.request.topics or ()]
        ids = {name: uuid.uuid5(uuid.NAMESPACE_DNS, name) for name in names}
        return Reply(response=metadata_naming(fake, ids, partitions=3))

    return script


def _asked(fake: FakeBroker) -> list[list[str]]:
    return [[t.name for t in r.request.topics or ()] for r in fake.received if r.api_key == 3]


async def test_new_topics_one_after_another_are_each_asked_for_alone() -> None:
    # Before: the lookup of each new topic asked for every topic seen so far, and 500
    # new topics cost 125,000 topic answers to decode (most of a minute of CPU).
    async with FakeBroker() as fake:
        fake.script = _answer_asked(fake)
        client = client_for(fake.bootstrap, retry_backoff_ms=50)
        async with client:
            await client.metadata.refresh()
            start = len(_asked(fake))
            for i in range(40):
                name = f"t{i}"
                client.metadata.track([name])
                await client.metadata.wait_for(lambda s, n=name: n in s.topics, 5.0,
                                               topics=[name])
            asked = _asked(fake)[start:]
            snap = client.metadata.snapshot
    assert asked == [[f"t{i}"] for i in range(40)]
    assert sorted(snap.topics) == sorted(f"t{i}" for i in range(40))  # merged, none lost
    assert all(len(info.partitions) == 3 for info in snap.topics.values())


async def test_topics_tracked_together_share_one_partial_refresh() -> None:
    async with FakeBroker() as fake:
        fake.script = _answer_asked(fake)
        client = client_for(fake.bootstrap, retry_backoff_ms=50)
        async with client:
            await client.metadata.refresh()
            client.metadata.track(["old"])
            await client.metadata.wait_for(lambda s: "old" in s.topics, 5.0, topics=["old"])
            start = len(_asked(fake))
            names = [f"n{i}" for i in range(200)]

            async def first_send(name: str) -> None:
                client.metadata.track([name])
                await client.metadata.wait_for(lambda s: name in s.topics, 5.0,
                                               topics=[name])

            await asyncio.gather(*(first_send(n) for n in names))
            asked = _asked(fake)[start:]
            # a refresh for staleness (a NOT_LEADER, the max age) asks for every
            # tracked topic again
            await client.metadata.refresh()
            full = _asked(fake)[-1]
    assert len(asked) <= 3, [len(a) for a in asked]
    assert sorted(t for a in asked for t in a) == sorted(names)  # "old" not asked again
    assert sorted(full) == sorted(["old", *names])


async def test_a_failed_partial_refresh_is_asked_again() -> None:
    async with FakeBroker() as fake:
        answer = _answer_asked(fake)
        fail = [True]

        def script(rec: Received) -> Reply | None:
            if rec.api_key == 3 and any(t.name == "x" for t in rec.request.topics or ()) \
                    and fail[0]:
                fail[0] = False
                return Reply(kind="close")
            return answer(rec)

        fake.script = script
        client = client_for(fake.bootstrap, retry_backoff_ms=50)
        async with client:
            await client.metadata.refresh()
            client.metadata.track(["x"])
            await client.metadata.wait_for(lambda s: "x" in s.topics, 10.0, topics=["x"])
    assert not fail[0]


async def test_a_partial_answer_keeps_the_other_topics_errors() -> None:
    async with FakeBroker() as fake:
        answer = _answer_asked(fake)

        def script(rec: Received) -> Reply | None:
            names = [t.name for t in rec.request.topics or ()] if rec.api_key == 3 else []
            if "gone" in names:
                reply = answer(rec)
                assert reply is not None and reply.response is not None
                for topic in reply.response.topics:
                    if topic.name == "gone":
                        topic.error_code = 3  # UNKNOWN_TOPIC_OR_PARTITION
                        topic.partitions = []
                return reply
            return answer(rec)

        fake.script = script
        client = client_for(fake.bootstrap, retry_backoff_ms=50)
        async with client:
            client.metadata.track(["gone"])
            await client.metadata.wait_for(lambda s: client.metadata.unknown("gone"), 5.0)
            client.metadata.track(["here"])
            await client.metadata.wait_for(lambda s: "here" in s.topics, 5.0, topics=["here"])
            assert client.metadata.unknown("gone")


async def test_asking_again_about_varying_topics_waits_for_the_back_off() -> None:
    # Review of the partial refreshes: produce errors naming a different topic each
    # time (new topics' leaders settling) skipped the back-off, 145 requests in 2 s.
    async with FakeBroker() as fake:
        fake.script = _answer_asked(fake)
        client = client_for(fake.bootstrap, retry_backoff_ms=300)
        async with client:
            names = [f"t{i}" for i in range(10)]
            client.metadata.track(names)
            await client.metadata.wait_for(lambda s: set(names) <= set(s.topics), 5.0)
            start = len(_asked(fake))
            for name in names:  # one a tick, as errors arrive
                client.metadata.request_refresh([name])
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.4)
            asked = _asked(fake)[start:]
            # a topic tracked and untracked before any request asked about it does
            # not leave the back-off skipped for good
            client.metadata.track(["brief"])
            client.metadata.untrack(["brief"])
            assert not client.metadata._asks_for_more()
    assert 1 <= len(asked) <= 3, asked  # 0.9 s at one per 0.3 s, not one per topic
