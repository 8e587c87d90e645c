"""Record values shared by every client, and the stamps latency runs put in them.

Values are half random characters, half repeated text, so compression has something to
do but is not a no-op (about 2:1 with zstd), and never contain a newline: the same pool
is written to the payload file of Java's ``ProducerPerformance``.
"""

from __future__ import annotations

import random
import struct

POOL_SIZE = 1024
_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_TEXT = b"the quick brown fox jumps over the lazy dog; "
# latency stamp: sequence number, then the intended send time (perf_counter_ns)
_STAMP = struct.Struct(">qq")
STAMP_SIZE = _STAMP.size
WARMUP_SEQ = -1


def value_pool(size: int, seed: int = 8) -> list[bytes]:
    """``POOL_SIZE`` distinct values of exactly ``size`` bytes; record i uses pool[i % n]."""
    if size < 1:
        raise ValueError("value size must be positive")
    rng = random.Random(seed * 1_000_003 + size)
    text = _TEXT * (size // len(_TEXT) + 1)
    pool = []
    for _ in range(POOL_SIZE):
        n_random = size // 2
        rand = bytes(rng.choices(_ALPHABET, k=n_random))
        pool.append(rand + text[: size - n_random])
    return pool


def payload_file_bytes(pool: list[bytes]) -> bytes:
    """The pool as a newline-delimited payload file for ProducerPerformance."""
    if any(b"\n" in v for v in pool):
        raise ValueError("payload values must not contain the delimiter")
    return b"\n".join(pool)


def stamp(value: bytes, seq: int, sent_ns: int) -> bytes:
    """``value`` with its first 16 bytes replaced by (seq, sent_ns); same length."""
    return _STAMP.pack(seq, sent_ns) + value[STAMP_SIZE:]


def read_stamp(value: bytes) -> tuple[int, int]:
    seq, sent_ns = _STAMP.unpack_from(value)
    return int(seq), int(sent_ns)
