"""The transactional producer's state machine and error rules (pure, no I/O): Java's
states and legal calls, error classes (retry, coordinator moved, abortable, fatal).

States follow Java's ``TransactionManager``. A user call is allowed in some states
only (``TxnState.check``); an answer's error code is one of four kinds (``classify``):
retried (with the coordinator looked up again when it moved), abortable (this
transaction must be aborted, the producer goes on), or fatal (the producer must be
closed; every later call raises the same error).
"""

from __future__ import annotations

import enum

from aiokproto.errors import (
    BrokerResponseError,
    ClusterAuthorizationFailedError,
    ConcurrentTransactionsError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    IllegalStateError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    KafkaError,
    NotCoordinatorError,
    ProducerFencedError,
    TransactionAbortableError,
    TransactionalIdAuthorizationFailedError,
    TransactionCoordinatorFencedError,
    UnknownProducerIdError,
    UnsupportedForMessageFormatError,
    UnsupportedVersionError,
    for_code,
)


class Txn(enum.Enum):
    UNINITIALIZED = "uninitialized"
    INITIALIZING = "initializing"
    READY = "ready"
    IN_TRANSACTION = "in transaction"
    COMMITTING = "committing"
    ABORTING = "aborting"
    ABORTABLE_ERROR = "abortable error"
    FATAL_ERROR = "fatal error"


#: state -> states it may move to
TRANSITIONS: dict[Txn, frozenset[Txn]] = {
    Txn.UNINITIALIZED: frozenset({Txn.INITIALIZING}),
    Txn.INITIALIZING: frozenset({Txn.READY}),
    Txn.READY: frozenset({Txn.IN_TRANSACTION}),
    Txn.IN_TRANSACTION: frozenset({Txn.COMMITTING, Txn.ABORTING, Txn.ABORTABLE_ERROR}),
    Txn.COMMITTING: frozenset({Txn.READY, Txn.ABORTABLE_ERROR}),
    Txn.ABORTING: frozenset({Txn.READY}),
    Txn.ABORTABLE_ERROR: frozenset({Txn.ABORTING}),
    Txn.FATAL_ERROR: frozenset(),
}

#: user call -> states it is allowed in (a retried commit/abort finds its own state)
ALLOWED: dict[str, frozenset[Txn]] = {
    "begin_transaction": frozenset({Txn.READY}),
    "send": frozenset({Txn.IN_TRANSACTION}),
    "send_offsets_to_transaction": frozenset({Txn.IN_TRANSACTION}),
    "commit_transaction": frozenset({Txn.IN_TRANSACTION, Txn.COMMITTING}),
    "abort_transaction": frozenset({Txn.IN_TRANSACTION, Txn.ABORTABLE_ERROR, Txn.ABORTING}),
}

_HINT = {
    Txn.UNINITIALIZED: "start() the Producer first",
    Txn.INITIALIZING: "start() has not finished",
    Txn.READY: "call begin_transaction() first",
    Txn.IN_TRANSACTION: "a transaction is open: commit or abort it first",
    Txn.COMMITTING: "the transaction is being committed: call commit_transaction() again",
    Txn.ABORTING: "the transaction is being aborted: call abort_transaction() again",
    Txn.ABORTABLE_ERROR: "the transaction failed: abort_transaction() it",
}


class TxnState:
    """The current state, the error that put it there, and the transitions."""

    __slots__ = ("error", "state")

    def __init__(self) -> None:
        self.state = Txn.UNINITIALIZED
        self.error: KafkaError | None = None

    def move(self, to: Txn) -> None:
        if self.state is Txn.FATAL_ERROR:
            return  # nothing leaves it
        if to not in TRANSITIONS[self.state]:
            raise IllegalStateError(f"transaction state {self.state.value} -> {to.value}")
        self.state = to
        if to in (Txn.READY, Txn.IN_TRANSACTION):
            self.error = None

    def abortable(self, error: KafkaError) -> None:
        """This transaction can no longer commit; the first such error is kept."""
        if self.state in (Txn.IN_TRANSACTION, Txn.COMMITTING):
            self.state = Txn.ABORTABLE_ERROR
            self.error = error
        elif self.state is Txn.ABORTABLE_ERROR and self.error is None:
            self.error = error

    def abortable_error(self, call: str) -> TransactionAbortableError:
        """What ``call`` raises once the transaction is abortable: a
        ``TransactionAbortableError`` whose ``__cause__`` is what made it so."""
        error = self.error
        out = TransactionAbortableError(
            f"{call}(): the transaction failed ({type(error).__name__}: {error}); "
            "abort_transaction() it, then begin a new one"
        )
        out.__cause__ = error
        return out

    def fatal(self, error: KafkaError) -> None:
        if self.state is not Txn.FATAL_ERROR:
            self.state = Txn.FATAL_ERROR
            self.error = error

    def check(self, call: str) -> None:
        """Raise why ``call`` is not allowed now: the fatal or abortable error itself,
        else ``IllegalStateError`` saying what to do."""
        state = self.state
        if state in ALLOWED[call]:
            return
        error = self.error
        if state is Txn.FATAL_ERROR and error is not None:
            raise error.with_traceback(None)
        if state is Txn.ABORTABLE_ERROR and error is not None and call == "commit_transaction":
            raise error.with_traceback(None)  # what made the transaction fail
        if state is Txn.ABORTABLE_ERROR and error is not None and call == "send":
            raise self.abortable_error(call)
        if state is Txn.ABORTABLE_ERROR and error is not None and call != "begin_transaction":
            raise IllegalStateError(
                f"{call}(): the transaction failed ({type(error).__name__}: {error}); "
                "abort_transaction() it"
            ) from error
        raise IllegalStateError(f"{call}() in state {state.value}: {_HINT[state]}")


class Kind(enum.Enum):
    RETRY = "retry"  # back off and send again
    COORDINATOR_MOVED = "coordinator moved"  # look the coordinator up again, then retry
    ABORTABLE = "abortable"
    FATAL = "fatal"


_MOVED = frozenset({NotCoordinatorError.errno, CoordinatorNotAvailableError.errno})
_RETRY = frozenset({CoordinatorLoadInProgressError.errno, ConcurrentTransactionsError.errno})
#: fatal in an answer of the transaction or group coordinator (Java's handlers). An
#: epoch error there means another producer took the transactional id.
_FATAL = frozenset(
    {
        ProducerFencedError.errno,
        InvalidProducerEpochError.errno,
        TransactionCoordinatorFencedError.errno,
        TransactionalIdAuthorizationFailedError.errno,
        ClusterAuthorizationFailedError.errno,
        InvalidTxnStateError.errno,
        InvalidProducerIdMappingError.errno,
        InvalidTransactionTimeoutError.errno,
        UnsupportedVersionError.errno,
        UnsupportedForMessageFormatError.errno,
    }
)
#: fatal in a Produce answer; every other Produce error only makes the transaction
#: abortable (an epoch error there too, KIP-588: the abort then learns if it was fenced)
_FATAL_PRODUCE = frozenset(
    {
        ProducerFencedError.errno,
        TransactionalIdAuthorizationFailedError.errno,
        ClusterAuthorizationFailedError.errno,
        UnsupportedVersionError.errno,
        UnsupportedForMessageFormatError.errno,
    }
)


def classify(code: int) -> Kind:
    """The kind of a coordinator's error code (not 0) for a transactional request.

    UNKNOWN_PRODUCER_ID is abortable (the abort gets a fresh epoch); so is every
    other code that cannot be retried and is not fatal (TRANSACTION_ABORTABLE, topic
    or group authorization, a member the group moved past...)."""
    if code in _MOVED:
        return Kind.COORDINATOR_MOVED
    if code in _RETRY:
        return Kind.RETRY
    if code in _FATAL:
        return Kind.FATAL
    if code == UnknownProducerIdError.errno:
        return Kind.ABORTABLE
    return Kind.RETRY if for_code(code).retriable else Kind.ABORTABLE


def produce_error_is_fatal(error: KafkaError) -> bool:
    """Whether a Produce error inside a transaction ends the producer (else it only
    makes the transaction abortable)."""
    return isinstance(error, BrokerResponseError) and error.errno in _FATAL_PRODUCE
