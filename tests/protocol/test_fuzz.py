"""Hostile bytes: decoders raise ``KafkaProtocolError`` and nothing else, quickly."""

from __future__ import annotations

import time
import tracemalloc
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiokproto.errors import KafkaProtocolError
from aiokproto.protocol.headers import decode_request_header, decode_response_header
from aiokproto.protocol.messages import FetchResponse, MetadataResponse, ProduceRequest
from tests.protocol.schema import cases, message_class, message_strategy

ALL = cases()
FUZZ = settings(
    max_examples=400,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def try_decode(spec: Any, version: int, data: bytes) -> None:
    try:
        message_class(spec).decode(data, version)
    except KafkaProtocolError:
        pass


@FUZZ
@given(case=st.sampled_from(ALL), data=st.binary(max_size=64))
def test_random_bytes(case: tuple[Any, int], data: bytes) -> None:
    spec, version = case
    try_decode(spec, version, data)


@st.composite
def mutated(draw: st.DrawFn) -> tuple[Any, int, bytes]:
    spec, version = draw(st.sampled_from(ALL))
    wire = bytearray(draw(message_strategy(spec, version)).encode(version))
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["flip", "truncate", "insert", "big"]))
        at = draw(st.integers(0, len(wire)))
        if op == "flip" and wire:
            wire[min(at, len(wire) - 1)] = draw(st.integers(0, 255))
        elif op == "truncate":
            del wire[at:]
        elif op == "insert":
            wire[at:at] = draw(st.binary(min_size=1, max_size=3))
        elif op == "big":
            wire[at:at] = draw(
                st.sampled_from([b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff\x0f", b"\x7f\xff"])
            )
    return spec, version, bytes(wire)


@FUZZ
@given(case=mutated())
def test_mutated_encodings(case: tuple[Any, int, bytes]) -> None:
    try_decode(*case)


@FUZZ
@given(data=st.binary(max_size=40), version=st.integers(0, 1))
def test_headers(data: bytes, version: int) -> None:
    for fn in (lambda: decode_response_header(data, version), lambda: decode_request_header(data)):
        try:
            fn()
        except KafkaProtocolError:
            pass


@pytest.mark.parametrize(
    ("cls", "version", "wire"),
    [
        # Metadata v0: brokers array claims 2**31-1 entries in 10 bytes
        (MetadataResponse, 0, b"\x7f\xff\xff\xff" + bytes(6)),
        # Metadata v12: throttle, then a compact array of 2**32-2 brokers
        (MetadataResponse, 12, bytes(4) + b"\xff\xff\xff\xff\x0f" + bytes(5)),
        # Produce v3: transactional id of 32767 bytes in a 10-byte body
        (ProduceRequest, 3, b"\x7f\xff" + bytes(8)),
        # Fetch v4 response: one topic with a records blob claiming 2 GiB
        (
            FetchResponse,
            4,
            bytes(4)
            + b"\x00\x00\x00\x01"
            + b"\x00\x01t"
            + b"\x00\x00\x00\x01"
            + bytes(4 + 2 + 8 + 8)
            + b"\x00\x00\x00\x00"
            + b"\x7f\xff\xff\xff"
            + bytes(10),
        ),
        # a tagged-field section claiming 2**31 fields
        (MetadataResponse, 12, bytes(4) + b"\x01\x00\xff\xff\xff\xff\x01\xff\xff\xff\xff\x07"),
    ],
)
def test_large_claimed_lengths_fail_fast(cls: Any, version: int, wire: bytes) -> None:
    tracemalloc.start()
    t0 = time.perf_counter()
    with pytest.raises(KafkaProtocolError):
        cls.decode(wire, version)
    elapsed = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert elapsed < 0.05
    assert peak < 1_000_000
