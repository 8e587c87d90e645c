"""Sans-I/O assembly of Kafka's size-prefixed frames from a byte stream
(``FrameAssembler``, for ``BufferedProtocol``); ``foreign_protocol()`` recognises the
first bytes of TLS or HTTP.

Built for ``asyncio.BufferedProtocol``: the event loop reads straight into the
buffer ``get_buffer`` hands out. Small frames are parsed out of one reusable scratch
buffer (one copy each, many frames per read); a frame too large for the scratch gets
a dedicated buffer that the socket then fills directly. That buffer starts at
``big_step`` bytes (1 MiB) and doubles as the bytes arrive, so a peer that announces
a huge frame and sends little cannot make a connection hold ``max_frame_size``; a
frame up to ``big_step`` is never copied, a larger one at most once more in total.
Every length is checked against ``max_frame_size`` before anything is allocated.
"""

from __future__ import annotations

import struct

from aiokproto.errors import KafkaProtocolError

_SIZE = struct.Struct(">i")
_MIN_FREE = 4096  # compact the scratch buffer when less than this is free at its end


def foreign_protocol(head: bytes) -> str | None:
    """What a peer's first bytes are when they clearly are not a Kafka answer: ``"TLS"``
    (a TLS record: content type 20-23, major version 3) or ``"HTTP"`` (a status line);
    None otherwise. The first answer on a connection (ApiVersions) is a few KB, so its
    size prefix starts with a zero byte, and these never do."""
    if head[:1] and 20 <= head[0] <= 23 and head[1:2] in (b"", b"\x03"):
        return "TLS"
    if head.startswith(b"HTTP/"):
        return "HTTP"
    return None


class FrameAssembler:
    """Turns the bytes of a connection into whole frame payloads (size prefix removed)."""

    __slots__ = (
        "_big",
        "_big_filled",
        "_big_size",
        "_end",
        "_max",
        "_scratch",
        "_start",
        "_step",
        "_view",
    )

    def __init__(
        self, max_frame_size: int, scratch_size: int = 256 * 1024, big_step: int = 1 << 20
    ) -> None:
        if max_frame_size <= 0:
            raise ValueError("max_frame_size must be positive")
        self._max = max_frame_size
        self._step = max(big_step, 1)
        self._scratch = bytearray(max(scratch_size, 2 * _MIN_FREE))
        self._view = memoryview(self._scratch)
        self._start = 0  # first unparsed byte in scratch
        self._end = 0  # one past the last filled byte in scratch
        self._big: bytearray | None = None  # the large frame being filled
        self._big_filled = 0
        self._big_size = 0  # its announced size (len(_big) until it has grown to it)

    def get_buffer(self) -> memoryview:
        """Where the next read should land (never empty)."""
        big = self._big
        if big is not None:
            return memoryview(big)[self._big_filled :]
        if len(self._scratch) - self._end < _MIN_FREE:
            pending = self._end - self._start
            self._scratch[:pending] = self._view[self._start : self._end]
            self._start, self._end = 0, pending
        return self._view[self._end :]

    def buffer_updated(self, nbytes: int) -> list[bytes | bytearray]:
        """Account for ``nbytes`` written into the last buffer; return finished frames."""
        big = self._big
        if big is not None:
            filled = self._big_filled = self._big_filled + nbytes
            if filled < len(big):
                return []
            if filled < self._big_size:
                # Full but the frame is not: grow. A new buffer, because the event
                # loop may still hold a view of this one (a view pins its size).
                grown = bytearray(min(self._big_size, 2 * len(big)))
                grown[:filled] = big
                self._big = grown
                return []
            self._big = None
            return [big]
        self._end += nbytes
        frames: list[bytes | bytearray] = []
        scratch, start, end = self._scratch, self._start, self._end
        while end - start >= 4:
            (size,) = _SIZE.unpack_from(scratch, start)
            if size < 0 or size > self._max:
                raise KafkaProtocolError(
                    f"frame length {size} is outside 0..{self._max} (max_frame_size); "
                    "the peer is not speaking the Kafka protocol or the stream is corrupt"
                )
            if end - start - 4 >= size:
                frames.append(bytes(self._view[start + 4 : start + 4 + size]))
                start += 4 + size
                continue
            if size + 4 > len(scratch) - _MIN_FREE:
                # Too big for the scratch buffer: give it its own buffer, filled in place.
                have = end - start - 4
                big = bytearray(min(size, max(self._step, 2 * have)))
                big[:have] = self._view[start + 4 : end]
                self._big, self._big_filled, self._big_size = big, have, size
                start = end = 0
            break
        if start == end:
            start = end = 0
        self._start, self._end = start, end
        return frames

    @property
    def allocated(self) -> int:
        """Bytes held for a large frame in progress (0 when there is none)."""
        return 0 if self._big is None else len(self._big)

    @property
    def buffered(self) -> int:
        """Bytes received that are not yet part of a returned frame."""
        pending = self._end - self._start
        return pending + (self._big_filled if self._big is not None else 0)
