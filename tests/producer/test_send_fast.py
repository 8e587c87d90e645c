"""send()'s compiled common case (``_accel.send_fast``) against its Python path.

The C function buffers a record only when nothing is off the common path, and gives
None otherwise, having changed nothing; send() then runs its Python body, the reference.
These tests hold the two to the same result: the same bytes in the same batches, the
same buffer accounting and sticky budget, the same typed errors. They run on a fake
broker, so both builds run them (the pure build has no C path: both sides are Python).
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from aiokproto.accel import native
from aiokproto.errors import InvalidTopicError, KafkaTimeoutError, RecordTooLargeError
from aiokproto.producer import DeliveryFuture, Producer, SerializationError
from aiokproto.producer import producer as producer_module
from aiokproto.producer.batch import PartitionQueue
from aiokproto.producer.partitioner import StickyPartitioner, partition_for_key
from aiokproto.records import read_batches
from tests.fake_broker import FakeBroker, Received, Reply, metadata_naming
from tests.producer.test_sender_faults import FAST as SENDER_FAST
from tests.producer.test_sender_faults import FakeCluster

TOPIC = "t"
PARTITIONS = 4
FAST: dict[str, Any] = {**SENDER_FAST, "max_block_ms": 300}
compiled_only = pytest.mark.skipif(native is None, reason="the pure build has no C path")


@asynccontextmanager
async def silent_cluster() -> Any:
    """A broker that leads every partition of ``t`` and never answers a Produce."""
    fake: FakeBroker

    def script(rec: Received) -> Reply | None:
        if rec.api_key == 3:
            return Reply(response=metadata_naming(fake, {TOPIC: uuid.UUID(int=7)}, 0, PARTITIONS))
        if rec.api_key == 0:
            return Reply("silent")
        return None

    fake = FakeBroker(script)
    async with fake:
        yield fake


@asynccontextmanager
async def held(fake: FakeBroker, fast: bool, **options: Any) -> Any:
    """A started producer whose batches wait (linger); ``fast=False`` takes send()'s
    Python path for every record. Its sticky choices come from a fixed seed."""
    opts = {"linger_ms": 600_000, "acks": 1, "enable_idempotence": False, **FAST, **options}
    p = Producer(bootstrap_servers=fake.bootstrap, **opts)
    p._sticky[TOPIC] = StickyPartitioner(p.options.batch_size, random.Random(7))
    with pytest.MonkeyPatch.context() as mp:
        if not fast:
            mp.setattr(producer_module, "_send_fast", None)
        await p.start()
        try:
            yield p
        finally:
            await p.stop(timeout_ms=0)


def state(p: Producer) -> dict[str, Any]:
    """What send() changes: each batch's records and charge, the buffer, the budget."""
    queues: dict[int, PartitionQueue] = p._acc.queues[TOPIC]
    batches = {}
    for part, pq in sorted(queues.items()):
        every = [*pq.batches] + (
            [pq.open] if pq.open is not None and pq.open not in pq.batches else []
        )
        batches[part] = [
            (
                b.charge,
                [
                    (r.offset, r.timestamp, r.key, r.value, r.headers)
                    for r in next(iter(read_batches(b.builder.build())))
                ],
            )
            for b in every
        ]
    sticky = p._topics[TOPIC].sticky
    return {
        "used": p._acc.used,
        "batches": batches,
        "left": sticky.left,
        "current": sticky.current,
        "yield_next": p._yield_next,
    }


def records(n: int) -> Iterator[dict[str, Any]]:
    """send() arguments of every kind: plain, keyed, null key or value, explicit and
    -1 timestamps, and ones off the common path (bytearray, headers, partition)."""
    rng = random.Random(3)
    for i in range(n):
        kind = i % 9
        value: Any = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 300)))
        args: dict[str, Any] = {"value": value, "timestamp_ms": 1_700_000_000_000 + i}
        if kind == 1:
            args["key"] = b"k%d" % rng.randrange(50)
        elif kind == 2:
            args["value"] = None
        elif kind == 3:
            args["timestamp_ms"] = -1
        elif kind == 4:
            args["value"] = bytearray(value)
        elif kind == 5:
            args["headers"] = [("h", b"v")]
        elif kind == 6:
            args["partition"] = i % PARTITIONS
        elif kind == 7:
            args["key"] = b""
        yield args


async def test_the_c_path_buffers_what_the_python_path_does() -> None:
    async with silent_cluster() as fake:
        got = []
        for fast in (True, False):
            async with held(fake, fast, batch_size=4096, buffer_memory=1 << 24) as p:
                for args in records(600):  # ~10 batches a partition: many fill up
                    await p.send(TOPIC, **args)
                got.append(state(p))
        assert got[0] == got[1]
        assert sum(len(b) for b in got[0]["batches"].values()) >= 12


@compiled_only
async def test_the_c_path_is_taken_and_leaves_a_full_batch_to_python() -> None:
    async with silent_cluster() as fake, held(fake, True, batch_size=1024) as p:
        await p.send(TOPIC, b"first")  # the topic's state is made on the Python path
        fast = producer_module._send_fast
        assert fast is not None
        h = fast(p, TOPIC, b"x" * 100, None, None)
        assert h is not None and h._delta == 1
        pq = p._topics[TOPIC].sticky_queue
        assert pq is not None and pq.open is not None
        before = (p._acc.used, pq.open.charge, pq.open.builder.record_count)
        while fast(p, TOPIC, b"x" * 100, None, None) is not None:
            pass  # until the open batch is full: then None, and nothing changed
        after = (p._acc.used, pq.open.charge, pq.open.builder.record_count)
        assert after[2] > before[2] and after[0] - before[0] == after[1] - before[1]
        assert fast(p, TOPIC, b"x" * 100, None, None) is None
        assert (p._acc.used, pq.open.charge, pq.open.builder.record_count) == after
        await p.send(TOPIC, b"x" * 100)  # the Python path opens the next batch
        assert p._yield_next is True
        assert fast(p, TOPIC, b"x", None, None) is None  # the sender's turn comes first


@compiled_only
async def test_anything_off_the_common_path_gives_none() -> None:
    fast = producer_module._send_fast
    assert fast is not None
    async with silent_cluster() as fake, held(fake, True) as p:
        await p.send(TOPIC, b"first")
        assert fast(p, TOPIC, b"v", None, None) is not None

        class Str(str):
            pass

        class Bytes(bytes):
            pass

        for args in [
            (TOPIC, bytearray(b"v"), None, None),
            (TOPIC, Bytes(b"v"), None, None),
            (TOPIC, b"v", memoryview(b"k"), None),
            (TOPIC, b"v", None, True),
            (TOPIC, b"v", None, -2),
            (TOPIC, b"v", None, 1 << 63),
            (TOPIC, b"v", None, 1.5),
            (Str(TOPIC), b"v", None, None),
            (b"t", b"v", None, None),
            ("other", b"v", None, None),
            (TOPIC, b"x" * (p._max_charge + 1), None, None),
        ]:
            used = p._acc.used
            assert fast(p, *args) is None, args
            assert p._acc.used == used
        assert fast(object(), TOPIC, b"v", None, None) is None
        for name, value in [
            ("_plain", False),
            ("_yield_next", True),
            ("_partitioner", lambda key, parts, avail: 0),
            ("_reserved", p._acc.limit),
            ("_max_charge", 1 << 70),  # an int the C code cannot read: Python's
        ]:
            was = getattr(p, name)
            setattr(p, name, value)
            try:
                assert fast(p, TOPIC, b"v", None, None) is None, name
            finally:
                setattr(p, name, was)
        p._space_queue.append(object())  # type: ignore[arg-type]
        assert fast(p, TOPIC, b"v", None, None) is None
        p._space_queue.clear()
        ts = p._topics[TOPIC]
        pq = ts.sticky_queue
        assert pq is not None
        for obj, name, value in [
            (pq, "txn_added", False),
            (pq, "open", None),
            (ts, "sticky_queue", None),
            (ts.sticky, "left", 0),
            (p._acc, "used", p._acc.limit),
            (p._acc, "used", "not an int"),
        ]:
            was = getattr(obj, name)
            setattr(obj, name, value)
            try:
                assert fast(p, TOPIC, b"v", None, None) is None, (name, value)
            finally:
                setattr(obj, name, was)
        del pq.open  # an empty slot reads as "off the path", not as a crash
        try:
            assert fast(p, TOPIC, b"v", None, None) is None
        finally:
            pq.open = None
        assert fast(p, TOPIC, b"v", None, None) is None  # no open batch: Python opens one
        assert (await p.send(TOPIC, b"v")) is not None


async def test_bad_records_get_the_python_paths_typed_errors() -> None:
    async with silent_cluster() as fake, held(fake, True) as p:
        await p.send(TOPIC, b"first")
        with pytest.raises(TypeError):
            await p.send(TOPIC, "a str value")
        for bad in (1.5, -2, True, 1 << 63):
            with pytest.raises(SerializationError, match="timestamp_ms"):
                await p.send(TOPIC, b"v", timestamp_ms=bad)
        with pytest.raises(InvalidTopicError):
            await p.send(b"t", b"v")  # type: ignore[arg-type]
        too_large = await p.send(TOPIC, b"x" * (p.options.max_request_size + 1))
        with pytest.raises(RecordTooLargeError):
            await too_large
        used = p._acc.used
        assert (await p.send(TOPIC, b"v")) is not None
        assert p._acc.used > used


async def test_a_full_buffer_waits_on_the_python_path() -> None:
    async with silent_cluster() as fake, held(fake, True, buffer_memory=4096, batch_size=1024) as p:
        with pytest.raises(KafkaTimeoutError, match="buffer_memory"):
            for _ in range(100):  # bounded: the buffer holds ~30 of these
                await p.send(TOPIC, b"x" * 100)
                assert p._acc.used <= 4096


async def test_a_subclass_and_keyed_records_take_the_same_partitions() -> None:
    class Counting(Producer):
        pass

    async with silent_cluster() as fake:
        p = Counting(bootstrap_servers=fake.bootstrap, linger_ms=600_000, acks=1, **FAST)
        async with p:
            handles = [await p.send(TOPIC, b"v", key=b"key-%d" % i) for i in range(200)]
            for i, h in enumerate(handles):
                assert h._batch is not None
                assert h._batch.partition == partition_for_key(b"key-%d" % i, PARTITIONS)
            await p.stop(timeout_ms=0)


@compiled_only
def test_bind_send_refuses_classes_without_the_slots() -> None:
    assert native is not None

    class Plain:
        pass

    args: list[Any] = [Plain] * 6 + [DeliveryFuture, 16]
    with pytest.raises(AttributeError):
        native.bind_send(*args)

    class Props:
        __slots__ = ()
        _yield_next = property(lambda self: False)

    with pytest.raises(TypeError, match="not a __slots__ member"):
        native.bind_send(Props, *[Plain] * 5, DeliveryFuture, 16)
    with pytest.raises(TypeError):
        native.bind_send(*[Plain] * 6, Plain, 16)  # not a DeliveryHandle
    with pytest.raises(TypeError):
        native.send_fast(1, 2)


async def test_the_handles_resolve_to_their_own_records() -> None:
    async with FakeCluster() as fake:
        p = Producer(bootstrap_servers=fake.bootstrap, linger_ms=1, acks=1, batch_size=2048, **FAST)
        async with p:
            sent = [
                (b"k%d" % i if i % 3 else None, b"v%d" % i, 1_700_000_000_000 + i)
                for i in range(500)
            ]
            handles = [await p.send(TOPIC, v, key=k, timestamp_ms=t) for k, v, t in sent]
            metas = await asyncio.gather(*handles)
        assert [m.offset for m in metas] == list(range(500))
        assert [m.timestamp for m in metas] == [t for _, _, t in sent]
        assert [(m.serialized_key_size, m.serialized_value_size) for m in metas] == [
            (-1 if k is None else len(k), len(v)) for k, v, _ in sent
        ]
        assert len(fake.produces) > 1


def _fast_state(p: Producer) -> tuple[Any, ...]:
    ts = p._topics[TOPIC]
    pq = ts.sticky_queue
    assert pq is not None and pq.open is not None
    b = pq.open
    return (p._acc.used, b.charge, b.builder.record_count, len(b.builder._buf), ts.sticky.left)


@compiled_only
async def test_a_memory_error_in_send_fast_buffers_nothing() -> None:
    """Each allocation send_fast makes failing in turn: it raises MemoryError having
    changed nothing, or buffers the record with all its accounting (never a record in
    its batch while the caller gets an error: a retry would duplicate it)."""
    _testcapi = pytest.importorskip("_testcapi")
    fast = producer_module._send_fast
    assert fast is not None
    async with silent_cluster() as fake, held(fake, True, batch_size=1 << 20) as p:
        await p.send(TOPIC, b"first")
        value = b"x" * 1000
        charge = producer_module.RECORD_CHARGE + len(value) - 1
        failures = 0
        for k in range(40):
            before = _fast_state(p)
            _testcapi.set_nomemory(k, k + 1)
            try:
                h = fast(p, TOPIC, value, None, None)
                err = None
            except MemoryError as e:
                h, err = None, e
            finally:
                _testcapi.remove_mem_hooks()
            after = _fast_state(p)
            if h is None:
                assert after == before, (k, err, before, after)
                failures += err is not None
            else:
                assert after[0] == before[0] + charge and after[1] == before[1] + charge, k
                assert after[2] == before[2] + 1 and after[4] == before[4] - charge, k
        assert failures > 0


@compiled_only
async def test_python_code_run_by_the_append_cannot_free_what_send_fast_writes() -> None:
    """Appending drops the builder's kept payload; a finalizer it runs may drop the
    topic's sticky chooser, which send_fast then writes (use after free)."""
    fast = producer_module._send_fast
    assert fast is not None
    async with silent_cluster() as fake, held(fake, True, batch_size=1 << 20) as p:
        await p.send(TOPIC, b"first")
        ts = p._topics[TOPIC]
        pq = ts.sticky_queue
        assert pq is not None and pq.open is not None
        decoys: list[StickyPartitioner] = []

        class Evil:
            def __del__(self) -> None:
                ts.sticky = StickyPartitioner(1 << 20)
                del p._sticky[TOPIC]  # the old chooser's last reference is send_fast's
                for _ in range(5):  # new ones of the same size take the freed memory
                    decoys.append(StickyPartitioner(12345))

        pq.open.builder._payload = Evil()
        assert fast(p, TOPIC, b"v" * 100, None, None) is not None
        assert len(decoys) == 5
        assert [d.left for d in decoys] == [0] * 5
        assert ts.sticky.left == 0  # untouched: the chooser send_fast read is not this one


@compiled_only
def test_bind_send_refuses_another_classes_member() -> None:
    """A slot member is an offset into its own class's layout only: one borrowed by an
    unrelated class would make send_fast read and write outside its objects."""
    assert native is not None

    class Fake:  # Producer's members, an unrelated (smaller) layout
        pass

    for name in producer_module.Producer.__slots__[2:]:
        setattr(Fake, name, getattr(producer_module.Producer, name))
    args = [
        producer_module.Producer,
        producer_module._TopicState,
        StickyPartitioner,
        producer_module.Accumulator,
        PartitionQueue,
        producer_module.ProducerBatch,
        DeliveryFuture,
        producer_module.RECORD_CHARGE,
    ]
    try:
        with pytest.raises(TypeError, match="not a __slots__ member"):
            native.bind_send(Fake, *args[1:])
    finally:
        native.bind_send(*args)
