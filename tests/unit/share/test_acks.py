"""``AckBook`` and ``to_batches``: a share consumer's acknowledgements, without sockets."""

from __future__ import annotations

import pytest

from aiokproto.errors import KafkaConfigError
from aiokproto.share.acks import (
    AckBatch,
    AckBook,
    AcknowledgeType,
    ack_type,
    to_batches,
)
from aiokproto.structs import TopicPartition

A, R, J, N, G = (
    AcknowledgeType.ACCEPT,
    AcknowledgeType.RELEASE,
    AcknowledgeType.REJECT,
    AcknowledgeType.RENEW,
    AcknowledgeType.GAP,
)
TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def test_to_batches_empty() -> None:
    assert to_batches({}) == []


def test_to_batches_one_run_of_one_type() -> None:
    assert to_batches({5: A, 6: A, 7: A}) == [AckBatch(5, 7, (1,))]


def test_to_batches_splits_on_type_changes() -> None:
    acks = {0: A, 1: A, 2: R, 3: J, 4: J, 5: G, 6: N}
    assert to_batches(acks) == [
        AckBatch(0, 1, (1,)),
        AckBatch(2, 2, (2,)),
        AckBatch(3, 4, (3,)),
        AckBatch(5, 5, (0,)),
        AckBatch(6, 6, (4,)),
    ]


def test_to_batches_splits_on_offset_gaps_and_sorts() -> None:
    # offsets not in the map are not acknowledged: a hole ends the batch
    acks = {12: A, 10: A, 11: A, 14: A, 15: A, 20: R}
    assert to_batches(acks) == [
        AckBatch(10, 12, (1,)),
        AckBatch(14, 15, (1,)),
        AckBatch(20, 20, (2,)),
    ]


def test_to_batches_gap_type_at_offset_zero_is_kept() -> None:
    # GAP is 0: the "no run yet" sentinel must not swallow it
    assert to_batches({0: G, 1: G}) == [AckBatch(0, 1, (0,))]
    assert to_batches({0: G}) == [AckBatch(0, 0, (0,))]


def test_to_batches_covers_every_offset_exactly_once() -> None:
    kinds = [A, R, J, G, N]
    acks = {o: kinds[(o * 7 // 3) % 5] for o in range(0, 300) if o % 11}
    seen: dict[int, int] = {}
    for b in to_batches(acks):
        assert b.first <= b.last and len(b.types) == 1
        for o in range(b.first, b.last + 1):
            assert o not in seen
            seen[o] = b.types[0]
    assert seen == {o: int(t) for o, t in acks.items()}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("accept", A),
        ("ACCEPT", A),
        ("Release", R),
        ("reject", J),
        ("renew", N),
        (AcknowledgeType.ACCEPT, A),
        (AcknowledgeType.RENEW, N),
    ],
)
def test_ack_type_parses_names_and_members(value: object, expected: AcknowledgeType) -> None:
    assert ack_type(value) is expected


@pytest.mark.parametrize("value", ["gap", AcknowledgeType.GAP, "maybe", "", 1, None, b"accept"])
def test_ack_type_refuses_others(value: object) -> None:
    with pytest.raises(KafkaConfigError, match="acknowledgement type"):
        ack_type(value)


def test_ackbook_acquire_acknowledge_and_take_pending() -> None:
    book = AckBook()
    book.acquired(TP0, 1, range(10, 15))
    book.acquired(TP1, 2, [3])
    assert book.holds(TP0, 12) and not book.holds(TP0, 15) and not book.holds(TP1, 4)
    assert book.node_of(TP0) == 1 and book.node_of(TP1) == 2
    assert book.node_of(TopicPartition("x", 0)) is None
    book.acknowledge(TP0, 10, A)
    book.acknowledge(TP0, 11, R)
    book.acknowledge(TP0, 12, N)  # renew keeps it acquired
    assert not book.holds(TP0, 10) and not book.holds(TP0, 11) and book.holds(TP0, 12)
    assert book.held() == {TP0: frozenset({12, 13, 14}), TP1: frozenset({3})}
    assert book.has_pending() and book.has_pending(1) and not book.has_pending(2)
    assert book.nodes_with_pending() == {1}
    assert book.pending_for(2) == {}
    assert book.pending_for(1) == {TP0: {10: A, 11: R, 12: N}}
    # taken: in flight now, not again
    assert book.pending_for(1) == {} and not book.has_pending()
    book.acknowledge(TP0, 12, A)  # accepted after the renewal
    assert book.pending_for(1) == {TP0: {12: A}}


def test_ackbook_refuses_offsets_it_does_not_hold() -> None:
    book = AckBook()
    with pytest.raises(KafkaConfigError, match="not a record this consumer holds"):
        book.acknowledge(TP0, 0, A)
    book.acquired(TP0, 1, [0])
    book.acknowledge(TP0, 0, A)
    with pytest.raises(KafkaConfigError):
        book.acknowledge(TP0, 0, A)  # twice
    with pytest.raises(KafkaConfigError):
        book.acknowledge(TP0, 1, A)


def test_ackbook_new_leader_starts_the_partition_afresh() -> None:
    book = AckBook()
    book.acquired(TP0, 1, [0, 1])
    book.acquired(TP0, 2, [5])  # acquired from another leader: the old ones are gone
    assert book.node_of(TP0) == 2 and book.held() == {TP0: frozenset({5})}


def test_ackbook_forget_node_returns_pending_and_drops_acquired() -> None:
    book = AckBook()
    book.acquired(TP0, 1, range(5))
    book.acquired(TP1, 1, range(3))
    other = TopicPartition("u", 0)
    book.acquired(other, 2, [7])
    book.acknowledge(TP0, 0, A)
    book.acknowledge(other, 7, R)
    lost = book.forget_node(1)
    assert lost == {TP0: {0: A}}  # TP1 had nothing pending
    assert book.node_of(TP0) is None and book.node_of(TP1) is None
    assert not book.holds(TP0, 1)
    assert book.held() == {}
    assert book.pending_for(2) == {other: {7: R}}
    assert book.forget_node(1) == {}


def test_ackbook_drop() -> None:
    book = AckBook()
    book.acquired(TP0, 1, [1])
    part = book.drop(TP0)
    assert part is not None and part.acquired == {1}
    assert book.drop(TP0) is None
