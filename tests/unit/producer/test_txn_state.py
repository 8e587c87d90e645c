"""The transaction state machine and error classes, without sockets."""

from __future__ import annotations

import itertools

import pytest

from aiokproto.errors import (
    ConcurrentTransactionsError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    GroupAuthorizationFailedError,
    IllegalStateError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    KafkaTimeoutError,
    NotCoordinatorError,
    NotEnoughReplicasError,
    OutOfOrderSequenceNumberError,
    ProducerFencedError,
    TopicAuthorizationFailedError,
    TransactionAbortableError,
    TransactionalIdAuthorizationFailedError,
    UnknownProducerIdError,
)
from aiokproto.producer.txn_state import (
    ALLOWED,
    TRANSITIONS,
    Kind,
    Txn,
    TxnState,
    classify,
    produce_error_is_fatal,
)


def state_in(state: Txn, error: Exception | None = None) -> TxnState:
    s = TxnState()
    s.state = state
    s.error = error  # type: ignore[assignment]
    return s


@pytest.mark.parametrize(("state", "call"), list(itertools.product(Txn, ALLOWED)))
def test_every_call_in_every_state_is_allowed_or_says_why(state: Txn, call: str) -> None:
    fatal = ProducerFencedError("fenced")
    abortable = TopicAuthorizationFailedError("no")
    error = fatal if state is Txn.FATAL_ERROR else abortable
    s = state_in(state, error if state in (Txn.FATAL_ERROR, Txn.ABORTABLE_ERROR) else None)
    if state in ALLOWED[call]:
        s.check(call)
        return
    expected = (
        IllegalStateError,
        ProducerFencedError,
        TopicAuthorizationFailedError,
        TransactionAbortableError,
    )
    with pytest.raises(expected) as info:
        s.check(call)
    if state is Txn.FATAL_ERROR:
        assert info.value is fatal  # the same fatal error, every time
    elif state is Txn.ABORTABLE_ERROR and call == "commit_transaction":
        assert info.value is abortable  # what made the transaction fail
    elif state is Txn.ABORTABLE_ERROR and call == "send":
        # typed, with its cause: the application knows to abort
        assert isinstance(info.value, TransactionAbortableError)
        assert info.value.__cause__ is abortable and "abort_transaction()" in str(info.value)
    else:
        assert isinstance(info.value, IllegalStateError)
        assert call in str(info.value)


def test_transitions_follow_the_table_and_nothing_leaves_fatal() -> None:
    for src, targets in TRANSITIONS.items():
        for dst in Txn:
            s = state_in(src)
            if dst in targets:
                s.move(dst)
                assert s.state is dst
            elif src is Txn.FATAL_ERROR:
                s.move(dst)
                assert s.state is Txn.FATAL_ERROR
            else:
                with pytest.raises(IllegalStateError):
                    s.move(dst)


def test_abortable_keeps_the_first_error_and_fatal_wins() -> None:
    s = state_in(Txn.IN_TRANSACTION)
    first, second = TopicAuthorizationFailedError("a"), KafkaTimeoutError("b")
    s.abortable(first)
    s.abortable(second)
    assert s.state is Txn.ABORTABLE_ERROR and s.error is first
    s.move(Txn.ABORTING)
    s.abortable(second)  # failures while aborting change nothing
    assert s.state is Txn.ABORTING
    s.fatal(ProducerFencedError("x"))
    assert s.state is Txn.FATAL_ERROR
    s.abortable(first)
    s.move(Txn.READY)
    assert s.state is Txn.FATAL_ERROR
    s2 = state_in(Txn.COMMITTING)
    s2.abortable(first)  # a batch failed during the commit's flush
    assert s2.state is Txn.ABORTABLE_ERROR
    s2.move(Txn.ABORTING)
    s2.move(Txn.READY)
    assert s2.error is None


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (NotCoordinatorError, Kind.COORDINATOR_MOVED),
        (CoordinatorNotAvailableError, Kind.COORDINATOR_MOVED),
        (CoordinatorLoadInProgressError, Kind.RETRY),
        (ConcurrentTransactionsError, Kind.RETRY),
        (NotEnoughReplicasError, Kind.RETRY),
        (ProducerFencedError, Kind.FATAL),
        (InvalidProducerEpochError, Kind.FATAL),  # from a coordinator: fenced
        (TransactionalIdAuthorizationFailedError, Kind.FATAL),
        (InvalidTxnStateError, Kind.FATAL),
        (UnknownProducerIdError, Kind.ABORTABLE),
        (TopicAuthorizationFailedError, Kind.ABORTABLE),
        (GroupAuthorizationFailedError, Kind.ABORTABLE),
        (TransactionAbortableError, Kind.ABORTABLE),
    ],
)
def test_coordinator_errors_are_classified_as_java_does(error: type, kind: Kind) -> None:
    assert classify(error.errno) is kind


def test_produce_errors_are_fatal_only_when_the_producer_cannot_go_on() -> None:
    assert produce_error_is_fatal(ProducerFencedError("x"))
    assert produce_error_is_fatal(TransactionalIdAuthorizationFailedError("x"))
    # KIP-588: an epoch error from a partition leader is abortable; the abort's EndTxn
    # then tells whether the producer was fenced
    assert not produce_error_is_fatal(InvalidProducerEpochError("x"))
    assert not produce_error_is_fatal(OutOfOrderSequenceNumberError("x"))
    assert not produce_error_is_fatal(KafkaTimeoutError("x"))
