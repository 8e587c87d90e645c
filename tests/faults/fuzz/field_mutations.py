"""Structure-aware mutations: counts, lengths, varints, integers, error codes, throttle
times, tagged fields, array elements, strings and uuids at their places in the body
(found by ``spots``)."""

from __future__ import annotations

import struct

from aiokproto.errors import ERROR_CLASSES
from aiokproto.protocol.varint import encode_uvarint
from tests.faults.fuzz.frame_mutations import bit_flip
from tests.faults.fuzz.spots import Spot
from tests.faults.fuzz.target import I32, Step, Target, send, splice


def varint_raw(raw: int) -> bytes:
    return encode_uvarint(raw & 0xFFFFFFFF)


def _length_value(t: Target, spot: Spot) -> bytes:
    """A lying count or length in the spot's own encoding."""
    if spot.varint:  # compact: raw = n + 1, 0 = null
        raw = t.rng.choice((0, spot.value + 1, max(spot.value - 1, 0), 0xFFFFFFFF, 0x7FFFFFFF,
                            0x10000))
        t.detail = f"{spot.kind} {spot.name} raw {spot.value} -> {raw}"
        return varint_raw(raw)
    wide = spot.size == 4
    top = 0x7FFFFFFF if wide else 0x7FFF
    value = t.rng.choice((-1, -2, spot.value + 1, spot.value - 1, top, top // 2))
    value = min(max(value, -top - 1), top)
    t.detail = f"{spot.kind} {spot.name} {spot.value} -> {value}"
    return struct.pack(">i" if wide else ">h", value)


def array_count(t: Target) -> list[Step]:
    spot = t.pick(("count",))
    if spot is None:
        return bit_flip(t)
    return send(splice(t, spot, _length_value(t, spot)))


def length_lie(t: Target) -> list[Step]:
    spot = t.pick(("length",))
    if spot is None:
        return bit_flip(t)
    return send(splice(t, spot, _length_value(t, spot)))


def endless_varint(t: Target) -> list[Step]:
    spot = t.pick(("count", "length", "tags", "tag_size"))
    if spot is None or not spot.varint:
        return bit_flip(t)
    n = t.rng.choice((5, 6, 10, 11, 40))
    fill = t.rng.choice((b"\xff", b"\x80"))
    if t.rng.random() < 0.3:  # continuation bytes up to the end of the frame
        t.detail = f"varint {spot.name}: continuation to the end"
        return send(t.frame[: t.header_size + spot.at] + fill * n)
    t.detail = f"varint {spot.name}: {n} continuation bytes"
    return send(splice(t, spot, fill * n))


def overlong_varint(t: Target) -> list[Step]:
    spot = t.pick(("count", "length", "tags", "tag_size"))
    if spot is None or not spot.varint:
        return bit_flip(t)
    n = t.rng.randint(spot.size + 1, 10)
    raw = varint_raw(spot.value)
    padded = bytearray(raw[:-1]) + bytes((raw[-1] | 0x80,)) + b"\x80" * (n - len(raw) - 1) + b"\0"
    t.detail = f"varint {spot.name} padded to {n} bytes"
    return send(splice(t, spot, bytes(padded)))


def int_extreme(t: Target) -> list[Step]:
    spot = t.pick(("int",))
    if spot is None:
        return bit_flip(t)
    bits = 8 * spot.size
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    value = t.rng.choice(
        (0, -1, 1, low, high, spot.value + 1, spot.value - 1, spot.value + 1000, -spot.value)
    )
    value = min(max(value, low), high)
    t.detail = f"{spot.name} {spot.value} -> {value}"
    fmt = {1: ">b", 2: ">h", 4: ">i", 8: ">q"}[spot.size]
    return send(splice(t, spot, struct.pack(fmt, value)))


_CODES = sorted(c for c in ERROR_CLASSES if c != 0)


def error_code(t: Target) -> list[Step]:
    spot = t.pick(("int",), "ErrorCode")
    if spot is None:
        return int_extreme(t)
    code = t.rng.choice(_CODES) if t.rng.random() < 0.9 else t.rng.choice((9999, -2, 32767))
    t.detail = f"{spot.name} = {code}"
    return send(splice(t, spot, struct.pack(">h", code)))


def throttle(t: Target) -> list[Step]:
    spot = t.pick(("int",), "ThrottleTimeMs")
    if spot is None:
        return int_extreme(t)
    ms = t.rng.choice((1, 100, 999, 1500, 5000))
    t.detail = f"throttle_time_ms = {ms}"
    return send(splice(t, spot, struct.pack(">i", ms)))


def throttle_huge(t: Target) -> list[Step]:
    spot = t.pick(("int",), "ThrottleTimeMs")
    if spot is None:
        return int_extreme(t)
    ms = t.rng.choice((0x7FFFFFFF, 86_400_000))
    t.detail = f"throttle_time_ms = {ms}"
    return send(splice(t, spot, struct.pack(">i", ms)))


def tag_garbage(t: Target) -> list[Step]:
    spot = t.pick(("tags",))
    if spot is None:
        return bit_flip(t)
    tag = t.rng.choice((0, 1, 7, 300, 0x7FFFFFFF))
    data = t.rng.randbytes(t.rng.randint(0, 6))
    size = t.rng.choice((len(data), len(data) + 3, 0xFFFFFFF))
    entry = encode_uvarint(1) + encode_uvarint(tag) + encode_uvarint(size) + data
    t.detail = f"tagged field {tag} size {size} ({len(data)} bytes)"
    # only an empty tag section is replaced: then the entry is the only one
    if spot.value != 0:
        entry = encode_uvarint(0x7FFFFFFF)
        t.detail = "tag count 2**31-1"
    return send(splice(t, spot, entry))


def _count_bytes(spot: Spot, n: int) -> bytes:
    """Array count ``n`` in the encoding of ``spot``."""
    return varint_raw(n + 1) if spot.varint else I32.pack(n)


def array_element(t: Target) -> list[Step]:
    """A well-formed array with one element dropped, doubled, or two swapped."""
    counts = {s.at: s for s in t.spots if s.kind == "count"}
    elements: dict[int, list[Spot]] = {}
    for s in t.spots:
        if s.kind == "element":
            elements.setdefault(s.owner, []).append(s)
    if not elements:
        return array_count(t)
    owner = t.rng.choice(sorted(elements))
    items, count = sorted(elements[owner], key=lambda s: s.at), counts[owner]
    body = t.frame[t.header_size :]
    parts = [body[e.at : e.at + e.size] for e in items]
    how = t.rng.choice(("drop", "double", "swap") if len(parts) > 1 else ("drop", "double"))
    i = t.rng.randrange(len(parts))
    if how == "drop":
        del parts[i]
    elif how == "double":
        parts.insert(i, parts[i])
    else:
        j = t.rng.randrange(len(parts))
        parts[i], parts[j] = parts[j], parts[i]
    t.detail = f"{count.name}[{i}] {how} ({len(items)} elements)"
    start, end = count.at, items[-1].at + items[-1].size
    new = body[:start] + _count_bytes(count, len(parts)) + b"".join(parts) + body[end:]
    return send(t.frame[: t.header_size] + new)


def string_swap(t: Target) -> list[Step]:
    """A string field with other (well-formed) content: names nobody asked about."""
    spot = t.pick(("string",))
    if spot is None:
        return bit_flip(t)
    body = t.frame[t.header_size :]
    old = body[spot.at : spot.at + spot.size]
    others = [body[s.at : s.at + s.size] for s in t.spots if s.kind == "string"]
    new = t.rng.choice(
        (b"", old + b"x", old[:-1], t.rng.choice(others), b"\x00", b"\xff\xfe", "é".encode() * 200)
    )
    index = t.spots.index(spot)
    length = t.spots[index - 1]
    head = varint_raw(len(new) + 1) if length.varint else struct.pack(">h", len(new))
    t.detail = f"{spot.name} {old[:40]!r} -> {new[:40]!r}"
    new_body = body[: length.at] + head + new + body[spot.at + spot.size :]
    return send(t.frame[: t.header_size] + new_body)


def uuid_swap(t: Target) -> list[Step]:
    spot = t.pick(("uuid",))
    if spot is None:
        return bit_flip(t)
    new = t.rng.choice((bytes(16), t.rng.randbytes(16), b"\xff" * 16))
    t.detail = f"{spot.name} -> {new.hex()}"
    return send(splice(t, spot, new))
