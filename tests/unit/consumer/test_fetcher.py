"""The fetcher's response handling, driven with decoded Fetch responses (no sockets)."""

from __future__ import annotations

import asyncio
import uuid
from types import MappingProxyType
from typing import Any

import pytest

from aiokproto.cluster.snapshot import BrokerInfo, ClusterSnapshot, PartitionInfo, TopicInfo
from aiokproto.config import split_options
from aiokproto.consumer.consumer_config import ConsumerConfig
from aiokproto.consumer.errors import OffsetOutOfRangeConsumerError, UndecodableBatchError
from aiokproto.consumer.fetcher import Fetcher
from aiokproto.consumer.session import FetchSession
from aiokproto.consumer.subscription import SubscriptionState
from aiokproto.protocol.messages.fetch import (
    FetchableTopicResponse,
    FetchResponse,
    FetchResponseEpochEndOffset,
    FetchResponseLeaderIdAndEpoch,
    FetchResponseNodeEndpoint,
    FetchResponsePartitionData,
)
from aiokproto.structs import TopicPartition
from tests.consumer.batches import batch, undecodable

TOPIC_ID = uuid.uuid4()
TP = TopicPartition("t", 0)


class FakeMetadata:
    def __init__(self) -> None:
        self.snapshot = ClusterSnapshot(
            brokers=MappingProxyType({n: BrokerInfo(n, "h", 9000 + n) for n in (1, 2)}),
            topics=MappingProxyType(
                {"t": TopicInfo("t", TOPIC_ID, MappingProxyType({0: PartitionInfo("t", 0, 1, 5)}))}
            ),
        )
        self.refreshes = 0
        self.hints: list[tuple[Any, ...]] = []

    def request_refresh(self) -> None:
        self.refreshes += 1

    def apply_leader_hint(self, *args: Any) -> bool:
        self.hints.append(args)
        return True


class FakeClient:
    def __init__(self) -> None:
        self.config, _ = split_options({"bootstrap_servers": "h:1"}, (), "test")
        self.metadata = FakeMetadata()


def make(**options: Any) -> tuple[Fetcher, SubscriptionState, FakeClient]:
    client = FakeClient()
    subs = SubscriptionState()
    subs.assign([TP])
    subs.seek(TP, 0)
    fetcher = Fetcher(client, subs, ConsumerConfig(**options), None)  # type: ignore[arg-type]
    return fetcher, subs, client


def respond(
    fetcher: Fetcher, subs: SubscriptionState, node: int = 1, **fields: Any
) -> tuple[int, bool]:
    routes, _ = fetcher._routes()
    wanted = routes[node]
    plan = FetchSession().plan(wanted)
    fields.setdefault("high_watermark", 10)
    part = FetchResponsePartitionData(partition_index=0, **fields)
    response = FetchResponse(
        responses=[FetchableTopicResponse(topic_id=TOPIC_ID, partitions=[part])],
        node_endpoints=[FetchResponseNodeEndpoint(node_id=2, host="h", port=9002)],
    )
    return fetcher._handle_response(node, plan, response, 16, {TP: subs.states()[TP]})


async def test_data_is_buffered_and_prefetch_continues_after_it() -> None:
    fetcher, subs, _ = make()
    routes, _ = fetcher._routes()
    assert routes[1][TP].fetch_offset == 0 and routes[1][TP].current_leader_epoch == 5
    respond(fetcher, subs, records=batch(0, [b"a", b"b"], epoch=5))
    assert subs.state_of(TP).highwater == 10  # type: ignore[union-attr]
    # the next fetch starts where the buffered data ends, with that batch's epoch
    nxt = fetcher._routes()[0][1][TP]
    assert (nxt.fetch_offset, nxt.last_fetched_epoch) == (2, 5)
    respond(fetcher, subs, records=batch(2, [b"c"], epoch=5))
    assert fetcher._routes()[0] == {}  # two responses buffered: no more fetching
    got = fetcher.drain(10)
    assert [r.value for r in got[TP]] == [b"a", b"b", b"c"]
    assert subs.position(TP) == 3 and subs.leader_epoch(TP) == 5
    assert fetcher._routes()[0][1][TP].fetch_offset == 3


async def test_seek_discards_buffered_data() -> None:
    fetcher, subs, _ = make()
    respond(fetcher, subs, records=batch(0, [b"a", b"b"]))
    subs.seek(TP, 1)
    assert fetcher.drain(10) == {}
    assert fetcher._routes()[0][1][TP].fetch_offset == 1


async def test_diverging_epoch_truncates_position() -> None:
    fetcher, subs, _ = make()
    subs.seek(TP, 7)
    subs.states()[TP].validate_epoch = False
    respond(fetcher, subs, diverging_epoch=FetchResponseEpochEndOffset(epoch=3, end_offset=4))
    assert subs.position(TP) == 4 and subs.leader_epoch(TP) == 3
    assert fetcher.drain(10) == {}


async def test_preferred_read_replica_is_followed_then_dropped_on_error() -> None:
    fetcher, subs, _ = make(client_rack="r1")
    respond(fetcher, subs, preferred_read_replica=2)
    routes = fetcher._routes()[0]
    assert list(routes) == [2]
    respond(fetcher, subs, node=2, error_code=6)  # NOT_LEADER_OR_FOLLOWER from the follower
    assert subs.states()[TP].preferred_replica is None


async def test_not_leader_applies_the_kip951_hint() -> None:
    fetcher, subs, client = make()
    respond(
        fetcher,
        subs,
        error_code=6,
        current_leader=FetchResponseLeaderIdAndEpoch(leader_id=2, leader_epoch=6),
    )
    (hint,) = client.metadata.hints
    assert hint[:4] == ("t", 0, 2, 6) and hint[4][0].node_id == 2
    assert TP in fetcher._backoff_until  # retried after retry_backoff_ms


@pytest.mark.parametrize("reset", ["earliest", "latest", "none"])
async def test_offset_out_of_range(reset: str) -> None:
    fetcher, subs, _ = make(auto_offset_reset=reset)
    respond(fetcher, subs, error_code=1)
    if reset == "none":
        with pytest.raises(OffsetOutOfRangeConsumerError, match="out of range"):
            fetcher.drain(10)
        assert fetcher._routes()[0] == {}  # stuck until the application seeks
        subs.seek(TP, 0)
        fetcher.drain(10)
        assert fetcher._routes()[0][1][TP].fetch_offset == 0
    else:
        assert subs.pending_resets() == {TP: reset}


async def test_oversized_batch_raises_the_next_fetch_size() -> None:
    fetcher, subs, _ = make(max_partition_fetch_bytes=100)
    big = batch(0, [b"x" * 500])
    respond(fetcher, subs, records=big[:100])
    assert fetcher.drain(10) == {}
    assert fetcher._routes()[0][1][TP].max_bytes >= len(big)


async def test_final_error_is_raised_to_the_application() -> None:
    fetcher, subs, _ = make()
    respond(fetcher, subs, error_code=29)  # TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(Exception, match="TopicAuthorizationFailed"):
        fetcher.drain(10)


@pytest.mark.parametrize("kind", ["codec7", "crc", "record"])
async def test_an_undecodable_batch_is_raised_on_every_call_until_a_seek(kind: str) -> None:
    fetcher, subs, _ = make()
    records = batch(0, [b"a", b"b"]) + undecodable(kind, 2, [b"c", b"d"]) + batch(4, [b"e"])
    respond(fetcher, subs, records=records)
    got = fetcher.drain(10)
    assert [r.value for r in got[TP]] == [b"a", b"b"]  # what precedes it comes first
    for _ in range(3):
        with pytest.raises(UndecodableBatchError) as info:
            fetcher.drain(10)
        assert (info.value.tp, info.value.first_offset, info.value.last_offset) == (TP, 2, 3)
        assert subs.position(TP) == 2
        assert fetcher._routes()[0] == {}  # not fetched again while it stands
    fetcher.drain(10, partitions=[TopicPartition("other", 0)])  # only where it is asked
    subs.seek(TP, 2)  # the same position, sought again: fetched and reported again
    assert fetcher.drain(10) == {}
    assert fetcher._routes()[0][1][TP].fetch_offset == 2
    subs.seek(TP, info.value.last_offset + 1)  # past it: consumption goes on
    respond(fetcher, subs, records=batch(4, [b"e"]))
    assert [r.value for r in fetcher.drain(10)[TP]] == [b"e"]
    assert subs.position(TP) == 5


async def test_an_undecodable_batch_alone_is_raised_at_once() -> None:
    fetcher, subs, _ = make()
    respond(fetcher, subs, records=undecodable("codec6", 0, [b"a"]) + batch(1, [b"b"]))
    for _ in range(2):
        with pytest.raises(UndecodableBatchError, match=r"t-0 offsets 0-0"):
            fetcher.drain(10)
    assert subs.position(TP) == 0


async def reader_waiting(fetcher: Fetcher) -> asyncio.Task[bool]:
    task = asyncio.create_task(fetcher.data_waiter().wait())
    await asyncio.sleep(0)  # it is waiting now
    return task


@pytest.mark.parametrize(
    ("options", "fields", "waiting", "expected"),
    [
        # caught up (the records end at the high watermark), a reader waits: it goes first
        ({}, {"high_watermark": 2}, True, True),
        # nobody waits: nothing to hand to, the next fetch goes out at once
        ({}, {"high_watermark": 2}, False, False),
        # lagging (more at the broker): prefetch first, whoever waits
        ({}, {"high_watermark": 10}, True, False),
        # read_committed ends at the last stable offset, not the high watermark
        ({"isolation_level": "read_committed"},
         {"high_watermark": 10, "last_stable_offset": 2}, True, True),
        ({"isolation_level": "read_committed"},
         {"high_watermark": 10, "last_stable_offset": 5}, True, False),
        # no last stable offset in the answer: the high watermark decides
        ({"isolation_level": "read_committed"},
         {"high_watermark": 2, "last_stable_offset": -1}, True, True),
        ({"isolation_level": "read_committed"},
         {"high_watermark": 10, "last_stable_offset": -1}, True, False),
    ],
)  # fmt: skip
async def test_caught_up_answer_goes_to_a_waiting_reader_first(
    options: dict[str, Any], fields: dict[str, Any], waiting: bool, expected: bool
) -> None:
    fetcher, subs, _ = make(**options)
    task = await reader_waiting(fetcher) if waiting else None
    nbytes, hand_first = respond(fetcher, subs, records=batch(0, [b"a", b"b"]), **fields)
    assert nbytes == 0 and hand_first is expected  # no metrics: no byte count
    if task is not None:
        async with asyncio.timeout(1):
            assert await task  # the reader was woken either way


async def test_answer_without_records_is_never_handed_first() -> None:
    fetcher, subs, _ = make()
    task = await reader_waiting(fetcher)
    assert respond(fetcher, subs, high_watermark=0) == (0, False)
    await asyncio.sleep(0)
    assert not task.done()  # nothing to read: not woken
    task.cancel()


TP1 = TopicPartition("t", 1)


def make_two() -> tuple[Fetcher, SubscriptionState]:
    """Partitions t-0 and t-1, both led by node 1."""
    fetcher, subs, client = make()
    client.metadata.snapshot = ClusterSnapshot(
        brokers=client.metadata.snapshot.brokers,
        topics=MappingProxyType(
            {
                "t": TopicInfo(
                    "t",
                    TOPIC_ID,
                    MappingProxyType({p: PartitionInfo("t", p, 1, 5) for p in (0, 1)}),
                )
            }
        ),
    )
    subs.assign([TP, TP1])
    subs.seek(TP, 0)
    subs.seek(TP1, 0)
    return fetcher, subs


def respond_two(
    fetcher: Fetcher, subs: SubscriptionState, parts: list[FetchResponsePartitionData]
) -> tuple[int, bool]:
    routes, _ = fetcher._routes()
    plan = FetchSession().plan(routes[1])
    response = FetchResponse(
        responses=[FetchableTopicResponse(topic_id=TOPIC_ID, partitions=parts)]
    )
    states = subs.states()
    return fetcher._handle_response(1, plan, response, 16, {tp: states[tp] for tp in (TP, TP1)})


@pytest.mark.parametrize(
    ("first_hw", "second", "expected"),
    [
        # both carried records and both are at their high watermark
        (2, {"records": batch(0, [b"c"]), "high_watermark": 1}, True),
        # one of them carried records but has more at the broker, whichever comes first
        (2, {"records": batch(0, [b"c"]), "high_watermark": 50}, False),
        (50, {"records": batch(0, [b"c"]), "high_watermark": 1}, False),
        # the second carried nothing while the broker has more (the answer's byte limit
        # ran out before it): still lagging
        (2, {"high_watermark": 50}, False),
        # the second carried nothing and has nothing
        (2, {"high_watermark": 0}, True),
        # the second was left out of the answer (an incremental session omits it) but
        # its last known high watermark is past where it was fetched from
        (2, None, False),
    ],
)
async def test_every_fetched_partition_must_be_caught_up_to_hand_first(
    first_hw: int, second: dict[str, Any] | None, expected: bool
) -> None:
    fetcher, subs = make_two()
    subs.states()[TP1].highwater = 50  # what an earlier answer said
    task = await reader_waiting(fetcher)
    first = FetchResponsePartitionData(
        partition_index=0, high_watermark=first_hw, records=batch(0, [b"a", b"b"])
    )
    parts = [first]
    if second is not None:
        parts.append(FetchResponsePartitionData(partition_index=1, **second))
    assert respond_two(fetcher, subs, parts) == (0, expected)
    async with asyncio.timeout(1):
        assert await task
