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
from aiokproto.errors import KafkaError
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


# -- the consumer-wide buffer bound (fetch_buffer_max_bytes) ---------------------------


async def test_buffered_bytes_are_charged_on_arrival_and_freed_when_handed_out() -> None:
    fetcher, subs, _ = make()
    first, second = batch(0, [b"a" * 100]), batch(1, [b"b" * 100])
    respond(fetcher, subs, records=first)
    respond(fetcher, subs, records=second)
    assert fetcher.budget.buffered == len(first) + len(second)
    assert [r.value for r in fetcher.drain(1)[TP]] == [b"a" * 100]
    assert fetcher.budget.buffered == len(second)  # the first answer's bytes are free
    fetcher.drain(10)
    assert (fetcher.budget.buffered, fetcher.budget.peak) == (0, len(first) + len(second))


async def test_seek_unassignment_and_close_free_the_buffered_bytes() -> None:
    fetcher, subs, _ = make()
    respond(fetcher, subs, records=batch(0, [b"a" * 100]))
    subs.seek(TP, 1)
    fetcher._routes()  # the next plan drops what the seek made stale
    assert fetcher.budget.buffered == 0
    respond(fetcher, subs, records=batch(1, [b"b"]))
    assert fetcher.budget.buffered > 0
    subs.assign([])  # revoked or unassigned: dropped without a drain() visiting it
    fetcher._routes()
    assert fetcher.budget.buffered == 0 and fetcher._buffer == {}
    subs.assign([TP])
    subs.seek(TP, 0)
    respond(fetcher, subs, records=batch(0, [b"c"]))
    await fetcher.close()
    assert fetcher.budget.buffered == 0


async def test_a_shared_response_is_charged_whole_while_any_slice_keeps_it() -> None:
    fetcher, subs = make_two()
    one, two = batch(0, [b"a" * 200]), batch(0, [b"b" * 200])
    whole = bytes(100) + one + two  # the answer: both partitions slice one buffer
    view = memoryview(whole)
    respond_two(
        fetcher,
        subs,
        [
            FetchResponsePartitionData(
                partition_index=0, high_watermark=1, records=view[100 : 100 + len(one)]
            ),
            FetchResponsePartitionData(
                partition_index=1, high_watermark=1, records=view[100 + len(one) :]
            ),
        ],
    )
    assert fetcher.budget.buffered == len(whole)  # the memory really held
    got = fetcher.drain(1)  # one partition handed out: the other still pins it all
    assert len(got) == 1
    assert fetcher.budget.buffered in (len(whole), len(two), len(one))
    fetcher.drain(10)
    assert fetcher.budget.buffered == 0


async def test_a_batch_larger_than_the_bound_is_buffered_and_delivered() -> None:
    fetcher, subs, _ = make(fetch_buffer_max_bytes=10)
    big = batch(0, [b"x" * 500])
    assert fetcher.budget.grant(1, fetcher.config.fetch_max_bytes) == 10  # asks for 10
    fetcher.budget.settle(1)
    respond(fetcher, subs, records=big)  # Kafka answers with at least one whole batch
    assert fetcher.budget.buffered == len(big) > fetcher.budget.limit
    assert fetcher.budget.grant(1, 10**6) == 0  # no fetch while over the bound
    assert [r.value for r in fetcher.drain(10)[TP]] == [b"x" * 500]
    assert fetcher.budget.buffered == 0 and fetcher.budget.grant(1, 10**6) == 10


async def test_the_request_asks_for_the_grant_and_never_waits_for_more() -> None:
    fetcher, _subs, _ = make(fetch_min_bytes=5000)
    plan = FetchSession().plan(fetcher._routes()[0][1])
    request = fetcher._build_request(plan, 1000)
    assert (request.max_bytes, request.min_bytes) == (1000, 1000)
    request = fetcher._build_request(plan, 10**6)
    assert (request.max_bytes, request.min_bytes) == (10**6, 5000)


async def test_a_batch_cut_by_the_answer_s_limit_is_not_taken_for_oversized() -> None:
    fetcher, subs, _ = make(max_partition_fetch_bytes=1000)
    full = batch(0, [b"x" * 500])
    respond(fetcher, subs, records=full[:100])  # fits the partition: the answer cut it
    assert fetcher._routes()[0][1][TP].max_bytes == 1000
    assert fetcher.budget.buffered == 0


class KafkaLikeConnection:
    """Answers Fetch requests as a broker does for ``max_bytes``: the first partition
    with data gets at least one batch, the others only what still fits."""

    def __init__(self, value_size: int = 300) -> None:
        self.requests: list[Any] = []
        self.value = b"v" * value_size
        #: the partitions that have records at the "broker" (None: all)
        self.only: set[int] | None = None
        self.answering: set[asyncio.Task[None]] = set()

    def version_for(self, _api: Any, _low: int) -> int:
        return 16

    def ready_now(self) -> bool:
        return True

    def send_now(self, request: Any, version: int, on_answer: Any, timeout_ms: int) -> None:
        # as BrokerConnection.send_now: the answer (send()'s, which the fakes below
        # script) comes later, to the callback, as from the read path
        async def answer() -> None:
            try:
                response = await self.send(request, version, timeout_ms)
            except (KafkaError, OSError) as exc:  # the fakes' own failures, as scripted
                on_answer(None, exc)
            else:
                on_answer(response, None)

        task = asyncio.get_running_loop().create_task(answer())
        self.answering.add(task)
        task.add_done_callback(self.answering.discard)

    async def send(self, request: Any, _version: int, timeout_ms: int) -> FetchResponse:
        return self.answer(request)

    def answer(self, request: Any) -> FetchResponse:
        self.requests.append(request)
        left = request.max_bytes
        parts = []
        for topic in request.topics:
            for p in topic.partitions:
                data = batch(p.fetch_offset, [self.value])
                if (parts and len(data) > left) or (
                    self.only is not None and p.partition not in self.only
                ):
                    continue
                left -= len(data)
                parts.append(
                    FetchResponsePartitionData(
                        partition_index=p.partition, high_watermark=10**6, records=data
                    )
                )
        return FetchResponse(
            responses=[FetchableTopicResponse(topic_id=TOPIC_ID, partitions=parts)]
        )


async def run_loop(
    limit_batches: float, only: set[int] | None = None
) -> tuple[Fetcher, SubscriptionState, KafkaLikeConnection, int]:
    fetcher, subs = make_two()
    conn = KafkaLikeConnection()
    conn.only = only
    size = len(batch(0, [conn.value]))
    fetcher.budget.limit = int(size * limit_batches)

    async def connection(_node: int, _purpose: str) -> KafkaLikeConnection:
        return conn

    fetcher.client.connection = connection  # type: ignore[attr-defined]
    fetcher._node_tasks.start(1, fetcher._node_loop)
    return fetcher, subs, conn, size


async def settled(conn: KafkaLikeConnection) -> int:
    """Let the loop run until it stops sending; the number of requests sent."""
    count = -1
    while count != len(conn.requests):
        count = len(conn.requests)
        for _ in range(20):
            await asyncio.sleep(0)
    return count


async def test_no_fetch_is_sent_at_the_bound_and_draining_resumes_fetching() -> None:
    fetcher, _subs, conn, size = await run_loop(2)
    try:
        # each fetch asks for a quarter of the bound (half a batch): one batch comes,
        # the partition not served yet first; two batches reach the bound
        assert await settled(conn) == 2
        assert [r.max_bytes for r in conn.requests] == [2 * size // 4] * 2
        assert fetcher.budget.buffered == 2 * size and fetcher.budget.reserved == 0
        assert set(fetcher._buffer) == {TP, TP1}
        got = fetcher.drain(1)  # one partition's batch handed out: its bytes are free
        assert sum(len(v) for v in got.values()) == 1
        assert await settled(conn) == 3
        assert fetcher.budget.buffered <= 2 * size
        seen: dict[int, list[int]] = {0: [], 1: []}
        for _ in range(20):  # both partitions keep flowing, in order, at the bound
            for tp, recs in fetcher.drain(1).items():
                seen[tp.partition] += [r.offset for r in recs]
            await settled(conn)
            assert fetcher.budget.buffered <= 2 * size
        for offsets in seen.values():
            assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))
            assert len(offsets) >= 5  # neither partition starved
    finally:
        await fetcher.close()


async def test_a_bound_smaller_than_one_batch_still_delivers_every_batch() -> None:
    fetcher, _subs, conn, size = await run_loop(0.01)
    try:
        for expected in range(6):
            await settled(conn)
            assert fetcher.budget.buffered == size  # one batch at a time, over the bound
            got = fetcher.drain(10)
            assert [r.offset for recs in got.values() for r in recs] == [expected // 2]
        assert all(r.max_bytes == 1 for r in conn.requests)  # a quarter of 3 bytes, or 1
    finally:
        await fetcher.close()


async def test_pausing_every_partition_at_the_bound_keeps_their_data() -> None:
    fetcher, subs, conn, size = await run_loop(2)
    try:
        await settled(conn)
        subs.pause(TP, TP1)
        assert fetcher.drain(10) == {} and await settled(conn) == 2
        assert fetcher.budget.buffered == 2 * size  # nothing else wants the room
        subs.resume(TP, TP1)
        got = fetcher.drain(10)
        assert {tp: [r.offset for r in recs] for tp, recs in got.items()} == {
            TP: [0],
            TP1: [0],
        }
    finally:
        await fetcher.close()


async def test_paused_data_at_the_bound_makes_room_for_the_other_partitions() -> None:
    fetcher, subs, conn, _size = await run_loop(2)
    try:
        await settled(conn)
        subs.pause(TP)
        assert [r.offset for r in fetcher.drain(1)[TP1]] == [0]
        await settled(conn)  # TP's buffered batch was dropped: TP1 fetched twice more
        assert TP not in fetcher._buffer
        assert [r.offset for r in fetcher.drain(10)[TP1]] == [1, 2]
        subs.resume(TP)
        await settled(conn)
        got = fetcher.drain(10)
        assert [r.offset for r in got[TP]] == [0]  # fetched again from its position
    finally:
        await fetcher.close()


async def test_seek_at_the_bound_frees_the_room_and_fetches_from_the_new_offset() -> None:
    fetcher, subs, conn, _size = await run_loop(2)
    try:
        await settled(conn)
        subs.seek(TP, 40)
        fetcher.wake()
        await settled(conn)
        got = fetcher.drain(10)
        assert [r.offset for r in got[TP]] == [40]
    finally:
        await fetcher.close()


async def test_close_ends_a_loop_waiting_for_room() -> None:
    fetcher, _subs, conn, _size = await run_loop(2)
    await settled(conn)
    waiter = fetcher.data_waiter()
    async with asyncio.timeout(2):
        await fetcher.close()
    assert waiter.is_set() and len(fetcher._node_tasks) == 0
    assert fetcher.budget.buffered == 0


async def test_evicting_paused_data_drops_only_paused_partitions() -> None:
    fetcher, subs = make_two()
    data = batch(0, [b"a" * 300])
    respond_two(
        fetcher,
        subs,
        [
            FetchResponsePartitionData(partition_index=0, high_watermark=1, records=data),
            FetchResponsePartitionData(partition_index=1, high_watermark=1, records=data),
        ],
    )
    fetcher.budget.limit = fetcher.budget.buffered  # at the bound
    assert fetcher._evict_paused() is False
    subs.pause(TP)
    assert fetcher._evict_paused() is True
    assert list(fetcher._buffer) == [TP1] and fetcher.budget.buffered == len(data)


async def test_a_reader_of_one_partition_is_not_starved_by_the_others_at_the_bound() -> None:
    fetcher, subs, conn, _ = await run_loop(2, only={1})  # TP has no records yet
    try:
        assert await settled(conn) == 2  # TP1's two answers fill the bound
        assert list(fetcher._buffer) == [TP1] and fetcher._starved == {1}
        conn.only = None  # TP has records now, but no fetch may be sent for them
        assert await settled(conn) == 2
        assert fetcher.drain(10, [TP]) == {}  # a reader of TP gets nothing...
        assert fetcher._buffer == {}  # ...so TP1's data makes room (fetched again later)
        await settled(conn)
        # TP goes first in the fetches now: both bring its records
        assert [r.offset for r in fetcher.drain(10, [TP])[TP]] == [0, 1]
        assert subs.position(TP1) == 0
    finally:
        await fetcher.close()


async def test_a_reader_of_one_partition_is_woken_when_another_broker_s_loop_starves() -> None:
    # t-1 (node 1) fills the bound and stops (prefetch depth); t-0's broker (node 2)
    # answers its long poll empty only then: its loop waits for room, and a getone(t-0)
    # already waiting must be woken to let t-1's data go, or it waits forever
    fetcher, subs = make_two()
    snap = fetcher.client.metadata.snapshot
    fetcher.client.metadata.snapshot = ClusterSnapshot(  # type: ignore[attr-defined]
        brokers=snap.brokers,
        topics=MappingProxyType(
            {
                "t": TopicInfo(
                    "t",
                    TOPIC_ID,
                    MappingProxyType({p: PartitionInfo("t", p, 2 - p, 5) for p in (0, 1)}),
                )
            }
        ),
    )

    class Network(KafkaLikeConnection):
        async def send(self, request: Any, version: int, timeout_ms: int) -> FetchResponse:
            await asyncio.sleep(0)  # a round trip: the other loop runs meanwhile
            return await super().send(request, version, timeout_ms)

    fills = Network()
    fills.only = {1}
    size = len(batch(0, [fills.value]))
    fetcher.budget.limit = 2 * size
    polled = asyncio.Event()
    answer = asyncio.Event()

    class LongPoll(KafkaLikeConnection):
        async def send(self, request: Any, version: int, timeout_ms: int) -> FetchResponse:
            if not answer.is_set():
                polled.set()
                await answer.wait()  # the broker's long poll, then nothing yet
                return FetchResponse(responses=[])
            return await super().send(request, version, timeout_ms)

    slow = LongPoll()

    async def connection(node: int, _purpose: str) -> KafkaLikeConnection:
        return fills if node == 1 else slow

    async def getone() -> int:
        while True:
            waiter = fetcher.data_waiter()
            for recs in fetcher.drain(1, [TP]).values():
                return recs[0].offset
            await waiter.wait()

    fetcher.client.connection = connection  # type: ignore[attr-defined]
    fetcher._node_tasks.start(2, fetcher._node_loop)
    await polled.wait()  # node 2's fetch is out, holding its share
    fetcher._node_tasks.start(1, fetcher._node_loop)
    try:
        await settled(fills)
        assert fetcher.budget.buffered == 2 * size and list(fetcher._buffer) == [TP1]
        reader = asyncio.create_task(getone())
        await settled(fills)
        answer.set()  # the long poll ends empty: node 2's loop now waits for room
        async with asyncio.timeout(2):
            assert await reader == 0
        assert subs.position(TP1) == 0  # its data went, to be fetched again
    finally:
        await fetcher.close()


def accounted(fetcher: Fetcher) -> int:
    """What the buffered data holds by its own bookkeeping (each response kept whole
    once, each copy once): the budget's count must be exactly this."""
    frames = {id(fd.frame): fd.frame for q in fetcher._buffer.values() for fd in q if fd.frame}
    own = sum(fd.charged for q in fetcher._buffer.values() for fd in q)
    return own + sum(frame.charged for frame in frames.values() if frame is not None)


async def test_the_accounting_returns_to_zero_through_every_way_data_leaves() -> None:
    # failed, cancelled, refused and revoked fetches, seeks and pauses while fetches are
    # out, partial reads and reads of one partition, round after round: the budget
    # always equals what is buffered, nothing stays reserved once no fetch is out, and
    # every offset is handed out once, in order
    fetcher, subs = make_two()
    fetcher.client.config, _ = split_options(  # type: ignore[attr-defined]
        {"bootstrap_servers": "h:1", "retry_backoff_ms": 1}, (), "test"
    )
    gate = asyncio.Event()

    class Scripted(KafkaLikeConnection):
        mode = "data"

        async def send(self, request: Any, version: int, timeout_ms: int) -> FetchResponse:
            await asyncio.sleep(0)
            if self.mode == "fail":
                raise ConnectionResetError("the broker went away")
            if self.mode == "hang":
                await gate.wait()
            response = await super().send(request, version, timeout_ms)
            if self.mode == "refuse":  # NOT_LEADER_OR_FOLLOWER for every partition
                for t in response.responses:
                    for p in t.partitions:
                        p.error_code, p.records = 6, None
            return response

    conn = Scripted(value_size=200)
    size = len(batch(0, [conn.value]))
    fetcher.budget.limit = 3 * size

    async def connection(_node: int, _purpose: str) -> KafkaLikeConnection:
        return conn

    fetcher.client.connection = connection  # type: ignore[attr-defined]
    seen: dict[TopicPartition, list[int]] = {TP: [], TP1: []}

    def take(n: int, *only: TopicPartition) -> None:
        for tp, recs in fetcher.drain(n, only or None).items():
            seen[tp] += [r.offset for r in recs]
        assert fetcher.budget.buffered == accounted(fetcher)

    async def run() -> None:
        await asyncio.sleep(0.005)  # back-offs (1 ms) end
        fetcher.wake()
        await settled(conn)
        assert fetcher.budget.buffered == accounted(fetcher)

    fetcher._node_tasks.start(1, fetcher._node_loop)
    for _ in range(3):
        await run()
        take(1)
        for mode in ("fail", "refuse"):
            conn.mode = mode
            take(1)
            await run()
            conn.mode = "data"
        await run()
        # TP1 revoked, TP seeked to where it is, both while a fetch is out
        conn.mode, gate = "hang", asyncio.Event()
        take(10)
        await run()
        assert fetcher.budget.reserved > 0
        subs.assign([TP])
        subs.seek(TP, subs.position(TP))  # type: ignore[arg-type]
        gate.set()
        conn.mode = "data"
        await run()
        subs.assign([TP, TP1])
        subs.seek(TP1, seen[TP1][-1] + 1 if seen[TP1] else 0)
        await run()
        subs.pause(TP)  # paused at the bound: its data goes for TP1's
        take(1)
        await run()
        take(1, TP1)
        subs.resume(TP)
        await run()
        take(1, TP)  # a reader of one partition only
        await run()
        take(2)
        assert fetcher.budget.reserved == 0
    conn.mode, gate = "hang", asyncio.Event()
    take(100)
    await run()
    assert fetcher.budget.reserved > 0
    await fetcher.close()  # cancels the fetch that is out
    assert (fetcher.budget.buffered, fetcher.budget.reserved) == (0, 0)
    for offsets in seen.values():
        assert offsets == list(range(len(offsets))) and len(offsets) >= 6


async def test_a_reader_of_one_partition_at_a_time_at_the_bound_gets_it_fetched_first() -> None:
    # getmany(tp) over 16 partitions in turn, waiting when there is nothing, with room
    # for 4 batches: each call's partition goes first in the next fetch and only the
    # room it needs is freed (letting all the others' data go refetched everything and
    # still left most calls with nothing: 100 of 320 got records, 1,919 fetches)
    fetcher, subs, client = make()
    tps = [TopicPartition("t", p) for p in range(16)]
    client.metadata.snapshot = ClusterSnapshot(
        brokers=client.metadata.snapshot.brokers,
        topics=MappingProxyType(
            {
                "t": TopicInfo(
                    "t",
                    TOPIC_ID,
                    MappingProxyType(
                        {tp.partition: PartitionInfo("t", tp.partition, 1, 5) for tp in tps}
                    ),
                )
            }
        ),
    )
    subs.assign(tps)
    for tp in tps:
        subs.seek(tp, 0)
    conn = KafkaLikeConnection()
    fetcher.budget.limit = 4 * len(batch(0, [conn.value]))

    async def connection(_node: int, _purpose: str) -> KafkaLikeConnection:
        return conn

    fetcher.client.connection = connection  # type: ignore[attr-defined]
    fetcher._node_tasks.start(1, fetcher._node_loop)
    try:
        for _ in range(5):
            for tp in tps:
                await settled(conn)
                got = fetcher.drain(500, [tp])
                if not got:  # the reader waits for its partition's records
                    await settled(conn)
                    got = fetcher.drain(500, [tp])
                assert got, f"nothing for {tp} after a fetch"
        assert len(conn.requests) <= 2 * 5 * len(tps)
        assert fetcher.budget.buffered == accounted(fetcher)
    finally:
        await fetcher.close()


async def test_evicting_paused_data_frees_only_the_room_asked_for() -> None:
    # three paused partitions' data at the bound: a fetch needing one answer's room
    # drops one of them (the most recently fetched), not all: a consumer pausing for
    # backpressure keeps the rest of its prefetch
    fetcher, subs, client = make()
    tps = [TopicPartition("t", p) for p in range(3)]
    client.metadata.snapshot = ClusterSnapshot(
        brokers=client.metadata.snapshot.brokers,
        topics=MappingProxyType(
            {
                "t": TopicInfo(
                    "t",
                    TOPIC_ID,
                    MappingProxyType(
                        {tp.partition: PartitionInfo("t", tp.partition, 1, 5) for tp in tps}
                    ),
                )
            }
        ),
    )
    subs.assign(tps)
    data = batch(0, [b"a" * 300])
    for tp in tps:
        subs.seek(tp, 0)
        plan = FetchSession().plan({tp: fetcher._routes()[0][1][tp]})
        part = FetchResponsePartitionData(
            partition_index=tp.partition, high_watermark=9, records=data
        )
        response = FetchResponse(
            responses=[FetchableTopicResponse(topic_id=TOPIC_ID, partitions=[part])]
        )
        fetcher._handle_response(1, plan, response, 16, {tp: subs.states()[tp]})
    fetcher.budget.limit = fetcher.budget.buffered
    subs.pause(*tps)
    assert fetcher._evict_paused(len(data)) is True
    assert list(fetcher._buffer) == tps[:2]  # the last fetched went
    assert fetcher.budget.buffered == 2 * len(data) == fetcher.budget.limit - len(data)
    assert fetcher._evict_paused(len(data)) is False  # there is room already


def answer_args(
    fetcher: Fetcher, subs: SubscriptionState, high_watermark: int = 2
) -> tuple[Any, ...]:
    """``Fetcher._answered``'s arguments for a fetch from node 1, and its answer."""
    wanted = fetcher._routes()[0][1]
    session = FetchSession()
    plan = session.plan(wanted)
    part = FetchResponsePartitionData(
        partition_index=0, high_watermark=high_watermark, records=batch(0, [b"a", b"b"])
    )
    response = FetchResponse(
        responses=[FetchableTopicResponse(topic_id=TOPIC_ID, partitions=[part])]
    )
    return (1, session, plan, 16, {TP: subs.states()[TP]}, 0.0), response


@pytest.mark.parametrize(
    ("high_watermark", "first"), [(2, "reader"), (10, "loop")], ids=["caught-up", "lagging"]
)
async def test_an_answer_read_by_the_connection_wakes_reader_and_loop_in_order(
    high_watermark: int, first: str
) -> None:
    """A fetch written with send_now is answered from the read path: the records are
    buffered there, and the reader and the loop resume in the next pass, in order: a
    caught-up reader first (the loop's next fetch would only wait at the broker), else
    the loop first (its next fetch is prepared while the reader works)."""
    fetcher, subs, _ = make()
    order: list[str] = []
    answered: asyncio.Future[tuple[bool, bool]] = asyncio.get_running_loop().create_future()

    async def reader() -> None:
        await fetcher.data_waiter().wait()
        order.append("reader")

    async def fetch_loop() -> None:
        assert await answered == (False, False)  # no extra pass for the reader
        order.append("loop")

    tasks = [asyncio.create_task(reader()), asyncio.create_task(fetch_loop())]
    await asyncio.sleep(0)  # both wait
    args, response = answer_args(fetcher, subs, high_watermark)
    fetcher._answered(answered, args, response, None)
    assert fetcher._buffer[TP]  # buffered in the read path's step
    async with asyncio.timeout(1):
        await asyncio.gather(*tasks)
    assert order[0] == first and sorted(order) == ["loop", "reader"]


async def test_an_answer_to_a_cancelled_fetch_loop_is_dropped() -> None:
    fetcher, subs, _ = make()
    answered: asyncio.Future[tuple[bool, bool]] = asyncio.get_running_loop().create_future()
    answered.cancel()  # the loop was cancelled while its fetch was out
    args, response = answer_args(fetcher, subs)
    session = args[1]
    epoch = session.epoch
    fetcher._answered(answered, args, response, None)
    assert TP not in fetcher._buffer and session.epoch == epoch
