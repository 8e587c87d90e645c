"""Pure parts of ``acls``, ``perf`` and produce's input reader, without a broker."""

from __future__ import annotations

import asyncio
import io
import os
import re

import pytest
from rich.console import Console

from aiokproto.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)
from aiokproto.cli.acl_spec import (
    AclOptions,
    AclSpecError,
    bindings,
    filters,
    kafka_name,
    parse_name,
    resolve_resource,
)
from aiokproto.cli.perfstats import (
    Recorder,
    Throttle,
    consume_line,
    consume_summary,
    payload,
    percentile,
    produce_line,
    produce_summary,
    window_text,
)
from aiokproto.cli.reader import ChunkReader, read_lines

R, W = AclOperation.READ, AclOperation.WRITE


@pytest.mark.parametrize("text", ["DescribeConfigs", "describe-configs", "DESCRIBE_CONFIGS",
                                  "describeconfigs"])
def test_operation_names_as_kafka_acls_writes_them(text: str) -> None:
    assert parse_name(AclOperation, text, filters=False, option="") is (
        AclOperation.DESCRIBE_CONFIGS)


def test_names_filter_only_members_and_errors() -> None:
    assert kafka_name(ResourceType.TRANSACTIONAL_ID) == "TransactionalId"
    assert parse_name(ResourcePatternType, "match", filters=True, option="") is (
        ResourcePatternType.MATCH)
    with pytest.raises(AclSpecError, match=r"Literal, Prefixed$"):
        parse_name(ResourcePatternType, "match", filters=False, option="--pattern-type")
    with pytest.raises(AclSpecError, match="use one of"):
        parse_name(AclOperation, "unknown", filters=True, option="")


def test_resources_from_shortcuts() -> None:
    assert resolve_resource(None, None, topic="t") == (ResourceType.TOPIC, "t")
    assert resolve_resource(None, None, cluster=True) == (ResourceType.CLUSTER, "kafka-cluster")
    assert resolve_resource(ResourceType.CLUSTER, None) == (ResourceType.CLUSTER, "kafka-cluster")
    assert resolve_resource(None, "x") == (None, "x")
    assert resolve_resource(None, None) == (None, None)
    with pytest.raises(AclSpecError, match="not both"):
        resolve_resource(ResourceType.GROUP, "g", topic="t")
    with pytest.raises(AclSpecError, match="--topic and --group"):
        resolve_resource(None, None, topic="t", group="g")


def test_bindings_are_the_cross_product_with_defaults() -> None:
    opts = AclOptions(ResourceType.TOPIC, "t", principals=("User:a", "User:b"),
                      operations=(R, W))
    made = bindings(opts)
    assert len(made) == 4
    assert made[0] == AclBinding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL,
                                 "User:a", "*", R, AclPermissionType.ALLOW)
    for bad, message in [
        (AclOptions(None, "t", principals=("User:a",), operations=(R,)), "name a resource"),
        (AclOptions(ResourceType.TOPIC, None, principals=("User:a",), operations=(R,)),
         "which Topic"),
        (AclOptions(ResourceType.TOPIC, "t", operations=(R,)), "--principal is required"),
        (AclOptions(ResourceType.TOPIC, "t", principals=("User:a",)), "--operation is required"),
        (AclOptions(ResourceType.TOPIC, "t", principals=("a",), operations=(R,)), "Type:name"),
    ]:
        with pytest.raises(AclSpecError, match=message):
            bindings(bad)


def test_filters_match_anything_not_given() -> None:
    assert AclOptions().matches_everything
    assert filters(AclOptions()) == [AclBindingFilter.any()]
    assert not AclOptions(principals=("User:a",)).matches_everything
    got = filters(AclOptions(ResourceType.TOPIC, "t", principals=("User:a", "User:b"),
                             operations=(R,)))
    assert got == [
        AclBindingFilter(ResourceType.TOPIC, "t", ResourcePatternType.ANY, p, None, R)
        for p in ("User:a", "User:b")
    ]


def test_throttle_schedule_is_absolute() -> None:
    t = Throttle(100.0, start=10.0)
    assert t.delay(0, 10.0) == 0.0
    assert t.delay(50, 10.2) == pytest.approx(0.3)  # due at 10.5
    assert t.delay(50, 10.4995) == 0.0  # under a millisecond ahead: send now
    assert t.delay(50, 11.0) == 0.0  # late: no sleep, and no catching up beyond the rate
    assert Throttle(None, 0.0).delay(10**9, 0.0) == 0.0


def test_recorder_percentiles_windows_and_lines() -> None:
    rec = Recorder(expected=10, now=0.0, max_samples=5)  # every 2nd latency is sampled
    for i in range(1, 11):
        rec.add(100, float(i))
    assert rec.every == 2 and list(rec.samples) == [2.0, 4.0, 6.0, 8.0, 10.0]
    assert percentile(sorted(rec.samples), 0.5) == 6.0 and percentile([], 0.5) == 0.0
    w = rec.take_window(2.0)
    assert (w.records, w.rate, w.latency_max_ms, w.latency_avg_ms) == (10, 5.0, 10.0, 5.5)
    assert rec.take_window(3.0).records == 0
    assert "5 rec/s" in window_text(w, latency=True) and "p99 10.0" in window_text(w, True)
    s = produce_summary(rec, 2.0)
    assert s["latency_ms"]["avg"] == 5.5 and s["latency_ms"]["max"] == 10.0
    assert produce_line(s).startswith("10 records sent, 5.0 records/sec (0.00 MB/sec), "
                                      "5.50 ms avg latency, 10.00 ms max latency, 6.0 ms 50th")
    c = Recorder(4, 0.0)
    c.add_many(4, 2 * 1024 * 1024)
    line = consume_line(consume_summary(c, 2.0, 0.25))
    assert line == ("4 records consumed, 2.0 records/sec (1.00 MB/sec), 2.00 MB in 2.00 s, "
                    "250 ms to the first record.")
    assert consume_line(consume_summary(Recorder(1, 0.0), 1.0, None)).endswith(
        "no record received.")


def test_payload_is_letters_of_the_size() -> None:
    assert re.fullmatch(rb"[A-Z]{1000}", payload(1000, seed=1))
    assert payload(0) == b""


def test_live_display_figures_render() -> None:
    rec = Recorder(2, 0.0)
    rec.add(1_048_576, 3.0)
    console = Console(file=io.StringIO(), force_terminal=True, width=120)
    console.print(window_text(rec.take_window(1.0), latency=True), highlight=False)
    assert console.file.getvalue() == (
        "1 rec/s  1.00 MB/s  latency avg 3.0 p50 3.0 p99 3.0 max 3.0 ms\n")


async def test_reader_lines_and_stop_keeps_what_was_read() -> None:
    r, w = os.pipe()
    try:
        reader = ChunkReader(r, chunk=4)
        os.write(w, b"ab\r\ncd\nlast")
        got: list[bytes] = []
        sizes: list[int] = []

        async def collect() -> None:
            async for line in read_lines(reader, sizes.append):
                got.append(line)

        task = asyncio.create_task(collect())
        async with asyncio.timeout(5):
            while sum(sizes) < len(b"ab\r\ncd\nlast"):  # noqa: ASYNC110 - polling a thread's progress
                await asyncio.sleep(0.01)
        assert got == [b"ab", b"cd"]
        reader.stop()  # the pipe stays open: stop() ends the input at once
        async with asyncio.timeout(5):
            await task
        assert got == [b"ab", b"cd", b"last"] and reader.stopped
    finally:
        os.close(w)  # the reader thread sees the end, then stops, before r is closed
        await asyncio.to_thread(reader._thread.join, 5)
        os.close(r)


async def test_reader_eof() -> None:
    r, w = os.pipe()
    os.write(w, b"x\ny\n")
    os.close(w)
    try:
        reader = ChunkReader(r)
        async with asyncio.timeout(5):
            assert [x async for x in read_lines(reader, lambda n: None)] == [b"x", b"y"]
        assert not reader.stopped and await reader.read() == b""
    finally:
        os.close(r)
