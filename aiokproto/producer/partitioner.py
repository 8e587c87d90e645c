"""Choosing a partition for a record: pure functions (murmur2, Java- and
librdkafka-compatible; the keyed partition) and a small stateful uniform sticky chooser.

Keyed records go to ``(murmur2(key) & 0x7fffffff) % num_partitions``: the hash Java's
``Utils.murmur2`` and librdkafka's ``murmur2_random`` partitioner compute, so a key lands
in the same partition whichever client wrote it. Records without a key follow the
uniform sticky rule (KIP-480/794): they stick to one partition until ``batch_size``
bytes went there, then move to another, preferring partitions that have a leader.
"""

from __future__ import annotations

import random
import struct
from bisect import bisect_left
from collections.abc import Callable, Sequence
from itertools import accumulate
from typing import Final

from aiokproto.accel import native as _native

#: ``partitioner=`` option: ``(key_bytes, all_partitions, available_partitions) -> int``.
PartitionerFn = Callable[[bytes | None, Sequence[int], Sequence[int]], int]

_SEED: Final = 0x9747B28C
_M: Final = 0x5BD1E995
_MASK: Final = 0xFFFFFFFF
_WORDS: dict[int, struct.Struct] = {}


def murmur2_python(data: bytes | bytearray | memoryview) -> int:
    """MurmurHash2 (32-bit, seed 0x9747b28c) as an unsigned int, as Kafka hashes keys.

    The reference for ``aiokproto._accel.murmur2``, which ``murmur2`` is when built.
    Any C-contiguous buffer is hashed as its bytes (an ``array('I')`` too, as in C);
    anything else is a TypeError."""
    if not isinstance(data, (bytes, bytearray)):
        try:
            view = memoryview(data)
        except TypeError:
            view = None
        if view is None or not view.c_contiguous:
            raise TypeError(f"murmur2 needs bytes or a contiguous bytes-like object, not "
                            f"{type(data).__name__}")
        with view:
            data = view.tobytes()
    n = len(data)
    h = (_SEED ^ n) & _MASK
    words = n >> 2
    if words:
        unpack = _WORDS.get(words)
        if unpack is None:
            unpack = _WORDS[words] = struct.Struct(f"<{words}I")
        for k in unpack.unpack_from(data):
            k = (k * _M) & _MASK
            k ^= k >> 24
            h = ((h * _M) & _MASK) ^ ((k * _M) & _MASK)
    tail = n & 3
    if tail:
        base = n - tail
        if tail == 3:
            h ^= data[base + 2] << 16
        if tail >= 2:
            h ^= data[base + 1] << 8
        h ^= data[base]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h


#: MurmurHash2 of a key, compiled when ``aiokproto._accel`` is in use
murmur2: Callable[[bytes | bytearray | memoryview], int] = (
    murmur2_python if _native is None else _native.murmur2
)


def partition_for_key(key: bytes | bytearray | memoryview, num_partitions: int) -> int:
    """The partition Java's and librdkafka's default partitioners pick for ``key``."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


class StickyPartitioner:
    """Uniform sticky choice for records without a key (one instance per topic).

    ``partition(size, ...)`` returns the current sticky partition and counts ``size``
    bytes against it; once ``batch_size`` bytes went to it the next call picks another
    partition at random, among those with a leader when there are any.
    """

    __slots__ = ("_batch_size", "_current", "_rng", "left")

    def __init__(self, batch_size: int, rng: random.Random | None = None) -> None:
        self._batch_size = batch_size
        self._rng = rng or random.Random()
        self._current = -1
        self.left = 0  # bytes still to go to the current partition; callers may count down

    @property
    def current(self) -> int:
        """The partition the next record goes to if it is still valid (-1: none yet)."""
        return self._current

    def partition(self, size: int, all_partitions: Sequence[int], available: Sequence[int]) -> int:
        current = self._current
        if (
            self.left <= 0
            or current not in all_partitions
            or (available and current not in available)
        ):
            current = self._switch(all_partitions, available)
        self.left -= size
        return current

    def runs(
        self, sizes: Sequence[int], all_partitions: Sequence[int], available: Sequence[int]
    ) -> list[tuple[int, int, int]]:
        """``(partition, start, stop)`` runs of what ``partition(size)`` called for each
        of ``sizes`` (all positive) in turn would return, with the same state after.
        One call and one bisection per run instead of a call per record."""
        out: list[tuple[int, int, int]] = []
        n = len(sizes)
        prefix = [0, *accumulate(sizes)]  # prefix[k]: the bytes of sizes[:k]
        i = 0
        while i < n:
            part = self.partition(sizes[i], all_partitions, available)
            # record j > i still goes here iff the budget left before it is positive:
            # left - (prefix[j] - prefix[i + 1]) > 0
            stop = min(bisect_left(prefix, self.left + prefix[i + 1], i + 1), n)
            self.left -= prefix[stop] - prefix[i + 1]
            if out and out[-1][0] == part:  # one partition only: it never changes
                out[-1] = (part, out[-1][1], stop)
            else:
                out.append((part, i, stop))
            i = stop
        return out

    def _switch(self, all_partitions: Sequence[int], available: Sequence[int]) -> int:
        pool = available or all_partitions
        if len(pool) > 1:
            # Another partition than the one just filled, so load spreads evenly.
            choice = self._rng.choice(pool)
            while choice == self._current:
                choice = self._rng.choice(pool)
        else:
            choice = pool[0]
        self._current = choice
        self.left = self._batch_size
        return choice
