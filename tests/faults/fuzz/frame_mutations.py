"""Frame-level mutations: bits and bytes, lengths, correlation ids, answers missing,
doubled, late, in pieces, or a closed connection instead."""

from __future__ import annotations

from tests.faults.fuzz.target import I32, Step, Target, framed, send

BIG_FRAME = 64 * 1024 * 1024  # a frame length big enough to hurt if allocated up front


def bit_flip(t: Target) -> list[Step]:
    frame = bytearray(t.frame)
    for _ in range(t.rng.randint(1, 3)):
        pos = t.rng.randrange(len(frame))
        frame[pos] ^= 1 << t.rng.randrange(8)
    t.detail = "bits flipped"
    return send(bytes(frame))


def byte_set(t: Target) -> list[Step]:
    frame = bytearray(t.frame)
    pos = t.rng.randrange(4, len(frame)) if len(frame) > 4 else 0
    frame[pos] = t.rng.choice((0x00, 0xFF, 0x7F, 0x80, t.rng.randrange(256)))
    t.detail = f"byte {pos} = {frame[pos]:#x}"
    return send(bytes(frame))


def insert_bytes(t: Target) -> list[Step]:
    pos = t.rng.randrange(4, len(t.frame) + 1)
    extra = t.rng.randbytes(t.rng.randint(1, 8))
    t.detail = f"{len(extra)} bytes inserted at {pos}"
    return send(t.frame[:pos] + extra + t.frame[pos:])


def delete_bytes(t: Target) -> list[Step]:
    pos = t.rng.randrange(4, max(5, len(t.frame)))
    n = t.rng.randint(1, 8)
    t.detail = f"{n} bytes deleted at {pos}"
    return send(t.frame[:pos] + t.frame[pos + n :])


def truncate(t: Target) -> list[Step]:
    """A shorter frame with a matching length: the body ends early."""
    cut = t.rng.randrange(0, len(t.frame))
    t.detail = f"frame cut to {cut} bytes"
    return send(t.frame[:cut])


def truncate_raw(t: Target) -> list[Step]:
    """The true length, then only part of the bytes: the client waits for the rest."""
    cut = t.rng.randrange(0, len(t.frame))
    t.detail = f"{cut} of {len(t.frame)} bytes sent"
    return [Step("write", framed(t.frame)[: 4 + cut])]


def length_bigger(t: Target) -> list[Step]:
    more = t.rng.choice((1, 2, 7, 100, 4096))
    t.detail = f"length +{more}"
    return [Step("write", I32.pack(len(t.frame) + more) + t.frame)]


def length_huge(t: Target) -> list[Step]:
    size = t.rng.choice((0x7FFFFFFF, 0x40000000, 256 * 1024 * 1024 + 1, BIG_FRAME))
    t.detail = f"length {size}"
    return [Step("write", I32.pack(size) + t.frame)]


def length_smaller(t: Target) -> list[Step]:
    less = t.rng.randint(1, max(1, len(t.frame) - 1))
    t.detail = f"length -{less}"
    return [Step("write", I32.pack(len(t.frame) - less) + t.frame)]


def length_tiny(t: Target) -> list[Step]:
    size = t.rng.choice((-1, -0x80000000, 0, 1, 3))
    t.detail = f"length {size}"
    return [Step("write", I32.pack(size) + t.frame)]


def wrong_correlation(t: Target) -> list[Step]:
    (corr,) = I32.unpack_from(t.frame, 0)
    other = t.rng.choice((corr + 1, corr - 1, 0, -1, corr + 1000, t.rng.randrange(2**31)))
    t.detail = f"correlation id {other} for {corr}"
    return send(I32.pack(other) + t.frame[4:])


def duplicate(t: Target) -> list[Step]:
    t.detail = "answered twice"
    return [Step("write", framed(t.frame)), Step("write", framed(t.frame))]


def missing(t: Target) -> list[Step]:
    """No answer to this request; later ones are answered (out of order, then)."""
    t.detail = "not answered"
    return []


def stall(t: Target) -> list[Step]:
    """No answer to this request nor any later one on the connection."""
    t.detail = "connection stalled"
    return [Step("stall")]


def close_instead(t: Target) -> list[Step]:
    t.detail = "closed instead of answering"
    return [Step("close")]


def close_after(t: Target) -> list[Step]:
    t.detail = "closed after answering"
    return [Step("write", framed(t.frame)), Step("close")]


def close_midway(t: Target) -> list[Step]:
    data = framed(t.frame)
    cut = t.rng.randrange(1, len(data))
    t.detail = f"closed after {cut} of {len(data)} bytes"
    return [Step("write", data[:cut]), Step("close")]


def late(t: Target) -> list[Step]:
    delay = t.rng.choice((0.5, 0.99, 1.01, 1.5, 2.5, 10.0))
    t.detail = f"answered {delay} s late"
    return [Step("write", framed(t.frame), delay)]


def dribble(t: Target) -> list[Step]:
    """The frame in small pieces, each in its own read."""
    data = framed(t.frame)
    steps, pos = [], 0
    while pos < len(data):
        n = t.rng.randint(1, 7)
        steps.append(Step("write", data[pos : pos + n], 0.001))
        pos += n
    t.detail = f"{len(steps)} pieces"
    return steps


def garbage_body(t: Target) -> list[Step]:
    body = t.rng.randbytes(t.rng.randint(0, 64))
    t.detail = f"{len(body)} random body bytes"
    return send(t.frame[: t.header_size] + body)


def unsolicited(t: Target) -> list[Step]:
    """Another answer first (the previous one on this connection, again)."""
    extra = t.previous if t.previous is not None else t.frame[:4] + b"\x00" * 8
    t.detail = "an answer nobody asked for, first"
    return [Step("write", framed(extra)), Step("write", framed(t.frame))]
