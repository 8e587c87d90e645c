"""Partitioner: murmur2 as Java's Utils.murmur2, keyed placement, uniform sticky (no sockets)."""

from __future__ import annotations

import random
from collections import Counter
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiokproto.producer.partitioner import StickyPartitioner, murmur2, partition_for_key


def signed(h: int) -> int:
    return h - (1 << 32) if h >= 1 << 31 else h


# Java's Utils.murmur2 results (Java ints) for these inputs, as in Kafka's own unit test
# of the function; checked at test-writing time against a straight transcription of the
# published algorithm (seed 0x9747b28c, m 0x5bd1e995, r 24), and end to end against
# librdkafka's murmur2_random in tests/producer/test_producer_broker.py.
JAVA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("key", "expected"), JAVA_VECTORS.items())
def test_murmur2_matches_java(key: bytes, expected: int) -> None:
    assert signed(murmur2(key)) == expected


def _reference_murmur2(data: bytes) -> int:
    """A second, deliberately plain transcription (byte at a time, 32-bit wrap)."""
    m, mask = 0x5BD1E995, 0xFFFFFFFF
    h = (0x9747B28C ^ len(data)) & mask
    n4 = len(data) // 4
    for i in range(n4):
        k = data[4 * i] | data[4 * i + 1] << 8 | data[4 * i + 2] << 16 | data[4 * i + 3] << 24
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = (h * m) & mask
        h ^= k
    rest = len(data) % 4
    tail = data[n4 * 4 :]
    if rest >= 3:
        h ^= tail[2] << 16
    if rest >= 2:
        h ^= tail[1] << 8
    if rest >= 1:
        h ^= tail[0]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h


@given(st.binary(max_size=64))
def test_murmur2_agrees_with_plain_transcription(data: bytes) -> None:
    assert murmur2(data) == _reference_murmur2(data)
    assert murmur2(bytearray(data)) == murmur2(memoryview(data)) == murmur2(data)


@given(st.binary(min_size=1, max_size=32), st.integers(min_value=1, max_value=1000))
def test_partition_for_key_is_positive_hash_modulo(key: bytes, n: int) -> None:
    p = partition_for_key(key, n)
    assert 0 <= p < n
    assert p == (murmur2(key) & 0x7FFFFFFF) % n


def test_keys_spread_over_partitions() -> None:
    counts = Counter(partition_for_key(f"user-{i}".encode(), 8) for i in range(8000))
    assert set(counts) == set(range(8))
    assert min(counts.values()) > 800  # roughly uniform


def test_sticky_stays_until_batch_size_bytes_then_moves() -> None:
    sticky = StickyPartitioner(batch_size=1000, rng=random.Random(7))
    parts = (0, 1, 2, 3)
    first = sticky.partition(100, parts, parts)
    # the record that exhausts the budget still goes there; the next one moves
    assert [sticky.partition(100, parts, parts) for _ in range(9)] == [first] * 9
    second = sticky.partition(100, parts, parts)
    assert second != first and second in parts


def test_sticky_skips_partitions_without_leader() -> None:
    sticky = StickyPartitioner(batch_size=10, rng=random.Random(1))
    seen = {sticky.partition(10, (0, 1, 2, 3), (2, 3)) for _ in range(200)}
    assert seen == {2, 3}


def test_sticky_leaves_a_partition_that_lost_its_leader() -> None:
    sticky = StickyPartitioner(batch_size=10_000, rng=random.Random(3))
    current = sticky.partition(1, (0, 1), (0, 1))
    other = 1 - current
    assert sticky.partition(1, (0, 1), (other,)) == other


def test_sticky_uses_all_partitions_when_none_has_a_leader() -> None:
    sticky = StickyPartitioner(batch_size=10, rng=random.Random(5))
    assert {sticky.partition(10, (0, 1, 2), ()) for _ in range(100)} == {0, 1, 2}


def test_sticky_is_uniform_over_time() -> None:
    sticky = StickyPartitioner(batch_size=100, rng=random.Random(11))
    parts = tuple(range(5))
    counts = Counter(sticky.partition(10, parts, parts) for _ in range(50_000))
    assert min(counts.values()) > 8000


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 400), max_size=60),
    batch_size=st.integers(1, 1_000),
    partitions=st.integers(1, 4),
    left=st.integers(-5, 500),
    seed=st.integers(0, 2**16),
)
def test_sticky_runs_are_the_per_record_choices(
    sizes: list[int], batch_size: int, partitions: int, left: int, seed: int
) -> None:
    everything = list(range(partitions))
    one = StickyPartitioner(batch_size, random.Random(seed))
    many = StickyPartitioner(batch_size, random.Random(seed))
    for sticky in (one, many):  # mid-budget on partition 0, as after earlier sends
        sticky.partition(1, everything, everything)
        sticky.left = left
    expected = [one.partition(size, everything, everything) for size in sizes]
    runs = many.runs(sizes, everything, everything)
    assert [part for part, start, stop in runs for _ in range(start, stop)] == expected
    assert [start for _, start, _ in runs] == sorted({start for _, start, _ in runs})
    assert all(a[0] != b[0] for a, b in pairwise(runs))  # merged
    assert (many.left, many.current) == (one.left, one.current)
