"""What a mutation works on (``Target``) and returns (``Step``s), and byte helpers.

A mutation takes the correct response frame (no size prefix) and returns the steps the
fake broker performs for that request instead: bytes to write (after an optional extra
delay), closing the connection, or going silent for good.
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass
from functools import cached_property

from tests.faults.fuzz.spots import Spot, spots
from tests.faults.fuzz.wire import response_header_size

I32 = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class Step:
    action: str  # "write" | "close" | "stall"
    data: bytes = b""
    delay_s: float = 0.0  # on top of the answer's own (recorded) delay


@dataclass
class Target:
    """The answer being mutated, and what the mutation may want to know around it."""

    api_key: int
    version: int
    frame: bytes  # the correct frame, restamped, without size prefix
    previous: bytes | None  # the last frame sent on this connection, if any
    rng: random.Random
    detail: str = ""  # what was done, for the case report

    @cached_property
    def header_size(self) -> int:
        return response_header_size(self.api_key, self.version, self.frame)

    @cached_property
    def spots(self) -> list[Spot]:
        try:
            return spots(self.api_key, self.version, self.frame[self.header_size :])
        except Exception:
            return []

    def pick(self, kinds: tuple[str, ...], name: str | None = None) -> Spot | None:
        """A random spot of ``kinds``: a field name first (uniformly), then one of its
        occurrences, so that a field repeated a hundred times (ApiVersions' ApiKey)
        does not crowd out the rare ones (Metadata's PartitionIndex)."""
        by_name: dict[str, list[Spot]] = {}
        for s in self.spots:
            if s.kind in kinds and (name is None or s.name.endswith(name)):
                by_name.setdefault(s.name, []).append(s)
        if not by_name:
            return None
        return self.rng.choice(by_name[self.rng.choice(sorted(by_name))])


def framed(frame: bytes) -> bytes:
    return I32.pack(len(frame)) + frame


def send(frame: bytes) -> list[Step]:
    return [Step("write", framed(frame))]


def splice(t: Target, spot: Spot, new: bytes) -> bytes:
    """The frame with the bytes of ``spot`` (a body position) replaced by ``new``."""
    at = t.header_size + spot.at
    return t.frame[:at] + new + t.frame[at + spot.size :]
