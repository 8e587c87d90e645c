"""The sink's write path without Spark: how rows are grouped into ``send_batch`` calls
(pure), and what lands in Kafka (local broker, written by ``write_sync``)."""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow", reason="the spark extra (pyarrow) is not installed")

from aiokproto.admin import Admin, NewTopic  # noqa: E402
from aiokproto.errors import KafkaConfigError, MessageSizeTooLargeError  # noqa: E402
from aiokproto.producer import Producer  # noqa: E402
from aiokproto.producer.partitioner import partition_for_key  # noqa: E402
from aiokproto.records.record import Header  # noqa: E402
from aiokproto.spark.sink import (  # noqa: E402
    CHUNK_BYTES,
    CHUNK_ROWS,
    Call,
    OutBatch,
    _chunk_rows,
    arrow_batch,
    plan,
    record_batches,
    write_sync,
)
from tests.spark.helpers import consume_all, create_topic  # noqa: E402

HEADERS = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))


def _rows(calls: list[Call]) -> list[int]:
    return [i for call in calls for i in call.rows]


def _may_share(a: int | None, b: int | None) -> bool:
    """Two records of one topic may land in one partition."""
    return a is None or b is None or a == b


def _check_order(batch: OutBatch, topic_option: str | None, calls: list[Call]) -> None:
    """Every row is sent once, and two rows that may land in one partition are sent in
    row order (one ``send()`` per row sent every partition its records in row order)."""
    n = len(batch.values)
    sent = _rows(calls)
    assert sorted(sent) == list(range(n))
    position = {row: k for k, row in enumerate(sent)}
    topic_of = [topic_option or (batch.topics or [None] * n)[i] for i in range(n)]
    part_of = list(batch.partitions or [None] * n)
    for call in calls:
        for i in call.rows:
            assert topic_of[i] == call.topic
            if call.each:  # one send() per row, with the row's own partition and headers
                continue
            if part_of[i] is not None:
                assert call.partition == part_of[i]
            headers = None if batch.headers is None else batch.headers[i]
            assert headers == call.headers
            if batch.keys is None and part_of[i] is None:
                assert call.partition is None  # the producer chooses
    for i in range(n):
        for j in range(i + 1, n):
            if topic_of[i] == topic_of[j] and _may_share(part_of[i], part_of[j]):
                assert position[i] < position[j], (i, j, calls)


# -- grouping (pure) ---------------------------------------------------------------------


def test_one_call_for_rows_without_partition_or_headers() -> None:
    batch = OutBatch(values=[b"a", b"b", b"c"], keys=[b"k", None, b"k"])
    assert plan(batch, "t") == [Call("t", None, range(3), None)]
    # the topic option wins over the column (Spark's Kafka sink does the same)
    batch = OutBatch(values=[b"a", b"b"], topics=["x", "y"])
    assert plan(batch, "t") == [Call("t", None, range(2), None)]
    assert plan(OutBatch(values=[]), None) == []


def test_a_row_without_topic_fails_the_batch_before_anything_is_sent() -> None:
    with pytest.raises(KafkaConfigError, match="has no topic"):
        plan(OutBatch(values=[b"a", b"b"], topics=["x", None]), None)
    with pytest.raises(KafkaConfigError, match="has no topic"):
        plan(OutBatch(values=[b"a"], topics=[""]), None)
    with pytest.raises(KafkaConfigError, match="has no topic"):
        plan(OutBatch(values=[b"a"]), None)


def test_rows_are_grouped_per_topic_and_partition_in_row_order() -> None:
    batch = OutBatch(
        values=[b"%d" % i for i in range(6)],
        topics=["x", "y", "x", "y", "x", "x"],
        partitions=[0, 1, 1, 1, 0, 1],
    )
    assert plan(batch, None) == [
        Call("x", 0, [0, 4], None),
        Call("x", 1, [2, 5], None),
        Call("y", 1, [1, 3], None),
    ]


def test_a_topic_with_and_without_partitions_keeps_row_order() -> None:
    # rows 3-5 may go to partition 0 (the partitioner chooses): not sent after row 6
    partitions = [0, 0, 0, None, None, None, 0, 0, 0, 1, 1, 1]
    batch = OutBatch(values=[b"%d" % i for i in range(12)], partitions=partitions)
    calls = plan(batch, "t")
    assert calls == [
        Call("t", 0, [0, 1, 2], None),
        Call("t", None, [3, 4, 5], None),
        Call("t", 0, [6, 7, 8], None),
        Call("t", 1, [9, 10, 11], None),
    ]
    _check_order(batch, "t", calls)
    # runs shorter than MIN_RUN on average: row by row, in order, as send() did
    batch = OutBatch(values=[b"0", b"1", b"2", b"3", b"4"], partitions=[0, None, 0, 0, 1])
    calls = plan(batch, "t")
    assert calls == [Call("t", None, range(5), None, each=True)]
    _check_order(batch, "t", calls)


def test_headers_split_runs_and_equal_headers_share_a_call() -> None:
    h1: list[Header] = [("a", b"1")]
    h2: list[Header] = [("b", None)]
    headers = [h1, list(h1), h1, None, None, None, h2, h2, h2, h2]
    batch = OutBatch(values=[b"%d" % i for i in range(10)], headers=headers)
    calls = plan(batch, "t")
    assert calls == [
        Call("t", None, [0, 1, 2], h1),
        Call("t", None, [3, 4, 5], None),
        Call("t", None, [6, 7, 8, 9], h2),
    ]
    _check_order(batch, "t", calls)
    # headers that change from row to row: one send() per row, in order
    batch = OutBatch(values=[b"%d" % i for i in range(4)], headers=[h1, h2, None, h1])
    assert plan(batch, "t") == [Call("t", None, range(4), None, each=True)]
    # with partitions given, each partition's rows are cut on headers on their own
    batch = OutBatch(
        values=[b"%d" % i for i in range(8)],
        partitions=[0, 1, 0, 1, 0, 1, 0, 1],
        headers=[h1, h2, h1, h2, h1, h2, h1, h2],
    )
    assert plan(batch, "t") == [Call("t", 0, [0, 2, 4, 6], h1), Call("t", 1, [1, 3, 5, 7], h2)]
    # ... and sent row by row where those runs are short
    batch = OutBatch(
        values=[b"%d" % i for i in range(8)],
        partitions=[0, 0, 0, 0, 1, 1, 1, 1],
        headers=[h1, h2, None, h1, h2, h2, h2, h2],
    )
    assert plan(batch, "t") == [
        Call("t", None, [0, 1, 2, 3], None, each=True),
        Call("t", 1, [4, 5, 6, 7], h2),
    ]


def test_keys_get_the_partition_send_would_choose() -> None:
    keys = [b"k%d" % i for i in range(200)]
    batch = OutBatch(values=[b"v"] * 200, keys=keys)
    calls = plan(batch, "t", {"t": 7})
    for call in calls:
        assert call.partition is not None
        assert {partition_for_key(keys[i], 7) for i in call.rows} == {call.partition}
    assert len(calls) == len({partition_for_key(k, 7) for k in keys})
    # an explicit partition wins over the key; a row with neither is the partitioner's
    batch = OutBatch(
        values=[b"%d" % i for i in range(9)],
        keys=[b"a"] * 3 + [None] * 3 + [b"b"] * 3,
        partitions=[5] * 3 + [None] * 6,
    )
    calls = plan(batch, "t", {"t": 7})
    assert calls == [
        Call("t", 5, [0, 1, 2], None),
        Call("t", None, [3, 4, 5], None),
        Call("t", partition_for_key(b"b", 7), [6, 7, 8], None),
    ]
    # without a partition count (a custom partitioner), send_batch chooses per record
    assert plan(batch, "t") == [
        Call("t", 5, [0, 1, 2], None),
        Call("t", None, [3, 4, 5, 6, 7, 8], None),
    ]


@pytest.mark.parametrize("seed", range(40))
def test_random_batches_keep_partition_order(seed: int) -> None:
    rng = random.Random(seed)
    headers: list[list[Header] | None] = [None, [("h", b"1")], [("h", b"2")]]
    # blocks of rows alike (long runs for send_batch) or single rows (one send() each)
    longest = 1 if seed % 4 == 0 else 8
    rows: list[tuple[Any, ...]] = []
    while len(rows) < 60:
        row = (
            rng.choice([None, b"a", b"b", b"c"]),
            rng.choice(["x", "y"]),
            rng.choice([None, 0, 1, 2]),
            rng.choice(headers),
        )
        rows.extend([row] * rng.randint(1, longest))
    n = len(rows)
    batch = OutBatch(
        values=[b"%d" % i for i in range(n)],
        keys=[r[0] for r in rows] if seed % 2 else None,
        topics=[r[1] for r in rows],
        partitions=[r[2] for r in rows] if seed % 3 else None,
        headers=[r[3] for r in rows] if seed % 5 else None,
    )
    calls = plan(batch, None)
    _check_order(batch, None, calls)
    # with keys resolved to partitions, rows that may share a partition stay in order too
    counts = {"x": 3, "y": 3}
    resolved = plan(batch, None, counts)
    assert sorted(_rows(resolved)) == list(range(n))
    keys = batch.keys or [None] * n
    # a keyed row without a partition has a known one now: its key's
    part_of = [
        p if p is not None or k is None else partition_for_key(k, 3)
        for p, k in zip(batch.partitions or [None] * n, keys, strict=True)
    ]
    _check_order(
        OutBatch(batch.values, batch.keys, batch.topics, part_of, batch.headers), None, resolved
    )


def test_arrow_batch_reads_the_sink_columns() -> None:
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array(["a", None, "c"], pa.string()),
            pa.array([b"1", None, b"333"], pa.binary()),
            pa.array([None, None, None], pa.int32()),
            pa.array([[{"key": "h", "value": b"v"}], [], None], HEADERS),
        ],
        names=["KEY", "Value", "partition", "headers"],
    )
    out = arrow_batch(batch)
    assert out.values == [b"1", None, b"333"]
    assert out.keys == [b"a", None, b"c"]
    assert out.partitions is None  # all null: as if absent
    assert out.headers == [[("h", b"v")], None, None]
    assert out.value_bytes == 4
    # a constant headers column comes out as one shared list
    same = [[{"key": "s", "value": b"x"}, {"key": "t", "value": None}]] * 4
    batch = pa.RecordBatch.from_arrays(
        [pa.array([b"v"] * 4), pa.array(same, HEADERS)], names=["value", "headers"]
    )
    headers = arrow_batch(batch).headers
    assert headers is not None and headers == [[("s", b"x"), ("t", None)]] * 4
    assert len({id(h) for h in headers}) == 1
    # a slice of a larger batch (Arrow offsets do not start at 0)
    rows = [[{"key": "n", "value": b"%d" % i}] if i % 3 else None for i in range(10)]
    whole = pa.RecordBatch.from_arrays(
        [pa.array([b"%d" % i for i in range(10)]), pa.array(rows, HEADERS)],
        names=["value", "headers"],
    )
    part = arrow_batch(whole.slice(4, 5))
    assert part.values == [b"4", b"5", b"6", b"7", b"8"]
    assert part.headers == [[("n", b"4")], [("n", b"5")], None, [("n", b"7")], [("n", b"8")]]


def test_row_records_are_gathered_into_batches() -> None:
    records = [("t", None, None, b"%d" % i, None) for i in range(5)]
    batches = list(record_batches(iter(records), size=2))
    assert [len(b) for b in batches] == [2, 2, 1]
    assert batches[0].keys is None and batches[0].partitions is None
    assert [r for b in batches for r in b.records()] == records


def test_calls_are_cut_to_bound_their_bytes() -> None:
    assert _chunk_rows(OutBatch(values=[b"x"] * 10, value_bytes=10)) == CHUNK_ROWS
    big = OutBatch(values=[b"x" * 100_000] * 50, value_bytes=5_000_000)
    assert _chunk_rows(big) == CHUNK_BYTES // 100_001
    assert _chunk_rows(OutBatch(values=[b"x" * 100_000] * 3)) == CHUNK_BYTES // 100_001
    # a small producer buffer: smaller calls
    assert _chunk_rows(big, 250_000) == 2


# -- against a broker --------------------------------------------------------------------


async def _send_one_by_one(bootstrap: str, topic: str, keys: list[bytes]) -> None:
    async with Producer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
        handles = [await producer.send(topic, b"ref", key=k) for k in keys]
        for handle in handles:
            await handle


def test_keyed_rows_land_where_send_puts_them(bootstrap: str, topic_name: str) -> None:
    sink_topic, send_topic = f"{topic_name}-sink", f"{topic_name}-send"
    create_topic(bootstrap, sink_topic, partitions=5)
    create_topic(bootstrap, send_topic, partitions=5)
    keys = [b"key-%d" % i for i in range(300)]
    batch = pa.RecordBatch.from_arrays(
        [pa.array(keys, pa.binary()), pa.array([b"v%d" % i for i in range(300)])],
        names=["key", "value"],
    )
    client = {"bootstrap_servers": bootstrap, "linger_ms": 5}
    assert write_sync(client, sink_topic, [arrow_batch(batch)]).records == 300
    asyncio.run(_send_one_by_one(bootstrap, send_topic, keys))
    by_sink = {r.key: r.partition for r in consume_all(bootstrap, sink_topic, 300)}
    by_send = {r.key: r.partition for r in consume_all(bootstrap, send_topic, 300)}
    assert by_sink == by_send
    assert by_sink == {k: partition_for_key(k, 5) for k in keys}
    assert len(set(by_sink.values())) == 5


def test_each_partition_gets_its_rows_in_order(bootstrap: str, topic_name: str) -> None:
    create_topic(bootstrap, topic_name, partitions=3)
    n = 3000
    rng = random.Random(7)
    keys = [rng.choice([None, b"a", b"b", b"c", b"d"]) for _ in range(n)]
    partitions = [rng.choice([None, None, 0, 1, 2]) for _ in range(n)]
    headers: list[Any] = [
        rng.choice([None, [{"key": "h", "value": b"1"}], [{"key": "h", "value": b"%d" % i}]])
        for i in range(n)
    ]
    batches = [
        arrow_batch(
            pa.RecordBatch.from_arrays(
                [
                    pa.array(keys[s : s + 1000], pa.binary()),
                    pa.array([b"%d" % i for i in range(s, s + 1000)]),
                    pa.array(partitions[s : s + 1000], pa.int32()),
                    pa.array(headers[s : s + 1000], HEADERS),
                ],
                names=["key", "value", "partition", "headers"],
            )
        )
        for s in range(0, n, 1000)
    ]
    client = {"bootstrap_servers": bootstrap, "linger_ms": 5}
    assert write_sync(client, topic_name, batches).records == n
    got = consume_all(bootstrap, topic_name, n)
    assert len(got) == n
    per_partition: dict[int, list[int]] = defaultdict(list)
    for record in sorted(got, key=lambda r: (r.partition, r.offset)):
        i = int(record.value)
        per_partition[record.partition].append(i)
        assert record.key == keys[i]
        key = keys[i]
        if partitions[i] is not None:
            assert record.partition == partitions[i]
        elif key is not None:
            assert record.partition == partition_for_key(key, 3)
        h = headers[i]
        assert record.headers == (tuple((e["key"], e["value"]) for e in h) if h else ())
    for rows in per_partition.values():
        assert rows == sorted(rows)


def test_a_custom_partitioner_chooses_per_record(bootstrap: str, topic_name: str) -> None:
    create_topic(bootstrap, topic_name, partitions=3)
    seen: list[bytes | None] = []

    def last_partition(key: bytes | None, partitions: Any, available: Any) -> int:
        seen.append(key)
        return int(partitions[-1])

    keys = [b"k%d" % i for i in range(50)]
    client = {"bootstrap_servers": bootstrap, "linger_ms": 5, "partitioner": last_partition}
    batch = OutBatch(values=[b"v"] * 50, keys=keys)
    assert write_sync(client, topic_name, [batch]).records == 50
    assert seen == keys  # asked once per record, in order
    assert {r.partition for r in consume_all(bootstrap, topic_name, 50)} == {2}


async def _topic_with_small_records(bootstrap: str, topic: str) -> None:
    async with Admin(bootstrap_servers=bootstrap) as admin:
        await admin.create_topics(
            [NewTopic(topic, 2, 1, topic_configs={"max.message.bytes": "2000"})]
        )
        async with asyncio.timeout(15):
            while topic not in await admin.list_topics():  # noqa: ASYNC110 - polling
                await asyncio.sleep(0.05)


def test_a_record_the_broker_refuses_fails_the_write(bootstrap: str, topic_name: str) -> None:
    asyncio.run(_topic_with_small_records(bootstrap, topic_name))
    client = {"bootstrap_servers": bootstrap, "linger_ms": 5, "max_request_size": 100_000}
    values = [b"%d" % i for i in range(100)] + [b"x" * 5000] + [b"y"] * 10
    # the big record travels in a send_batch call with others; its batch is refused
    batch = OutBatch(values=values, partitions=[0] * len(values))
    with pytest.raises(MessageSizeTooLargeError):
        write_sync(client, topic_name, [batch])
    # alone in its call (its own headers): a send() whose batch is refused
    headers: list[list[Header] | None] = [None] * len(values)
    headers[100] = [("h", b"1")]
    batch = OutBatch(values=values, partitions=[1] * len(values), headers=headers)
    with pytest.raises(MessageSizeTooLargeError):
        write_sync(client, topic_name, [batch])
