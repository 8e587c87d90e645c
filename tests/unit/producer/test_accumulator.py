"""Accumulator and sequence bookkeeping, driven by hand: no sockets, no sender task."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from aiokproto.config import split_options
from aiokproto.errors import (
    KafkaConnectionError,
    KafkaTimeoutError,
    MessageTooLargeError,
    NotLeaderOrFollowerError,
)
from aiokproto.producer.accumulator import PATIENT_DEPTH, Accumulator
from aiokproto.producer.batch import (
    BatchResult,
    ProducerBatch,
    ProducerIdentity,
    increment_sequence,
    split_records,
)
from aiokproto.producer.delivery import OnDelivery, wait_delivered
from aiokproto.producer.options import PRODUCER_OPTIONS, parse_producer_options
from aiokproto.records import RecordBatchBuilder, compression, read_batches

VALUE = b"v" * 100


class Rig:
    """An accumulator with a fake clock and leader table."""

    def __init__(self, **options: Any) -> None:
        options.setdefault("linger_ms", 10)
        config, own = split_options(
            {"bootstrap_servers": "x:1", **options}, PRODUCER_OPTIONS, "Producer"
        )
        self.options = parse_producer_options(config, own)
        self.wakes = 0
        self.releases = 0
        self.loop = asyncio.get_running_loop()
        self.acc = Accumulator(self.options, self.loop, self._wake, self._released)
        self.leaders: dict[tuple[str, int], int] = {}
        self.in_flight: dict[int, int] = {}

    def _wake(self) -> None:
        self.wakes += 1

    def _released(self) -> None:
        self.releases += 1

    def send(self, partition: int = 0, value: bytes = VALUE, topic: str = "t") -> Any:
        pq = self.acc.queue(topic, partition)
        return self.acc.append(pq, 1_700_000_000_000, None, value, None, 16 + len(value))

    def known(self, partition: int = 0, topic: str = "t") -> None:
        """The partition's leader already has this producer's state (a batch was
        acknowledged under the current identity): batches may be pipelined."""
        pq = self.acc.queue(topic, partition)
        pq.identity = self.acc.identity
        pq.confirmed = True

    def drain(
        self, after: float = 1.0, capacity: int | None = None, out: int | None = None
    ) -> Any:
        now = self.loop.time() + after
        cap = self.options.max_in_flight if capacity is None else capacity
        return self.acc.drain(
            now,
            lambda t, p: self.leaders.get((t, p), 1),
            lambda node: cap,
            None if out is None else lambda node: out,
        )


def records(batch: ProducerBatch) -> list[bytes | None]:
    assert batch.payload is not None
    return [r.value for b in read_batches(bytes(batch.payload)) for r in b]


async def test_records_fill_batches_up_to_batch_size() -> None:
    rig = Rig(batch_size=1024, enable_idempotence=False, acks=1)
    handles = [rig.send() for _ in range(20)]
    queue = rig.acc.queue("t", 0)
    assert len(queue.batches) == 3  # ~8 records of ~110 bytes per 1 KiB batch
    assert all(b.builder.estimated_size <= 1024 for b in queue.batches)
    assert [h._delta for h in handles[:3]] == [0, 1, 2]
    # the first two are closed; the last one is still open for appends
    assert [b.closed for b in queue.batches] == [True, True, False]


async def test_oversized_record_gets_a_batch_of_its_own() -> None:
    rig = Rig(batch_size=200, enable_idempotence=False, acks=1)
    rig.send(value=b"a" * 50)
    rig.send(value=b"b" * 1000)
    rig.send(value=b"c" * 50)
    counts = [b.record_count for b in rig.acc.queue("t", 0).batches]
    assert counts == [1, 1, 1]


async def test_linger_holds_the_open_batch_until_it_expires() -> None:
    rig = Rig(linger_ms=50, enable_idempotence=False, acks=1)
    rig.send()
    early = rig.drain(after=0.0)
    assert early.requests == []
    batch = rig.acc.queue("t", 0).batches[0]
    assert early.next_wake == pytest.approx(batch.created + 0.05)
    late = rig.drain(after=0.06)
    assert [(node, len(bs)) for node, bs in late.requests] == [(1, 1)]


async def test_a_new_lingering_batch_asks_for_a_pass_by_its_linger_end_only() -> None:
    """A new batch wakes the sender only by the end of its linger (wake_by), not at
    once; a batch it closes (full) or a flush wakes it at once."""
    rig = Rig(linger_ms=50, batch_size=1024, enable_idempotence=False, acks=1)
    asked: list[float] = []
    rig.acc = Accumulator(rig.options, rig.loop, rig._wake, rig._released, None, asked.append)
    rig.send(partition=0)
    rig.send(partition=1)
    created = [rig.acc.queue("t", p).batches[0].created for p in (0, 1)]
    assert rig.wakes == 0 and asked == pytest.approx([c + 0.05 for c in created])
    for _ in range(10):  # fills partition 0's batch: the full one may go now
        rig.send(partition=0)
    assert rig.wakes >= 1
    wakes = rig.wakes
    rig.acc.flushing += 1
    rig.send(partition=2)
    assert rig.wakes == wakes + 1


async def test_the_drain_skips_lingering_partitions_without_a_leader_lookup() -> None:
    """Partitions whose only batch lingers cost the drain no leader lookup; a lookup is
    kept per partition while the lookup function is the same object."""
    rig = Rig(linger_ms=50, batch_size=1024, enable_idempotence=False, acks=1)
    for p in range(100):
        rig.send(partition=p)
    looked: list[tuple[str, int]] = []

    def leader_of(topic: str, partition: int) -> int:
        looked.append((topic, partition))
        return 1

    now = rig.loop.time()
    plan = rig.acc.drain(now, leader_of, lambda node: 5)
    assert plan.requests == [] and looked == []
    first = min(pq.batches[0].created for pq in rig.acc.partition_queues())
    assert plan.next_wake == pytest.approx(first + 0.05)
    while len(rig.acc.queue("t", 7).batches) < 2:  # partition 7's batch fills: it may go
        rig.send(partition=7)
    plan = rig.acc.drain(now, leader_of, lambda node: 0)  # but the broker is busy
    assert plan.requests == [] and looked == [("t", 7)]
    plan = rig.acc.drain(now, leader_of, lambda node: 5)  # same lookup: kept
    assert looked == [("t", 7)]
    assert [(n, [b.partition for b in bs]) for n, bs in plan.requests] == [(1, [7])]
    later = rig.acc.drain(now + 1.0, lambda t, p: 2, lambda node: 5)  # a new lookup
    assert {n for n, _ in later.requests} == {2}
    # (7's second batch waits: its first is in flight at the old leader)
    assert sum(len(bs) for _, bs in later.requests) == 99


async def test_full_batches_go_without_waiting_for_linger() -> None:
    rig = Rig(linger_ms=60_000, batch_size=1024, enable_idempotence=False, acks=1)
    for _ in range(10):
        rig.send()
    plan = rig.drain(after=0.0)
    sent = [b for _, bs in plan.requests for b in bs]
    assert len(sent) == 1 and sent[0].closed  # the full one; the open one lingers


async def test_flush_ignores_linger() -> None:
    rig = Rig(linger_ms=60_000, enable_idempotence=False, acks=1)
    rig.send()
    rig.acc.flushing += 1
    assert len(rig.drain(after=0.0).requests) == 1


async def test_partitions_of_one_leader_share_a_request() -> None:
    rig = Rig(enable_idempotence=False, acks=1)
    rig.leaders = {("t", 0): 1, ("t", 1): 1, ("t", 2): 2}
    for p in range(3):
        rig.send(partition=p)
    plan = rig.drain()
    by_node = {node: sorted(b.partition for b in bs) for node, bs in plan.requests}
    assert by_node == {1: [0, 1], 2: [2]}


async def test_one_batch_per_partition_per_request_and_capacity_bounds_requests() -> None:
    rig = Rig(batch_size=512, enable_idempotence=False, acks=1)
    for _ in range(40):  # ~10 batches
        rig.send()
    plan = rig.drain(capacity=3)
    assert len(plan.requests) == 3
    assert all(len(bs) == 1 for _, bs in plan.requests)
    orders = [bs[0].order for _, bs in plan.requests]
    assert orders == sorted(orders)  # oldest first


async def test_a_lingered_batch_not_full_waits_while_its_broker_has_requests_out() -> None:
    """The broker handles one request per connection at a time: a batch that is not
    full goes while its broker has fewer than PATIENT_DEPTH requests out, else it
    waits for one to end (it grows meanwhile); full batches go at once, and nothing
    waits while flushing or with linger_ms=0."""
    rig = Rig(batch_size=512, enable_idempotence=False, acks=1)
    rig.send(partition=0)
    assert rig.drain(out=PATIENT_DEPTH).requests == []  # lingered, not full: waits
    assert rig.acc.has_queued and not rig.acc.urgent  # the sender may skip drains
    for _ in range(8):  # partition 1: a full batch and an open one
        rig.send(partition=1)
    plan = rig.drain(out=PATIENT_DEPTH)
    assert [(b.partition, b.closed) for _, bs in plan.requests for b in bs] == [(1, True)]
    assert len(rig.acc.queues["t"][1].batches) == 1  # the open one waits too
    got = sorted(b.partition for _, bs in rig.drain(out=PATIENT_DEPTH - 1).requests for b in bs)
    assert got == [0, 1]  # one request fewer out: everything goes
    rig.send(partition=0)
    rig.acc.flushing += 1
    assert len(rig.drain(out=PATIENT_DEPTH).requests) == 1  # flush(): nothing waits
    rig.acc.flushing -= 1
    eager = Rig(linger_ms=0, enable_idempotence=False, acks=1)
    eager.send()
    assert len(eager.drain(out=4).requests) == 1  # linger_ms=0: nothing waits


async def test_max_request_size_splits_a_round() -> None:
    rig = Rig(batch_size=16384, max_request_size=20_000, enable_idempotence=False, acks=1)
    for p in range(3):
        for _ in range(120):  # ~13 KB per partition
            rig.send(partition=p)
    plan = rig.drain()
    assert len(plan.requests) == 3 and all(len(bs) == 1 for _, bs in plan.requests)


async def test_unknown_leader_is_reported_and_nothing_is_sent() -> None:
    rig = Rig(enable_idempotence=False, acks=1)
    rig.send()
    plan = rig.acc.drain(rig.loop.time() + 1, lambda t, p: None, lambda n: 5)
    assert plan.requests == [] and plan.leaderless


async def test_buffer_memory_is_held_until_batches_finish() -> None:
    rig = Rig(enable_idempotence=False, acks=1)
    for _ in range(5):
        rig.send()
    held = rig.acc.used
    assert held == 61 + 5 * (16 + 100)
    (_node, (batch,)), = rig.drain().requests
    rig.acc.complete(batch, BatchResult(40, -1, 0))
    assert rig.acc.used == 0 and rig.releases == 1
    assert batch.future.result() == BatchResult(40, -1, 0)


async def test_handles_compute_offsets_from_the_batch_base() -> None:
    rig = Rig(enable_idempotence=False, acks=1)
    handles = [rig.send() for _ in range(3)]
    (_, (batch,)), = rig.drain().requests
    rig.acc.complete(batch, BatchResult(100, -1, 7))
    metas = [await h for h in handles]
    assert [m.offset for m in metas] == [100, 101, 102]
    assert metas[0].timestamp == 1_700_000_000_000 and metas[0].timestamp_type == 0
    assert metas[0].serialized_value_size == 100 and metas[0].serialized_key_size == -1
    assert metas[0].log_start_offset == 7


async def test_log_append_time_replaces_the_create_time() -> None:
    rig = Rig(enable_idempotence=False, acks=1)
    handle = rig.send()
    (_, (batch,)), = rig.drain().requests
    rig.acc.complete(batch, BatchResult(0, 1_800_000_000_000, 0))
    meta = await handle
    assert meta.timestamp == 1_800_000_000_000 and meta.timestamp_type == 1


async def test_batches_expire_after_delivery_timeout() -> None:
    rig = Rig(enable_idempotence=False, acks=1, delivery_timeout_ms=31_000)
    handle = rig.send()
    plan = rig.acc.drain(rig.loop.time() + 32, lambda t, p: None, lambda n: 5)
    assert plan.requests == []
    with pytest.raises(KafkaTimeoutError, match="delivery_timeout_ms"):
        await handle
    assert rig.acc.used == 0 and not rig.acc.incomplete


async def test_a_drain_wakes_for_expiry_only_of_the_batches_it_leaves() -> None:
    """A batch taken by the drain needs no expiry wake-up (its request's end wakes the
    sender); one left behind does, at its deadline: else it could sit past it."""
    rig = Rig(enable_idempotence=False, acks=1, delivery_timeout_ms=31_000)
    rig.send()
    plan = rig.drain()
    assert len(plan.requests) == 1 and plan.next_wake is None
    rig.send(partition=1)
    plan = rig.drain(capacity=0)  # past linger, but no capacity: left behind
    assert plan.requests == []
    assert plan.next_wake == rig.acc.queue("t", 1).batches[0].deadline


async def test_a_held_back_batch_wakes_the_sender_to_watch_its_deadline() -> None:
    """Held back while the rest of its request goes out (which may take a request
    timeout): the sender must drain again, or no drain watches the batch's deadline."""
    rig = Rig(enable_idempotence=False, acks=1, delivery_timeout_ms=31_000)
    rig.send()
    ((_, (batch,)),) = rig.drain(capacity=1).requests
    wakes = rig.wakes
    rig.acc.hold_back(batch)
    assert rig.wakes == wakes + 1
    plan = rig.drain(capacity=0)
    assert plan.next_wake == batch.deadline


async def test_retries_go_back_in_order_and_alone() -> None:
    rig = Rig(batch_size=512, enable_idempotence=False, acks=1)
    for _ in range(20):
        rig.send()
    first = [bs[0] for _, bs in rig.drain(capacity=2).requests]
    assert len(first) == 2
    error = NotLeaderOrFollowerError("test")
    now = rig.loop.time()
    rig.acc.retry(first[1], error, now)
    rig.acc.retry(first[0], error, now)
    queue = rig.acc.queue("t", 0)
    assert list(queue.batches)[:2] == first  # put back in their original order
    plan = rig.drain()
    assert [bs[0] for _, bs in plan.requests] == [first[0]]  # a retry goes alone
    rig.acc.complete(first[0], BatchResult(0, -1, 0))
    assert [bs[0] for _, bs in rig.drain().requests] == [first[1]]


async def test_a_retry_waits_until_nothing_else_is_in_flight() -> None:
    rig = Rig(batch_size=512, enable_idempotence=False, acks=1)
    for _ in range(20):
        rig.send()
    a, b = (bs[0] for _, bs in rig.drain(capacity=2).requests)
    rig.acc.retry(a, KafkaConnectionError("x"), rig.loop.time())
    assert rig.drain().requests == []  # b is still in flight
    rig.acc.complete(b, BatchResult(5, -1, 0))
    assert [bs[0] for _, bs in rig.drain().requests] == [a]


async def test_retry_backoff_delays_the_batch() -> None:
    rig = Rig(enable_idempotence=False, acks=1)
    rig.send()
    (_, (batch,)), = rig.drain().requests
    now = rig.loop.time()
    rig.acc.retry(batch, KafkaConnectionError("x"), now + 5)
    plan = rig.acc.drain(now + 1, lambda t, p: 1, lambda n: 5)
    assert plan.requests == [] and plan.next_wake == now + 5


async def test_fail_all_fails_every_handle() -> None:
    rig = Rig(enable_idempotence=False, acks=1)
    handles = [rig.send(partition=p) for p in range(3)]
    rig.drain()
    rig.acc.fail_all(KafkaTimeoutError("stopped"))
    for handle in handles:
        with pytest.raises(KafkaTimeoutError, match="stopped"):
            await handle
    assert rig.acc.used == 0


# -- idempotence ------------------------------------------------------------------


def test_sequences_wrap_like_the_broker() -> None:
    assert increment_sequence(5, 10) == 15
    assert increment_sequence(2**31 - 1, 1) == 0
    assert increment_sequence(2**31 - 5, 10) == 5


async def test_sequences_are_assigned_per_partition_on_first_drain() -> None:
    rig = Rig(batch_size=512)
    rig.acc.set_identity(ProducerIdentity(42, 3))
    rig.known(0)
    for _ in range(12):
        rig.send(partition=0)
    rig.send(partition=1)
    plan = rig.drain()
    sent = [b for _, bs in plan.requests for b in bs]
    p0 = [b for b in sent if b.partition == 0]
    p1 = [b for b in sent if b.partition == 1]
    assert p0[0].sequence == 0
    assert p0[1].sequence == p0[0].record_count
    assert p1[0].sequence == 0
    batch = next(read_batches(bytes(p0[1].payload or b"")))
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (
        42, 3, p0[0].record_count,
    )


async def test_a_retried_batch_keeps_its_sequence() -> None:
    rig = Rig()
    rig.acc.set_identity(ProducerIdentity(1, 0))
    rig.send()
    (_, (batch,)), = rig.drain().requests
    rig.acc.retry(batch, KafkaConnectionError("x"), rig.loop.time())
    (_, (again,)), = rig.drain().requests
    assert again is batch and again.sequence == 0 and again.attempts == 2


async def test_a_final_failure_resets_the_partition_under_a_new_epoch() -> None:
    rig = Rig(batch_size=512)
    rig.acc.set_identity(ProducerIdentity(1, 0))
    rig.known()
    for _ in range(8):
        rig.send()
    a, b = (bs[0] for _, bs in rig.drain(capacity=2).requests)
    queue = rig.acc.queue("t", 0)
    rig.acc.fail(a, KafkaTimeoutError("gone"))
    assert queue.needs_reset
    rig.acc.retry(b, KafkaConnectionError("x"), rig.loop.time())
    plan = rig.drain()
    assert plan.requests == [] and plan.reset_wanted  # waits for a new epoch
    rig.acc.set_identity(ProducerIdentity(1, 1))
    (_, (again,)), = rig.drain().requests
    assert again is b and b.sequence == 0  # renumbered from 0 under the new epoch
    parsed = next(read_batches(bytes(b.payload or b"")))
    assert (parsed.producer_epoch, parsed.base_sequence) == (1, 0)
    assert not queue.needs_reset


async def test_partitions_adopt_a_new_identity_only_when_quiet() -> None:
    rig = Rig(batch_size=512)
    rig.acc.set_identity(ProducerIdentity(1, 0))
    rig.known()
    for _ in range(8):
        rig.send()
    (_, (first,)), = rig.drain(capacity=1).requests
    rig.acc.set_identity(ProducerIdentity(9, 0))
    (_, (second,)), = rig.drain(capacity=1).requests
    # still numbered under the old identity: the first is in flight
    assert second.sequence == first.record_count
    rig.acc.complete(first, BatchResult(0, -1, 0))
    rig.acc.complete(second, BatchResult(0, -1, 0))
    for _ in range(4):
        rig.send()
    rig.acc.flushing += 1
    (_, (third,)), = rig.drain(capacity=1).requests
    assert third.sequence == 0 and rig.acc.queue("t", 0).identity == ProducerIdentity(9, 0)


async def test_unresolved_tracks_the_oldest_open_sequence() -> None:
    rig = Rig(batch_size=512)
    rig.acc.set_identity(ProducerIdentity(1, 0))
    rig.known()
    for _ in range(12):
        rig.send()
    a, b, c = (bs[0] for _, bs in rig.drain(capacity=3).requests)
    queue = rig.acc.queue("t", 0)
    assert queue.is_first_unresolved(a) and not queue.is_first_unresolved(b)
    rig.acc.complete(a, BatchResult(0, -1, 0))
    assert queue.is_first_unresolved(b)
    rig.acc.complete(c, BatchResult(20, -1, 0))
    assert list(queue.unresolved) == [b]


async def test_until_a_batch_is_acknowledged_under_an_identity_one_goes_at_a_time() -> None:
    # a leader with no state for the producer takes any first sequence: pipelining
    # before it knows us could let batch 2 land before a batch 1 that is retried
    rig = Rig(batch_size=512)
    rig.acc.set_identity(ProducerIdentity(1, 0))
    for _ in range(12):
        rig.send()
    (_, (first,)), = rig.drain().requests
    assert rig.drain().requests == []  # nothing more while the first is out
    rig.acc.retry(first, KafkaConnectionError("not leader yet"), rig.loop.time())
    (_, (again,)), = rig.drain().requests
    assert again is first  # the retry still goes alone
    rig.acc.complete(first, BatchResult(0, -1, 0))
    assert len(rig.drain().requests) >= 2  # the leader knows us: pipelined
    queue = rig.acc.queue("t", 0)
    for batch in list(rig.acc.incomplete):
        rig.acc.complete(batch, BatchResult(0, -1, 0))
    # a new epoch of the same producer id: the leader refuses any first sequence but 0
    # from it, so pipelining stays safe
    rig.acc.set_identity(ProducerIdentity(1, 1))
    for _ in range(8):
        rig.send()
    assert len(rig.drain().requests) >= 2
    assert queue.identity == ProducerIdentity(1, 1)
    for batch in list(rig.acc.incomplete):
        rig.acc.complete(batch, BatchResult(0, -1, 0))
    rig.acc.set_identity(ProducerIdentity(2, 0))  # a new producer id starts over
    for _ in range(8):
        rig.send()
    (_, (fresh,)), = rig.drain().requests
    assert fresh.sequence == 0 and queue.identity == ProducerIdentity(2, 0)
    assert rig.drain().requests == []


# -- properties ---------------------------------------------------------------------

ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(0, 2), st.integers(0, 600)),
        st.tuples(st.just("append"), st.just(0), st.integers(300, 600)),
        st.tuples(st.just("drain"), st.integers(1, 5), st.booleans()),
        st.tuples(st.just("complete"), st.integers(0, 20)),
        st.tuples(st.just("retry"), st.integers(0, 20)),
        st.tuples(st.just("fail"), st.integers(0, 20)),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=ops, idempotent=st.booleans())
@example(
    ops=[("append", 0, 600)] * 6 + [("drain", 2, True), ("retry", 0), ("drain", 5, True)],
    idempotent=False,
)
async def test_random_operations_keep_the_invariants(ops: list[Any], idempotent: bool) -> None:
    """Whatever happens: buffer memory equals what unfinished batches hold, in-flight
    counts add up, and a batch only goes out when every older unresolved batch of its
    partition is already out (so the broker never sees a sequence gap)."""
    options = {"batch_size": 512} if idempotent else {
        "batch_size": 512, "enable_idempotence": False, "acks": 1,
    }
    rig = Rig(**options)
    rig.acc.set_identity(ProducerIdentity(1, 0))
    in_flight: list[ProducerBatch] = []
    for op in ops:
        if op[0] == "append":
            rig.send(partition=op[1], value=b"x" * op[2])
        elif op[0] == "drain":
            if op[2]:
                rig.acc.flushing += 1
            plan = rig.drain(capacity=op[1])
            rig.acc.flushing -= op[2]
            for _, batches in plan.requests:
                for batch in batches:
                    older = [
                        b for b in batch.queue.batches if 0 <= b.order < batch.order
                    ]
                    assert not older, (batch, older)
                    if batch.attempts > 1:  # a retry goes out alone
                        assert not any(b.queue is batch.queue for b in in_flight)
                    if idempotent:
                        assert batch.sequence >= 0
                    in_flight.append(batch)
            if plan.reset_wanted:
                pid, epoch = rig.acc.identity
                rig.acc.set_identity(ProducerIdentity(pid, epoch + 1))
        elif in_flight:
            batch = in_flight.pop(op[1] % len(in_flight))
            if op[0] == "complete":
                rig.acc.complete(batch, BatchResult(0, -1, 0))
            elif op[0] == "retry":
                rig.acc.retry(batch, KafkaConnectionError("x"), rig.loop.time())
            else:
                rig.acc.fail(batch, KafkaTimeoutError("x"))
        held = sum(b.charge for b in rig.acc.incomplete)
        assert rig.acc.used == held
        for pq in rig.acc._all:
            assert pq.in_flight == sum(1 for b in in_flight if b.queue is pq)
            assert pq.in_flight <= rig.options.max_in_flight
    rig.acc.fail_all(KafkaTimeoutError("end"))
    assert rig.acc.used == 0 and not rig.acc.incomplete


async def test_a_held_back_batch_is_counted_in_the_metrics_once() -> None:
    """A batch held back unsent (an earlier batch of its partition is not on the same
    connection) goes out again as the same attempt: not a second send, nor a retry."""
    from aiokproto.metrics.producer import ProducerMetrics
    from aiokproto.metrics.registry import MetricsRegistry

    rig = Rig(enable_idempotence=False, acks=1)
    metrics = rig.acc.metrics = ProducerMetrics(MetricsRegistry("c"))
    rig.send()
    (_, (batch,)), = rig.drain().requests
    rig.acc.hold_back(batch)
    (_, (again,)), = rig.drain().requests
    assert again is batch and batch.attempts == 1
    rig.acc.retry(batch, KafkaConnectionError("gone"), rig.loop.time())
    rig.drain()
    rig.acc.hold_back(batch)  # the resend held back too
    rig.drain()
    assert batch.attempts == 2
    snapshot = metrics.registry.snapshot()
    assert snapshot.value("record-send-total", "producer-metrics") == 1
    assert snapshot.value("record-retry-total", "producer-metrics") == 1


class _DoneBatch:
    """What BatchDelivery reads of a batch: topic, partition and a resolved future."""

    def __init__(self, loop: asyncio.AbstractEventLoop, partition: int, result: Any) -> None:
        self.topic, self.partition = "t", partition
        self.split = None
        self.future = loop.create_future()
        self.future.set_result(result)


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.one_of(st.none(), st.integers(0, 5)), min_size=1, max_size=30),
    keyed=st.booleans(),
    base=st.sampled_from([-1, 0, 1_000]),
    append_time=st.sampled_from([-1, 1_700_000_000_000]),
    cut=st.integers(0, 30),
)
def test_batch_delivery_metadata_equals_one_record_metadata_per_record(
    sizes: list[int | None], keyed: bool, base: int, append_time: int, cut: int
) -> None:
    # the bulk construction in BatchDelivery._metadata against the per-record function
    from aiokproto.producer.delivery import BatchDelivery, RecordMetadata, Segment, record_metadata

    values = [None if n is None else b"v" * n for n in sizes]
    keys = list(reversed(values)) if keyed else None
    result = BatchResult(base, append_time, 5)
    loop = asyncio.new_event_loop()
    try:
        cut = min(cut, len(values))
        segments = [
            Segment(_DoneBatch(loop, 0, result), 0, 7, cut),  # type: ignore[arg-type]
            Segment(_DoneBatch(loop, 1, result), cut, 0, len(values) - cut),  # type: ignore[arg-type]
        ]
        got = BatchDelivery(segments, keys, values, 42)._metadata()
    finally:
        loop.close()
    expected = [
        record_metadata(
            seg.batch,
            result,
            seg.first_delta + i,
            42,
            -1 if keys is None or keys[seg.start + i] is None else len(keys[seg.start + i] or b""),
            -1 if values[seg.start + i] is None else len(values[seg.start + i] or b""),
        )
        for seg in segments
        for i in range(seg.length)
    ]
    assert got == expected
    assert type(got) is list and all(type(m) is RecordMetadata for m in got)


# -- splitting a batch refused as too large (KIP-126) ----------------------------------


def _builder(limit: int, compression: int = 0) -> RecordBatchBuilder:
    return RecordBatchBuilder(batch_size=limit, compression=compression)


@pytest.mark.parametrize("codec", [compression.NONE, compression.ZSTD])
async def test_split_records_cuts_in_order_within_the_limit(codec: int) -> None:
    big = _builder(1 << 30, codec)
    values = [bytes([i % 251]) * 1000 + i.to_bytes(4, "big") for i in range(50)]
    for i, value in enumerate(values):
        big.append(1_700_000_000_000 + i, b"k%d" % i, value, [("h", b"%d" % i)])
    payload = bytes(big.build())
    limit = len(payload) // 4
    pieces = split_records(big, payload, limit, lambda n: _builder(n, codec))
    assert len(pieces) >= 4
    assert pieces[0][0] == 0 and [f for f, _ in pieces] == sorted({f for f, _ in pieces})
    got = []
    for first, builder in pieces:
        built = builder.build()
        # compressed, the limit is a guess from the old batch's ratio (a piece still
        # too large is refused and split again)
        assert len(built) <= limit or codec != compression.NONE
        recs = next(read_batches(bytes(built))).records()
        assert len(got) == first
        got += [(r.timestamp, r.key, r.value, r.headers) for r in recs]
    assert got == [
        (1_700_000_000_000 + i, b"k%d" % i, v, (("h", b"%d" % i),)) for i, v in enumerate(values)
    ]


async def test_split_records_always_makes_progress() -> None:
    big = _builder(1 << 30)
    for _ in range(3):
        big.append(0, None, b"x" * 100, None)
    payload = bytes(big.build())
    # a limit above the batch's own size (a learned limit that is too high) still halves
    pieces = split_records(big, payload, 10 * len(payload), _builder)
    assert [b.record_count for _, b in pieces] == [1, 2]
    one = _builder(1 << 30)
    one.append(0, None, b"x", None)
    with pytest.raises(ValueError):
        split_records(one, bytes(one.build()), 10, _builder)


def _sent_one(rig: Rig) -> ProducerBatch:
    ((_, (batch,)),) = rig.drain(capacity=1).requests
    return batch


async def test_split_takes_the_batch_place_sequences_memory_and_deadline() -> None:
    rig = Rig(batch_size=100_000)
    rig.acc.set_identity(ProducerIdentity(7, 2))
    rig.known()
    handles = [rig.send(value=b"%04d" % i + b"v" * 996) for i in range(60)]
    big = _sent_one(rig)
    after = [rig.send(value=b"later") for _ in range(3)]
    queue = rig.acc.queue("t", 0)
    used = rig.acc.used
    assert big.sequence == 0 and queue.next_sequence == 60
    count = rig.acc.split(big)
    assert count >= 2 and queue.in_flight == 0 and big not in rig.acc.incomplete
    assert rig.acc.used == used  # the pieces hold the batch's memory, nothing freed
    pieces = list(queue.unresolved)
    assert sum(p.charge for p in pieces) == big.charge
    assert [p.record_count for p in pieces] and sum(p.record_count for p in pieces) == 60
    seqs = [p.sequence for p in pieces]
    assert seqs[0] == 0 and all(
        seqs[i + 1] == seqs[i] + pieces[i].record_count for i in range(len(seqs) - 1)
    )
    assert all(p.deadline == big.deadline and p.order == big.order for p in pieces)
    assert list(queue.batches)[: len(pieces)] == pieces  # in front of the later batch
    # the pieces go one at a time, in order, each stamped with the old id and epoch
    sent: list[bytes | None] = []
    for piece in pieces:
        got = _sent_one(rig)
        assert got is piece
        batch = next(read_batches(bytes(got.payload or b"")))
        assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (
            7, 2, piece.sequence,
        )
        sent += records(got)
        rig.acc.complete(got, BatchResult(1000 + piece.sequence, -1, 0))
    assert sent == [b"%04d" % i + b"v" * 996 for i in range(60)]
    assert big.future.done() and not handles[0].exception()
    assert [h.result().offset for h in handles] == list(range(1000, 1060))
    assert _sent_one(rig).sequence == 60 and not any(h.done() for h in after)


async def test_a_piece_too_large_alone_fails_alone_and_nested_splits_resolve() -> None:
    rig = Rig(batch_size=100_000, enable_idempotence=False, acks=1)
    values = [b"a" * 1000] * 10 + [b"B" * 30_000] + [b"c" * 1000] * 10
    handles = [rig.send(value=v) for v in values]
    outcomes: list[tuple[object, object]] = []
    for h in handles:
        h.add_done_callback(lambda h: outcomes.append((h.exception(), h)))
    reported: list[tuple[Any, Any]] = []
    for h in (handles[0], handles[10], handles[20]):
        h.add_done_callback(OnDelivery(lambda e, m: reported.append((e, m))))
    big = _sent_one(rig)
    rig.acc.split(big)
    offset = 0
    written: list[bytes | None] = []
    while rig.acc.incomplete:
        piece = _sent_one(rig)
        if len(piece.payload or b"") > 4_000:  # the "broker" refuses over 4 kB
            if piece.record_count > 1:
                rig.acc.split(piece)
            else:
                rig.acc.fail(piece, MessageTooLargeError("t[0]: too large"))
            continue
        written += records(piece)
        rig.acc.complete(piece, BatchResult(offset, -1, 0))
        offset += piece.record_count
    # a piece split again goes before its later siblings: the order is kept
    assert written == values[:10] + values[11:]
    # the split batch is resolved as its last piece is, nested pieces included (no
    # loop pass between: stop() and flush() see every record's fate at once)
    assert isinstance(big.future.exception(), MessageTooLargeError)
    errors = [type(h.exception()) for h in handles]
    assert errors == [type(None)] * 10 + [MessageTooLargeError] + [type(None)] * 10
    assert [handles[i].result().offset for i in (0, 9, 11, 20)] == [0, 9, 10, 19]
    with pytest.raises(MessageTooLargeError):
        handles[10].result()
    await asyncio.sleep(0)  # record callbacks run on the loop, once the batch is done
    assert len(outcomes) == 21  # every record's callback ran once
    assert [(type(e).__name__, m and m.offset) for e, m in reported] == [
        ("NoneType", 0), ("MessageTooLargeError", None), ("NoneType", 19)
    ]
    # waiting for the delivered ones only does not raise; with the failed one it does
    await wait_delivered(handles[:10] + handles[11:])
    with pytest.raises(MessageTooLargeError):
        await wait_delivered(handles)
    assert rig.acc.used == 0


async def test_a_refused_last_batch_gives_its_sequence_back_without_a_reset() -> None:
    rig = Rig()
    rig.acc.set_identity(ProducerIdentity(1, 0))
    rig.send()
    batch = _sent_one(rig)
    queue = rig.acc.queue("t", 0)
    rig.acc.fail_refused(batch, MessageTooLargeError("refused"))
    assert not queue.needs_reset and queue.next_sequence == 0 and not queue.unresolved
    rig.send()
    assert _sent_one(rig).sequence == 0  # no gap: the same epoch goes on
    # refused after a retry (an earlier attempt may have been written) or with a later
    # batch numbered: the partition is reset as for any failure
    again = rig.acc.queue("t", 0).unresolved[0]
    rig.acc.retry(again, KafkaConnectionError("x"), rig.loop.time())
    assert _sent_one(rig) is again and again.attempts == 2
    rig.acc.fail_refused(again, MessageTooLargeError("refused"))
    assert queue.needs_reset


async def test_pieces_that_expire_fail_their_records_and_free_the_memory() -> None:
    rig = Rig(
        batch_size=100_000,
        enable_idempotence=False,
        acks=1,
        delivery_timeout_ms=1000,
        request_timeout_ms=500,
    )
    handles = [rig.send(value=b"x" * 1000) for _ in range(40)]
    ((_, (big,)),) = rig.drain(after=0.1, capacity=1).requests
    rig.acc.split(big)
    ((_, (first,)),) = rig.drain(after=0.1, capacity=1).requests  # one piece out
    plan = rig.drain(after=5.0)  # past the deadline: the queued pieces expire
    assert plan.requests == []
    assert not big.future.done()  # the piece in flight is still out
    rig.acc.complete(first, BatchResult(0, -1, 0))
    assert isinstance(big.future.exception(), KafkaTimeoutError)
    assert handles[0].result().offset == 0
    assert isinstance(handles[-1].exception(), KafkaTimeoutError)
    assert rig.acc.used == 0 and not rig.acc.incomplete


async def test_after_a_refusal_later_batches_are_cut_before_they_go() -> None:
    rig = Rig(batch_size=100_000)
    rig.acc.set_identity(ProducerIdentity(7, 0))
    rig.known()
    values = [b"%04d" % i + b"v" * 996 for i in range(180)]
    handles = [rig.send(value=v) for v in values]
    first = _sent_one(rig)
    rig.acc.split(first)  # refused: the partition learns a limit of half its size
    queue = rig.acc.queue("t", 0)
    limit = queue.split_limit
    assert 0 < limit < 100_000
    sent: list[ProducerBatch] = []
    written: list[bytes | None] = []
    rounds = 0
    while rig.acc.incomplete:
        plan = rig.drain()
        out = [b for _, bs in plan.requests for b in bs]
        assert out, "nothing drained"
        rounds += 1
        for batch in out:
            assert len(batch.payload or b"") <= limit  # never sent over the limit again
            sent.append(batch)
            written += records(batch)
        for batch in out:
            rig.acc.complete(batch, BatchResult(batch.sequence, -1, 0))
    assert written == values
    seqs = [b.sequence for b in sent]
    assert seqs == sorted(seqs) and seqs[0] == 0
    # the pieces cut before sending went several to a drain, like new batches
    assert rounds < len(sent)
    assert [h.result().offset for h in handles] == list(range(180))


# -- review: handles of records of split batches ----------------------------------------


def _split_with_a_failed_tail(rig: Rig, count: int = 40) -> tuple[list[Any], ProducerBatch]:
    """A batch split in pieces: the first piece delivered at offset 0, the rest expired."""
    handles = [rig.send(value=b"x" * 1000) for _ in range(count)]
    ((_, (big,)),) = rig.drain(after=0.1, capacity=1).requests
    rig.acc.split(big)
    ((_, (first,)),) = rig.drain(after=0.1, capacity=1).requests
    assert rig.drain(after=5.0).requests == []  # the other pieces expire
    rig.acc.complete(first, BatchResult(0, -1, 0))
    assert big.future.done()
    return handles, big


def _expiring_rig() -> Rig:
    return Rig(
        batch_size=100_000,
        enable_idempotence=False,
        acks=1,
        delivery_timeout_ms=1000,
        request_timeout_ms=500,
    )


async def test_first_delivered_of_a_split_batch_raises_any_record_error() -> None:
    """first_delivered promises the first error of any of its records: a record of a
    split batch may fail in another piece than the one whose handle was watched (it
    hung when the first record failed and a later one did not, and reported success
    in the other case)."""
    from aiokproto.errors import KafkaError
    from aiokproto.producer.delivery import first_delivered

    for failed in (0, -1):  # the first piece fails, or the last
        rig = Rig(batch_size=100_000, enable_idempotence=False, acks=1)
        handles = [rig.send(value=b"x" * 1000) for _ in range(40)]
        together = first_delivered(handles)
        ((_, (big,)),) = rig.drain(capacity=1).requests
        count = rig.acc.split(big)
        assert count >= 2
        for i in range(count):
            ((_, (piece,)),) = rig.drain(capacity=1).requests
            if i == failed % count:
                rig.acc.fail(piece, KafkaError("boom"))
            else:
                rig.acc.complete(piece, BatchResult(100 * i, -1, 0))
        assert big.future.done()
        for _ in range(3):
            await asyncio.sleep(0)
        assert together.done(), failed
        assert str(together.exception()) == "boom"


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("idempotent", [True, False])
async def test_random_splits_failures_and_retries_settle_every_record_once(
    seed: int, idempotent: bool
) -> None:
    """Review fuzz: sends, drains and random outcomes (done, refused as too large and
    split, retried, failed, purged, expired): every record's callback runs exactly
    once, the delivered ones with distinct offsets, sequences of a partition never
    overlap under one epoch, and the buffer charge sums back to zero."""
    import random

    from aiokproto.errors import KafkaError
    from aiokproto.producer.batch import NO_SEQUENCE

    rng = random.Random(seed)
    options: dict[str, Any] = {
        "batch_size": 8_000,
        "delivery_timeout_ms": 2_000,
        "request_timeout_ms": 1_000,
    }
    if not idempotent:
        # one request in flight: then records must be written in order (as in Java)
        options.update(enable_idempotence=False, acks=1, max_in_flight_requests_per_connection=1)
    rig = Rig(**options)
    rig.acc.set_identity(ProducerIdentity(5, 0))
    last_written = {0: -1, 1: -1}

    def check_order(batch: ProducerBatch) -> None:
        if idempotent:
            return
        for value in records(batch):
            index = int((value or b"").rstrip(b"x"))
            assert index > last_written[batch.partition], (index, last_written)
            last_written[batch.partition] = index

    calls: dict[tuple[int, int], int] = {}
    handles: list[Any] = []
    offsets = {0: 0, 1: 0}
    written: dict[tuple[int, int, int], int] = {}  # (partition, epoch, seq) -> times
    for _ in range(60):
        for _ in range(rng.randrange(0, 30)):
            p = rng.randrange(2)
            h = rig.send(partition=p, value=b"%d" % len(handles) + b"x" * rng.randrange(50, 900))
            key = (p, len(handles))
            h.add_done_callback(lambda h, key=key: calls.__setitem__(key, calls.get(key, 0) + 1))
            handles.append(h)
        if rng.random() < 0.05:
            rig.acc.purge(KafkaError("purged"))
        plan = rig.drain(after=rng.choice([0.001, 0.05, 1.0]))
        for _, batches in plan.requests:
            for batch in batches:
                roll = rng.random()
                if roll < 0.25 and batch.record_count > 1:
                    rig.acc.split(batch)
                elif roll < 0.35:
                    rig.acc.retry(batch, KafkaConnectionError("x"), rig.loop.time())
                elif roll < 0.4:
                    rig.acc.fail_refused(batch, KafkaError("refused"))
                elif roll < 0.43:
                    rig.acc.fail(batch, KafkaError("failed"))
                else:
                    if idempotent and batch.sequence != NO_SEQUENCE:
                        for s in range(batch.sequence, batch.sequence + batch.record_count):
                            k = (batch.partition, batch.builder.producer_epoch, s)
                            written[k] = written.get(k, 0) + 1
                    check_order(batch)
                    rig.acc.complete(batch, BatchResult(offsets[batch.partition], -1, 0))
                    offsets[batch.partition] += batch.record_count
        if plan.reset_wanted:
            ident = rig.acc.identity
            rig.acc.set_identity(ProducerIdentity(ident.producer_id, ident.epoch + 1))
        await asyncio.sleep(0)
    while rig.acc.incomplete:
        plan = rig.drain(after=100.0)
        for _, batches in plan.requests:
            for batch in batches:
                check_order(batch)
                rig.acc.complete(batch, BatchResult(offsets[batch.partition], -1, 0))
                offsets[batch.partition] += batch.record_count
        if plan.reset_wanted:
            ident = rig.acc.identity
            rig.acc.set_identity(ProducerIdentity(ident.producer_id, ident.epoch + 1))
    for _ in range(3):
        await asyncio.sleep(0)
    assert rig.acc.used == 0
    assert all(h.done() for h in handles)
    assert sorted(calls.values()) == [1] * len(handles)
    assert not [k for k, n in written.items() if n > 1]  # no sequence acknowledged twice
    seen: set[tuple[int, int]] = set()
    for i, h in enumerate(handles):
        if h.exception() is None:
            meta = h.result()
            assert (meta.partition, meta.offset) not in seen, i
            seen.add((meta.partition, meta.offset))


@pytest.mark.parametrize("idempotent", [True, False])
async def test_a_retried_piece_goes_again_before_its_later_siblings(idempotent: bool) -> None:
    """A piece of a split batch that is retried (NOT_LEADER, a lost connection) goes
    again before the pieces after it (they share the split batch's drain order): it
    was queued behind them, so its records were written after theirs (reordered
    without idempotence; with it, refused out of order until the pieces came round)."""
    options: dict[str, Any] = {"batch_size": 100_000}
    if not idempotent:
        options.update(enable_idempotence=False, acks=1, max_in_flight_requests_per_connection=1)
    rig = Rig(**options)
    values = [b"%04d" % i + b"v" * 996 for i in range(60)]
    for v in values:
        rig.send(value=v)
    big = _sent_one(rig)
    assert rig.acc.split(big) >= 3
    first = _sent_one(rig)
    rig.acc.retry(first, NotLeaderOrFollowerError("moved"), rig.loop.time())
    written: list[bytes | None] = []
    while rig.acc.incomplete:
        batch = _sent_one(rig)
        written += records(batch)
        rig.acc.complete(batch, BatchResult(len(written), -1, 0))
    assert written == values


async def test_a_batch_failed_by_an_expiry_in_the_same_drain_is_not_sent() -> None:
    """A transaction turns abortable when a queued batch expires, and that fails the
    partition's other queued batches (fail_unsent, from on_fail) inside the drain's
    own _expire: the drain must not go on to send them from its old view of the queue
    (an already failed batch went out, and its partition's in-flight count never came
    down: the partition stalled)."""
    from aiokproto.errors import TransactionAbortedError

    rig = Rig(
        batch_size=1_000,
        enable_idempotence=False,
        acks=1,
        delivery_timeout_ms=1_000,
        request_timeout_ms=500,
        linger_ms=0,
    )
    failed: list[ProducerBatch] = []

    def on_fail(batch: ProducerBatch, error: BaseException) -> None:
        failed.append(batch)
        if not isinstance(error, TransactionAbortedError):  # as TransactionManager does
            rig.acc.fail_unsent(TransactionAbortedError("the transaction failed"))

    rig.acc.on_fail = on_fail
    old = rig.send(value=b"o" * 900)
    await asyncio.sleep(0.2)
    new = rig.send(value=b"n" * 900)  # a batch of its own, created 200 ms later
    assert len(rig.acc.queue("t", 0).batches) == 2
    plan = rig.drain(after=0.9)  # past the first's deadline, not the second's
    assert isinstance(old.exception(), KafkaTimeoutError)
    assert isinstance(new.exception(), TransactionAbortedError)
    assert plan.requests == []
    assert rig.acc.queue("t", 0).in_flight == 0 and rig.acc.used == 0


class _FakeLeader:
    """A partition leader's idempotence checks, as the broker makes them: per
    partition, the producer's epoch and next sequence; a newer epoch starts at 0."""

    def __init__(self) -> None:
        self.state: dict[int, tuple[int, int]] = {}
        self.log: dict[int, list[bytes]] = {0: [], 1: []}

    def answer(self, batch: ProducerBatch) -> str:
        p, epoch, seq = batch.partition, batch.builder.producer_epoch, batch.sequence
        count = batch.record_count
        known = self.state.get(p)
        if known is None or epoch > known[0]:
            ok = seq == 0
        elif epoch < known[0]:
            return "fenced"
        elif seq == known[1]:
            ok = True
        elif seq + count <= known[1]:
            return "duplicate"
        else:
            ok = False
        if not ok:
            return "out_of_order"
        self.state[p] = (epoch, increment_sequence(seq, count))
        self.log[p] += [v or b"" for v in records(batch)]
        return "written"


@pytest.mark.parametrize("seed", range(30))
async def test_random_refusals_splits_and_bumps_against_a_fake_leader(seed: int) -> None:
    """Review fuzz of the idempotent paths (the sender's rules, a leader's sequence
    checks): batches refused as too large (split), refused outright (sequence given
    back), lost after being written (retried), answered out of order (reset, local
    epoch bump): no record written twice, each partition's log in send order, every
    record settled once and the memory back to 0."""
    import random

    from aiokproto.errors import InvalidRecordError, OutOfOrderSequenceNumberError
    from aiokproto.producer.sender import Action, decide

    rng = random.Random(seed)
    rig = Rig(batch_size=6_000, delivery_timeout_ms=600_000, linger_ms=0)
    rig.acc.set_identity(ProducerIdentity(5, 0))
    leader = _FakeLeader()
    maybe_written: set[int] = set()
    handles: list[Any] = []
    calls: dict[int, int] = {}
    for _ in range(80):
        for _ in range(rng.randrange(0, 25)):
            i = len(handles)
            h = rig.send(partition=i % 2, value=b"%06d" % i + b"x" * rng.randrange(50, 700))
            h.add_done_callback(lambda h, i=i: calls.__setitem__(i, calls.get(i, 0) + 1))
            handles.append(h)
        plan = rig.drain(after=0.01)
        dropped: set[int] = set()  # partitions whose connection dropped this round
        for _, batches in plan.requests:
            for batch in batches:
                roll = rng.random()
                now = rig.loop.time()
                if batch.partition in dropped:  # later requests on it are lost too
                    rig.acc.retry(batch, KafkaConnectionError("lost"), now)
                    continue
                # (a batch once written is not refused later: the same bytes)
                fresh = id(batch) not in maybe_written
                if roll < 0.15 and batch.record_count > 1 and fresh:
                    rig.acc.split(batch)  # MESSAGE_TOO_LARGE: nothing written
                    continue
                if roll < 0.2 and fresh:
                    rig.acc.fail_refused(batch, InvalidRecordError("refused"))
                    continue
                if roll < 0.3:  # the connection dropped: written or not
                    dropped.add(batch.partition)
                    if rng.random() < 0.5:
                        maybe_written.add(id(batch))
                        leader.answer(batch)
                    rig.acc.retry(batch, KafkaConnectionError("lost"), now)
                    continue
                outcome = leader.answer(batch)
                if outcome in ("written", "duplicate"):
                    rig.acc.complete(batch, BatchResult(0, -1, 0))
                    continue
                assert outcome == "out_of_order", outcome
                action = decide(
                    OutOfOrderSequenceNumberError.errno,
                    idempotent=True,
                    first_unresolved=batch.queue.is_first_unresolved(batch),
                )
                if action is Action.RESET:
                    batch.queue.needs_reset = True
                rig.acc.retry(batch, KafkaConnectionError("out of order"), now)
        if plan.reset_wanted:
            ident = rig.acc.identity
            rig.acc.set_identity(ProducerIdentity(ident.producer_id, ident.epoch + 1))
        await asyncio.sleep(0)
    for _ in range(500):
        if not rig.acc.incomplete:
            break
        plan = rig.drain(after=0.01)
        for _, batches in plan.requests:
            for batch in batches:
                outcome = leader.answer(batch)
                if outcome in ("written", "duplicate"):
                    rig.acc.complete(batch, BatchResult(0, -1, 0))
                else:
                    first = batch.queue.is_first_unresolved(batch)
                    if first:
                        batch.queue.needs_reset = True
                    rig.acc.retry(batch, KafkaConnectionError("out of order"), rig.loop.time())
        if plan.reset_wanted:
            ident = rig.acc.identity
            rig.acc.set_identity(ProducerIdentity(ident.producer_id, ident.epoch + 1))
    assert not rig.acc.incomplete
    for _ in range(3):
        await asyncio.sleep(0)
    assert rig.acc.used == 0
    assert sorted(calls) == list(range(len(handles))) and set(calls.values()) == {1}
    for p, log in leader.log.items():
        indexes = [int(v.rstrip(b"x")) for v in log]
        assert len(indexes) == len(set(indexes)), f"partition {p}: a record written twice"
        assert indexes == sorted(indexes), f"partition {p}: out of order"
        delivered = {i for i, h in enumerate(handles) if i % 2 == p and h.exception() is None}
        assert delivered <= set(indexes)


async def test_a_purged_lingering_batch_arms_no_pass_at_its_linger_end() -> None:
    """A lingering batch purged (or aborted) before its linger ends leaves its
    partition's entry in the linger queue: the next drain drops it, instead of arming
    a pass at its linger's end and keeping has_queued true (a wake after every
    request's end) until then."""
    rig = Rig(linger_ms=3_600_000, delivery_timeout_ms=4_000_000)
    rig.acc = Accumulator(rig.options, rig.loop, rig._wake, rig._released, None, lambda _: None)
    rig.send(partition=0)
    assert rig.acc.purge(KafkaConnectionError("purged")) == 1
    plan = rig.acc.drain(rig.loop.time(), lambda t, p: 1, lambda node: 5)
    assert plan.requests == [] and plan.next_wake is None
    assert not rig.acc.has_queued
