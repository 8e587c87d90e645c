"""Mutations of the record batches inside Fetch answers (CRC recomputed where the
change is inside the part it covers, so the decoder meets the hostile fields)."""

from __future__ import annotations

import struct

from crc32c import crc32c

from tests.faults.fuzz.field_mutations import varint_raw
from tests.faults.fuzz.frame_mutations import bit_flip
from tests.faults.fuzz.spots import Spot
from tests.faults.fuzz.target import I32, Step, Target, send

_CRC_AT, _ATTR_AT, _HEADER = 17, 21, 61


def _batches(blob: bytes) -> list[tuple[int, int]]:
    """(start, end) of each whole batch in a records blob."""
    out, pos = [], 0
    while pos + 12 <= len(blob):
        (length,) = I32.unpack_from(blob, pos + 8)
        end = pos + 12 + length
        if length <= 0 or end > len(blob):
            break
        out.append((pos, end))
        pos = end
    return out


def _fix_crc(batch: bytearray) -> None:
    if len(batch) >= _HEADER and batch[16] == 2:
        struct.pack_into(">I", batch, _CRC_AT, crc32c(bytes(batch[_ATTR_AT:])))


def _with_records(t: Target, blob_spot: Spot, new_blob: bytes) -> bytes:
    """The frame with a records blob replaced, its length field rewritten to match."""
    index = t.spots.index(blob_spot)
    length = t.spots[index - 1]
    n = len(new_blob)
    head = varint_raw(n + 1) if length.varint else I32.pack(n)
    start = t.header_size + length.at
    end = t.header_size + blob_spot.at + blob_spot.size
    return t.frame[:start] + head + new_blob + t.frame[end:]


def records(t: Target) -> list[Step]:
    spot = t.pick(("records",))
    if spot is None:
        return bit_flip(t)
    at = t.header_size + spot.at
    blob = bytearray(t.frame[at : at + spot.size])
    batches = _batches(bytes(blob))
    if not batches:
        return bit_flip(t)
    start, end = t.rng.choice(batches)
    batch = bytearray(blob[start:end])
    how = t.rng.choice(
        ("flip", "count", "attributes", "delta", "length", "magic", "offset", "cut", "crc")
    )
    if how == "flip" and len(batch) > _HEADER:
        for _ in range(t.rng.randint(1, 4)):
            batch[t.rng.randrange(_HEADER, len(batch))] = t.rng.randrange(256)
        _fix_crc(batch)
    elif how == "count":
        struct.pack_into(">i", batch, 57, t.rng.choice((-1, 0, 0x7FFFFFFF, 1 << 20, 2)))
        _fix_crc(batch)
    elif how == "attributes":
        struct.pack_into(">h", batch, _ATTR_AT, t.rng.choice((5, 6, 7, 0x10, 0x20, 0x30, -1)))
        _fix_crc(batch)
    elif how == "delta":
        struct.pack_into(">i", batch, 23, t.rng.choice((-1, -(2**31), 2**31 - 1, 1000)))
        _fix_crc(batch)
    elif how == "length":
        struct.pack_into(">i", batch, 8, t.rng.choice((0, -1, 5, 49, 0x7FFFFFFF, len(batch))))
    elif how == "magic":
        batch[16] = t.rng.choice((0, 1, 3, 0xFF))
    elif how == "offset":
        (base,) = struct.unpack_from(">q", batch, 0)
        new = t.rng.choice((0, -1, base - 1, base + 1_000_000, 2**63 - 1))
        struct.pack_into(">q", batch, 0, new)
    elif how == "crc":
        struct.pack_into(">I", batch, _CRC_AT, t.rng.randrange(2**32))
    else:  # cut: the batch ends early (a partial last batch, or garbage mid-blob)
        batch = batch[: t.rng.randrange(1, len(batch))]
    t.detail = f"record batch at {start}: {how}"
    new_blob = bytes(blob[:start]) + bytes(batch) + bytes(blob[end:])
    return send(_with_records(t, spot, new_blob))
