"""Batch headers whose offsets leave no valid next offset are corrupt.

Found by the protocol fuzzer: a fetched batch at base offset 2**63-1 was accepted, its
``next_offset`` (2**63) became the consumer's position and the next FetchRequest could
not be encoded.
"""

from __future__ import annotations

import struct

import crc32c
import pytest

from aiokproto.errors import CorruptRecordError
from aiokproto.records import LegacyMessageSetBuilder, RecordBatchBuilder, read_batches

MAX = 2**63 - 1


def _v2(base_offset: int, last_offset_delta: int | None = None) -> bytes:
    builder = RecordBatchBuilder()
    for i in range(3):
        builder.append(1000 + i, None, b"v%d" % i)
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, base_offset)  # not covered by the CRC
    if last_offset_delta is not None:
        struct.pack_into(">i", data, 23, last_offset_delta)
        struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    return bytes(data)


@pytest.mark.parametrize(
    ("base", "delta"),
    [(MAX, None), (MAX - 2, None), (-1, None), (-(2**63), None), (0, -1), (5, -(2**31))],
)
def test_v2_batch_without_a_next_offset_is_corrupt(base: int, delta: int | None) -> None:
    with pytest.raises(CorruptRecordError, match="impossible offsets"):
        list(read_batches(_v2(base, delta)))


def test_v2_batch_ending_just_below_the_limit_is_fine() -> None:
    (batch,) = read_batches(_v2(MAX - 3))
    assert batch.next_offset == MAX
    assert [r.offset for r in batch.records()] == [MAX - 3, MAX - 2, MAX - 1]


@pytest.mark.parametrize("offset", [MAX, -1])
def test_legacy_message_without_a_next_offset_is_corrupt(offset: int) -> None:
    builder = LegacyMessageSetBuilder(1)
    builder.append(1000, None, b"v")
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, offset)  # the CRC starts after offset and size
    with pytest.raises(CorruptRecordError, match="impossible offset"):
        list(read_batches(data))
