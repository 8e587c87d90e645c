"""Primitive readers/writers: encodings, bounds checks, errors."""

from __future__ import annotations

from uuid import UUID

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiokproto.errors import KafkaProtocolError
from aiokproto.protocol import primitives as p

H = bytes.fromhex


def mv(b: bytes) -> memoryview:
    return memoryview(b)


@pytest.mark.parametrize(
    ("value", "compact", "wire"),
    [
        ("ab", False, "0002 6162"),
        ("ab", True, "03 6162"),
        ("", True, "01"),
        ("é", False, "0002 c3a9"),
    ],
)
def test_strings(value: str, compact: bool, wire: str) -> None:
    out = bytearray()
    p.write_string(out, value, compact)
    assert out == H(wire)
    assert p.read_string(mv(H(wire)), 0, compact) == (value, len(H(wire)))


def test_nullable_forms() -> None:
    for compact, null in ((False, "ffff"), (True, "00")):
        assert p.read_nullable_string(mv(H(null)), 0, compact) == (None, len(H(null)))
        with pytest.raises(KafkaProtocolError):
            p.read_string(mv(H(null)), 0, compact)
    assert p.read_nullable_bytes(mv(H("ffffffff")), 0, False) == (None, 4)
    assert p.read_nullable_bytes(mv(H("00")), 0, True) == (None, 1)
    assert p.read_records(mv(H("ffffffff")), 0, False) == (None, 4)
    assert p.read_nullable_int_array(mv(H("ffffffff")), 0, False, "i") == (None, 4)
    assert p.read_nullable_int_array(mv(H("00")), 0, True, "i") == (None, 1)
    with pytest.raises(KafkaProtocolError):
        p.read_nullable_string(mv(H("fffe")), 0, False)


def test_records_are_zero_copy() -> None:
    data = H("00000003 616263 ff")
    view, pos = p.read_records(mv(data), 0, False)
    assert view is not None and isinstance(view, memoryview)
    assert view.obj is data and bytes(view) == b"abc" and pos == 7


def test_uuid() -> None:
    u = UUID("12345678-1234-5678-1234-567812345678")
    assert p.read_uuid(mv(u.bytes), 0) == (u, 16)
    assert p.read_uuid(mv(bytes(16)), 0) == (UUID(int=0), 16)
    assert p.ZERO_UUID == UUID(int=0)
    with pytest.raises(KafkaProtocolError):
        p.read_uuid(mv(bytes(15)), 0)


def test_uuid_reads_share_one_object_per_id_and_stay_bounded() -> None:
    """Topic ids come in every Produce and Fetch answer: each id is built once."""
    u = UUID("12345678-1234-5678-1234-567812345678")
    first, _ = p.read_uuid(mv(b"x" + u.bytes), 1)
    again, _ = p.read_uuid(mv(bytearray(u.bytes)), 0)
    assert first == u and again is first
    for i in range(p._UUIDS_MAX + 10):  # a stream of new ids
        assert p.read_uuid(mv(i.to_bytes(16, "big")), 0)[0] == UUID(int=i)
    assert len(p._UUIDS) <= p._UUIDS_MAX
    assert p.read_uuid(mv(bytes(16)), 0)[0] is p.ZERO_UUID


@pytest.mark.parametrize(
    ("fn", "wire"),
    [
        (lambda b: p.read_string(b, 0, False), "7fff 00"),
        (lambda b: p.read_string(b, 0, True), "ffffffff0f 00"),
        (lambda b: p.read_bytes(b, 0, False), "7fffffff 00"),
        (lambda b: p.read_records(b, 0, True), "ffffffff0f"),
        (lambda b: p.read_array_len(b, 0, False), "7fffffff 000000"),
        (lambda b: p.read_int_array(b, 0, False, "q"), "00000002 0000000000000001"),
        (lambda b: p.read_uuid_array(b, 0, True), "03" + "00" * 20),
        (lambda b: p.read_string_array(b, 0, False), "7fffffff 0000"),
        (lambda b: p.read_tag_count(b, 0), "ffffffff07"),
        (lambda b: p.read_tag_header(b, 0), "01 7f 00"),
        (lambda b: p.read_uvarint(b, 0), "ffffffffff01"),
        (lambda b: p.read_uvarint(b, 0), "80"),
        (lambda b: p.read_struct_marker(b, 0), ""),
    ],
)
def test_bounds_checked(fn: object, wire: str) -> None:
    with pytest.raises(KafkaProtocolError):
        fn(mv(H(wire)))  # type: ignore[operator]


@given(st.lists(st.integers(-(2**31), 2**31 - 1), max_size=300), st.booleans())
def test_int_arrays(values: list[int], compact: bool) -> None:
    out = bytearray()
    p.write_int_array(out, values, compact, "i")
    assert p.read_int_array(mv(bytes(out)), 0, compact, "i") == (values, len(out))


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_roundtrip(value: int) -> None:
    out = bytearray()
    p.write_varlong(out, value)
    assert p.read_varlong(mv(bytes(out)), 0) == (value, len(out))


@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_roundtrip(value: int) -> None:
    out = bytearray()
    p.write_varint(out, value)
    assert p.read_varint(mv(bytes(out)), 0) == (value, len(out))


def test_tagged_fields_sorted_and_merged() -> None:
    out = bytearray()
    p.write_tagged_fields(out, [(1, b"a"), (4, b"b")], [(0, b"x"), (2, b"")])
    assert out == H("04 00 01 78 01 01 61 02 00 04 01 62")


def test_arrays_over_the_brokers_element_cap_are_refused_before_encoding() -> None:
    # Kafka 4.4 closes the connection on an array of more than 1,000,000 elements: the
    # client says so at encode time instead (the boundary itself still encodes)
    from aiokproto.protocol.messages.offset_fetch import (
        OffsetFetchRequest,
        OffsetFetchRequestGroup,
        OffsetFetchRequestTopics,
    )

    cap = p.MAX_ARRAY_ELEMENTS
    out = bytearray()
    p.write_int_array(out, [0] * cap, True, "i")
    assert len(out) == 3 + 4 * cap  # uvarint(cap + 1) takes 3 bytes
    for write in (
        lambda: p.write_int_array(bytearray(), [0] * (cap + 1), False, "i"),
        lambda: p.write_string_array(bytearray(), [""] * (cap + 1), True),
        lambda: p.write_uuid_array(bytearray(), [UUID(int=0)] * (cap + 1), True),
        lambda: p.write_array_len(bytearray(), cap + 1, False),
    ):
        with pytest.raises(ValueError, match="more than 1,000,000 elements; split"):
            write()
    p.write_array_len(bytearray(), -1, True)  # null stays null
    request = OffsetFetchRequest(
        groups=[
            OffsetFetchRequestGroup(
                group_id="g",
                topics=[OffsetFetchRequestTopics(name="t", partition_indexes=[0] * (cap + 1))],
            )
        ]
    )
    with pytest.raises(ValueError, match="1,000,001 elements"):
        request.encode(OffsetFetchRequest.MAX_STABLE_VERSION)
