"""ConsumerProtocol subscription/assignment bytes and sticky user data: golden + round trips."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiokproto.consumer.group.assignors.sticky import (
    NO_GENERATION,
    decode_sticky_user_data,
    encode_sticky_user_data,
)
from aiokproto.consumer.group.protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from aiokproto.errors import KafkaProtocolError
from aiokproto.structs import TopicPartition as TP


def i16(n: int) -> bytes:
    return n.to_bytes(2, "big", signed=True)


def i32(n: int) -> bytes:
    return n.to_bytes(4, "big", signed=True)


def string(s: str) -> bytes:
    return i16(len(s)) + s.encode()


SUB = Subscription(
    topics=("a", "bb"),
    user_data=b"\x01\x02\x03",
    owned_partitions=(TP("a", 5), TP("a", 0)),
    generation_id=7,
    rack_id="r1",
)

# Hand-built from ConsumerProtocolSubscription.json: int16 version, then the body.
SUB_V0 = i16(0) + i32(2) + string("a") + string("bb") + i32(3) + b"\x01\x02\x03"
SUB_V1 = (
    i16(1)
    + i32(2) + string("a") + string("bb")
    + i32(3) + b"\x01\x02\x03"
    + i32(1) + string("a") + i32(2) + i32(0) + i32(5)
)  # fmt: skip
SUB_V3 = i16(3) + SUB_V1[2:] + i32(7) + string("r1")


def test_subscription_golden_bytes() -> None:
    assert encode_subscription(SUB, 0) == SUB_V0
    assert encode_subscription(SUB, 1) == SUB_V1
    assert encode_subscription(SUB, 2) == i16(2) + SUB_V1[2:] + i32(7)
    assert encode_subscription(SUB) == SUB_V3


def test_subscription_decodes_each_version() -> None:
    v0 = decode_subscription(SUB_V0)
    assert (v0.topics, v0.user_data, v0.owned_partitions, v0.generation_id, v0.version) == (
        ("a", "bb"),
        b"\x01\x02\x03",
        (),
        -1,
        0,
    )
    v3 = decode_subscription(SUB_V3)
    assert v3.owned_partitions == (TP("a", 0), TP("a", 5))
    assert (v3.generation_id, v3.rack_id, v3.version) == (7, "r1", 3)


def test_subscription_null_user_data_and_rack() -> None:
    data = encode_subscription(Subscription(topics=("t",)))
    assert data == i16(3) + i32(1) + string("t") + i32(-1) + i32(0) + i32(-1) + i16(-1)
    assert decode_subscription(data) == Subscription(topics=("t",))


def test_newer_subscription_version_is_read_as_the_newest_known() -> None:
    # A v4 member appends fields we do not know; we read the v3 prefix and ignore them.
    data = i16(4) + SUB_V3[2:] + b"future fields"
    sub = decode_subscription(data)
    assert sub.topics == ("a", "bb") and sub.rack_id == "r1" and sub.version == 4


@pytest.mark.parametrize("data", [b"", b"\x00", i16(-1) + b"\x00" * 8, i16(0) + i32(5)])
def test_bad_subscription_bytes_raise_protocol_error(data: bytes) -> None:
    with pytest.raises(KafkaProtocolError):
        decode_subscription(data)


def test_assignment_golden_bytes() -> None:
    a = Assignment((TP("b", 1), TP("a", 1), TP("a", 0)))
    expected_body = (
        i32(2) + string("a") + i32(2) + i32(0) + i32(1) + string("b") + i32(1) + i32(1) + i32(-1)
    )
    assert encode_assignment(a, 0) == i16(0) + expected_body
    assert encode_assignment(a) == i16(3) + expected_body
    decoded = decode_assignment(i16(3) + expected_body)
    assert decoded.partitions == (TP("a", 0), TP("a", 1), TP("b", 1))
    assert decoded.user_data is None


def test_empty_assignment_bytes_mean_nothing_assigned() -> None:
    assert decode_assignment(b"") == Assignment(())


def test_newer_assignment_version_tolerated() -> None:
    body = i32(1) + string("t") + i32(1) + i32(4) + i32(2) + b"ud"
    assert decode_assignment(i16(9) + body + b"xx").partitions == (TP("t", 4),)


topics_st = st.text(st.characters(min_codepoint=97, max_codepoint=122), min_size=1, max_size=6)
tps_st = st.lists(st.builds(TP, topics_st, st.integers(0, 1000)), max_size=20, unique=True)


@given(
    st.lists(topics_st, max_size=5, unique=True),
    st.none() | st.binary(max_size=20),
    tps_st,
    st.integers(-1, 2**31 - 1),
    st.none() | topics_st,
)
def test_subscription_round_trip(
    topics: list[str], user_data: bytes | None, owned: list[TP], gen: int, rack: str | None
) -> None:
    sub = Subscription(tuple(topics), user_data, tuple(sorted(owned)), gen, rack)
    assert decode_subscription(encode_subscription(sub)) == sub
    v1 = decode_subscription(encode_subscription(sub, 1))
    assert (v1.topics, v1.user_data, v1.owned_partitions, v1.generation_id) == (
        sub.topics,
        user_data,
        sub.owned_partitions,
        -1,
    )


@given(tps_st, st.none() | st.binary(max_size=10), st.integers(0, 3))
def test_assignment_round_trip(tps: list[TP], user_data: bytes | None, version: int) -> None:
    a = Assignment(tuple(sorted(tps)), user_data, version)
    assert decode_assignment(encode_assignment(a, version)) == a


def test_sticky_user_data_golden() -> None:
    data = encode_sticky_user_data(frozenset({TP("t", 3), TP("t", 1)}), 5)
    assert data == i32(1) + string("t") + i32(2) + i32(1) + i32(3) + i32(5)
    assert decode_sticky_user_data(data) == (frozenset({TP("t", 1), TP("t", 3)}), 5)
    # v0 (no generation) from an old Java StickyAssignor
    assert decode_sticky_user_data(data[:-4]) == (
        frozenset({TP("t", 1), TP("t", 3)}),
        NO_GENERATION,
    )


@given(tps_st, st.integers(-1, 2**31 - 1))
def test_sticky_user_data_round_trip(tps: list[TP], gen: int) -> None:
    assert decode_sticky_user_data(encode_sticky_user_data(frozenset(tps), gen)) == (
        frozenset(tps),
        gen,
    )


@pytest.mark.parametrize("data", [b"\x00", i32(1) + i16(5) + b"ab", i32(1) + string("t") + i32(9)])
def test_sticky_user_data_garbage(data: bytes) -> None:
    with pytest.raises(KafkaProtocolError):
        decode_sticky_user_data(data)
