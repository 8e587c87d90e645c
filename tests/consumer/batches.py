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


def with_crc(data: bytes | bytearray) -> bytes:
    """A v2 batch with its CRC-32C recomputed (so a change behind the CRC is reached)."""
    out = bytearray(data)
    out[17:21] = struct.pack(">I", crc32c(bytes(out[21:])))
    return bytes(out)


def undecodable(kind: str, base_offset: int, values: list[bytes]) -> bytes:
    """A v2 batch (offsets ``base_offset`` .. + len(values) - 1) with one defect:
    ``codec5``/``codec6``/``codec7`` an unknown compression id under a valid CRC,
    ``crc`` a failing CRC, ``short`` a record count above the records present, ``record``
    a record whose key length overruns it, both under a valid CRC."""
    good = bytearray(batch(base_offset, values))
    if kind.startswith("codec"):
        good[22] = (good[22] & ~0x07) | int(kind[-1])
        return with_crc(good)
    if kind == "crc":
        good[-1] ^= 0xFF
        return bytes(good)
    if kind == "short":
        count = struct.unpack_from(">i", good, HEADER_SIZE - 4)[0]
        struct.pack_into(">i", good, HEADER_SIZE - 4, count + 1)
        return with_crc(good)
    if kind == "record":
        # first record: length varint, attributes byte, timestamp delta, offset delta,
        # then the key length: make it claim far more bytes than the record has
        body = bytes(good[HEADER_SIZE:])
        pos = 1 + 1 + 1 + 1  # one-byte varints for these small records
        assert body[pos] == 1  # varint -1: a null key
        good[HEADER_SIZE + pos] = 0x7E  # varint 63
        return with_crc(good)
    raise ValueError(kind)
