"""The error classes written by hand: the base ``KafkaError``, the client-side families,
the consumer's own errors and ``BrokerResponseError``, the base of the broker codes.

``aiokproto.errors`` (generated from Kafka's error-code table) re-exports every name
here beside one class per broker code: import errors from there. This module imports
nothing of aiokproto at run time, so ``aiokproto.errors`` can be imported first by
every other module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:  # annotations only
    from collections.abc import Iterable

    from aiokproto.structs import TopicPartition


class KafkaError(Exception):
    """Base of every aiokproto error.

    ``retriable``: the same operation may succeed if tried again.
    ``invalid_metadata``: the client's cluster metadata is stale; refresh, then retry.
    """

    retriable: ClassVar[bool] = False
    invalid_metadata: ClassVar[bool] = False


class KafkaConfigError(KafkaError, ValueError):
    """A configuration value is missing, of the wrong type or out of range."""


class KafkaConnectionError(KafkaError):
    """A connection to a broker failed or died; requests in flight on it were lost."""

    retriable = True


class KafkaTimeoutError(KafkaError, TimeoutError):
    """An operation did not finish within its configured time."""

    retriable = True


class BootstrapError(KafkaConnectionError, KafkaTimeoutError):
    """No bootstrap server answered within ``default_api_timeout_ms``.

    Both a connection error and a timeout, so either ``except`` clause catches it; the
    message names each server tried with its last error, ``__cause__`` is the last
    connection error.
    """


class KafkaProtocolError(KafkaError):
    """Bytes from the peer could not be decoded as the Kafka protocol."""


class CorruptRecordError(KafkaProtocolError):
    """A record batch failed its checksum or has impossible lengths or fields."""


class KafkaAuthenticationError(KafkaError):
    """Authentication with the broker failed (SASL or TLS)."""


class RecordTooLargeError(KafkaError):
    """A record or batch is larger than the client or broker allows."""


class IllegalStateError(KafkaError):
    """The client object was used in a state that does not allow the operation."""


class TransactionAbortedError(KafkaError):
    """The record was not written: its transaction was aborted before it was sent
    (``abort_transaction()``, or ``stop()`` during the transaction)."""


class PurgedError(KafkaError):
    """The record was not written: ``Producer.purge()`` dropped it from the buffer
    before it was sent (confluent-kafka: ``KafkaError._PURGE_QUEUE``)."""


# -- consumer errors (here rather than in aiokproto.consumer, which re-exports them,
# so that aiokproto.errors offers every name without importing the consumer)


class CommitFailedError(KafkaError):
    """A commit cannot succeed: the group rebalanced and some partitions moved.

    The member no longer owns (some of) the partitions whose offsets it tried to
    commit, so another member may already be consuming them. Retrying the same
    commit cannot help; re-read from the committed offsets after the rebalance.
    """

    retriable = False


class NoOffsetForPartitionError(KafkaError):
    """A partition has no position and ``auto_offset_reset="none"`` forbids guessing one.

    ``partitions`` are the partitions concerned; ``seek()`` them (or commit offsets for
    them) and consume again.
    """

    def __init__(self, partitions: Iterable[TopicPartition], why: str) -> None:
        self.partitions = frozenset(partitions)
        names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(self.partitions))
        self._text = (
            f"{why} for {names} and auto_offset_reset='none'; seek() to an offset "
            "or use auto_offset_reset='earliest'/'latest'"
        )
        super().__init__(self._text)
        # args are what the constructor takes, so copying and pickling rebuild it
        self.args = (sorted(self.partitions), why)

    def __str__(self) -> str:
        return self._text


class ConsumerStoppedError(IllegalStateError):
    """The consumer was stopped: ``getone``/``getmany`` (also ones waiting when
    ``stop()`` was called) raise this; ``async for`` just ends."""


class NoGroupError(IllegalStateError):
    """A group operation (commit, committed) on a consumer created without ``group_id``."""


class BrokerResponseError(KafkaError):
    """An error code returned by a broker; ``errno`` is Kafka's code."""

    errno: ClassVar[int] = -1
    description: ClassVar[str] = ""

    def __init__(self, message: str | None = None) -> None:
        # args are what the constructor takes, so copying and pickling rebuild it
        super().__init__(*(() if message is None else (message,)))
        self.broker_message = message

    def __str__(self) -> str:
        text = f"[Error {self.errno}] {type(self).__name__}: {self.description}"
        return f"{text} ({self.broker_message})" if self.broker_message else text
