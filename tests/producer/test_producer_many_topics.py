"""The first send to each of many new topics (issue 33): each lookup asks the broker for
the new topics alone (a partial Metadata refresh, merged into the snapshot), and
lookups that wait at the same time share one request. Before, every lookup asked for
every topic seen so far: 500 new topics meant 500 requests answering 125,000 topics."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from aiokproto.admin import Admin, NewTopic
from aiokproto.producer import Producer
from tests.producer.helpers import FAST

TOPICS = 40


async def test_first_sends_to_many_new_topics_ask_for_the_new_ones_only(kafka: Any) -> None:
    run = uuid.uuid4().hex[:8]
    one_by_one = [f"many-{run}-a{i}" for i in range(TOPICS)]
    together = [f"many-{run}-b{i}" for i in range(TOPICS)]
    async with Admin(bootstrap_servers=kafka.bootstrap_servers) as admin:
        await admin.create_topics(
            [NewTopic(t, num_partitions=4, replication_factor=1) for t in one_by_one + together]
        )
    # the topics' leaders settle first (a produce just after creation meets
    # NOT_LEADER_OR_FOLLOWER for a while, and those refreshes are not lookups): the
    # producer under test is new to topics that have been there a while
    async with Producer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=0, **FAST) as warm:
        await asyncio.gather(*(warm.send_and_wait(t, b"warm") for t in one_by_one + together))
    asked: list[list[str] | None] = []
    async with Producer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=0, **FAST) as p:
        assert p._client is not None
        meta = p._client.metadata
        send = meta._send

        async def spy(request: Any) -> Any:
            asked.append(None if request.topics is None else [t.name for t in request.topics])
            return await send(request)

        meta._send = spy
        for topic in one_by_one:  # a loop that awaits each first send
            await p.send(topic, b"v")
        sequential = list(asked)
        asked.clear()
        futures = await asyncio.gather(*(p.send(t, b"v") for t in together))
        await p.flush()
        for future in futures:
            await future
        concurrent = list(asked)
        assert sorted(meta.snapshot.topics).count(one_by_one[0]) == 1
        assert set(one_by_one + together) <= set(meta.snapshot.topics)
    assert None not in sequential + concurrent  # never every topic of the cluster
    # one request per lookup, naming the new topic alone; before, the n-th lookup
    # asked for all n topics seen so far (820 topic answers here)
    assert sequential == [[t] for t in one_by_one], [len(n or ()) for n in sequential]
    # lookups waiting together share a request or two
    assert len(concurrent) <= 3, [len(n or ()) for n in concurrent]
    assert sorted(t for names in concurrent for t in names or ()) == sorted(together)
