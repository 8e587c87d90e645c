"""Synthetic fetch buffers for pure consumer tests."""

from __future__ import annotations

import struct

from crc32c import crc32c

from aiokproto.protocol.varint import encode_varint, encode_varlong
from aiokproto.records import RecordBatchBuilder, encode_end_txn_marker
from aiokproto.records.batch_v2 import HEADER, HEADER_SIZE


def batch(
    base_offset: int,
    values: list[bytes],
    *,
    pid: int = -1,
    transactional: bool = False,
    epoch: int = 0,
) -> bytes:
    builder = RecordBatchBuilder(
        base_offset=base_offset,
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        base_sequence=0 if pid >= 0 else -1,
        transactional=transactional,
        partition_leader_epoch=epoch,
    )
    for i, value in enumerate(values):
        assert builder.append(1000 + i, None, value) is not None
    return bytes(builder.build())


def marker(offset: int, pid: int, *, commit: bool) -> bytes:
    builder = RecordBatchBuilder(
        base_offset=offset,
        producer_id=pid,
        producer_epoch=0,
        transactional=True,
        control=True,
    )
    key, value = encode_end_txn_marker(commit, 0)
    builder.append(2000, key, value)
    return bytes(builder.build())


def gapped_batch(base_offset: int, deltas: list[int], last_offset_delta: int) -> bytes:
    """A v2 batch as compaction leaves it: records at ``deltas``, header up to
    ``last_offset_delta`` (records after the last one were removed)."""
    body = bytearray()
    for delta in deltas:
        value = f"v{base_offset + delta}".encode()
        rec = (
            b"\x00"
            + encode_varlong(0)
            + encode_varint(delta)
            + encode_varint(-1)
            + encode_varint(len(value))
            + value
            + encode_varint(0)
        )
        body += encode_varint(len(rec)) + rec
    out = bytearray(HEADER_SIZE) + body
    HEADER.pack_into(
        out,
        0,
        base_offset,
        len(out) - 12,
        3,
        2,
        0,
        0,
        last_offset_delta,
        1000,
        1000,
        -1,
        -1,
        -1,
        len(deltas),
    )
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)
