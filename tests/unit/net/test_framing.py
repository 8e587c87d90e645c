"""FrameAssembler: whole frames out of arbitrarily split reads; lengths checked first."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiokproto.errors import KafkaProtocolError
from aiokproto.net.framing import FrameAssembler


def feed(asm: FrameAssembler, stream: bytes, cuts: list[int]) -> list[bytes]:
    out: list[bytes] = []
    pos = 0
    cut_iter = iter(cuts)
    while pos < len(stream):
        buf = asm.get_buffer()
        n = min(len(buf), len(stream) - pos, max(1, next(cut_iter, len(stream))))
        buf[:n] = stream[pos : pos + n]
        pos += n
        out.extend(bytes(f) for f in asm.buffer_updated(n))
    return out


@settings(max_examples=200, deadline=None)
@given(
    shapes=st.lists(
        st.tuples(st.integers(0, 255), st.one_of(st.integers(0, 64), st.integers(9000, 40000))),
        max_size=12,
    ),
    cuts=st.lists(st.integers(1, 50000), max_size=60),
)
def test_frames_survive_any_split(shapes: list[tuple[int, int]], cuts: list[int]) -> None:
    # Frames of varied sizes whose bytes differ per frame and per position.
    frames = [bytes((seed + i) % 256 for i in range(size)) for seed, size in shapes]
    stream = b"".join(struct.pack(">i", len(f)) + f for f in frames)
    asm = FrameAssembler(1 << 20, scratch_size=16384)
    assert feed(asm, stream, cuts) == frames
    assert asm.buffered == 0


def test_big_frame_lands_in_its_own_buffer_without_copy() -> None:
    payload = bytes(range(256)) * 4096  # 1 MiB
    asm = FrameAssembler(2 << 20, scratch_size=65536)
    stream = struct.pack(">i", len(payload)) + payload
    first = asm.get_buffer()
    first[:100] = stream[:100]
    assert asm.buffer_updated(100) == []
    rest = asm.get_buffer()
    assert len(rest) == len(payload) - 96  # exactly the remainder of the frame
    rest[:] = stream[100:]
    (frame,) = asm.buffer_updated(len(rest))
    assert frame == payload


@pytest.mark.parametrize("size", [-1, -(2**31), (1 << 20) + 1, 2**31 - 1])
def test_impossible_length_fails_before_allocating(size: int) -> None:
    asm = FrameAssembler(1 << 20)
    buf = asm.get_buffer()
    buf[:4] = struct.pack(">i", size)
    with pytest.raises(KafkaProtocolError, match="frame length"):
        asm.buffer_updated(4)


def test_a_lying_length_does_not_allocate_the_announced_size() -> None:
    # A peer announces 64 MiB and sends 100 bytes: hold about what arrived, not 64 MiB.
    asm = FrameAssembler(128 << 20, scratch_size=65536)
    buf = asm.get_buffer()
    head = struct.pack(">i", 64 << 20) + b"x" * 100
    buf[: len(head)] = head
    assert asm.buffer_updated(len(head)) == []
    assert 0 < asm.allocated <= 1 << 20
    assert asm.buffered == 100


@settings(max_examples=50, deadline=None)
@given(cuts=st.lists(st.integers(1, 70000), min_size=1, max_size=40))
def test_a_large_frame_grows_in_steps_and_arrives_whole(cuts: list[int]) -> None:
    payload = bytes(range(251)) * 2000  # ~500 KB, far above the 4 KiB first step
    frames = [payload, b"after"]
    stream = b"".join(struct.pack(">i", len(f)) + f for f in frames)
    asm = FrameAssembler(1 << 20, scratch_size=16384, big_step=4096)
    assert feed(asm, stream, cuts) == frames
    assert asm.allocated == 0 and asm.buffered == 0
