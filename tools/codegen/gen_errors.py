"""Generate ``aiokproto/errors.py`` from Kafka's error-code table.

Run through ``python -m tools.codegen`` (see ``__main__.py``); the table is the copy
kept in ``tools/codegen/specs/errors.tsv`` so the build needs nothing outside
the repository. Only the table's part is generated: one class per broker code (with
``error_messages.tsv``'s description), ``ERROR_CLASSES``/``for_code`` and aiokafka's
aliases. The classes written by hand (``KafkaError``, the client-side families, the
consumer's errors, ``BrokerResponseError``) live in ``aiokproto/error_families.py``,
linted and type-checked like any module; errors.py re-exports every class defined
there (read with ``ast``, not imported) and lists all its names in ``__all__``.
"""

from __future__ import annotations

import ast
import csv
from pathlib import Path

# Errors after which the client's view of partition leadership is stale; the
# metadata cache refreshes when it sees one.
INVALID_METADATA = {
    "UNKNOWN_TOPIC_OR_PARTITION",
    "LEADER_NOT_AVAILABLE",
    "NOT_LEADER_OR_FOLLOWER",
    "KAFKA_STORAGE_ERROR",
    "FENCED_LEADER_EPOCH",
    "UNKNOWN_LEADER_EPOCH",
    "UNKNOWN_TOPIC_ID",
    "INCONSISTENT_TOPIC_ID",
    "BROKER_NOT_AVAILABLE",
    "REPLICA_NOT_AVAILABLE",
}

# Broker codes that are also an instance of a client-side family, so callers can
# catch the family whichever side detected the problem.
EXTRA_BASES = {
    "SASL_AUTHENTICATION_FAILED": "KafkaAuthenticationError",
    "UNSUPPORTED_SASL_MECHANISM": "KafkaAuthenticationError",
    "ILLEGAL_SASL_STATE": "KafkaAuthenticationError",
    "MESSAGE_TOO_LARGE": "RecordTooLargeError",
    "RECORD_LIST_TOO_LARGE": "RecordTooLargeError",
    "CORRUPT_MESSAGE": "CorruptRecordError",
}

# aiokafka's names for our classes, so code moving from aiokafka can keep its
# ``except`` clauses: alias -> (target class, why that target). Each target is the
# class that catches everything aiokafka raised under that name.
AIOKAFKA_ALIASES = {
    "MessageSizeTooLargeError": (
        "RecordTooLargeError",
        "aiokafka raises it for a record over max_request_size and for code 10 alike",
    ),
    "InvalidMessageError": (
        "CorruptRecordError",
        "aiokafka's alias of CORRUPT_MESSAGE, which it also raises for a bad CRC",
    ),
    "ProducerFenced": (
        "ProducerFencedError",
        "PRODUCER_FENCED (aiokafka raised it for INVALID_PRODUCER_EPOCH, a class of its own)",
    ),
    "IllegalOperation": (
        "NoGroupError",
        "aiokafka raises it only for commit()/committed() without group_id",
    ),
    "CorruptRecordException": (
        "CorruptRecordError",
        "aiokafka's class for CORRUPT_MESSAGE; the family also catches a bad CRC",
    ),
    # client-side situations: the class aiokproto raises where aiokafka raised the name
    "KafkaConfigurationError": ("KafkaConfigError", "a bad option or argument"),
    "IllegalArgumentError": ("KafkaConfigError", "a bad argument (aiokafka: NewTopic)"),
    "AuthenticationFailedError": ("KafkaAuthenticationError", "authentication failed"),
    "AuthenticationMethodNotSupported": (
        "UnsupportedSaslMechanismError",
        "the broker does not enable the SASL mechanism (SaslHandshake answers code 33)",
    ),
    "CorrelationIdError": (
        "KafkaProtocolError",
        "a response out of order; the connection is closed",
    ),
    "NodeNotReadyError": (
        "KafkaConnectionError",
        "no usable connection to the broker (aiokafka: not connected yet or failed)",
    ),
    "KafkaUnavailableError": ("KafkaConnectionError", "no broker could be reached"),
    "NoBrokersAvailable": ("BootstrapError", "no bootstrap server answered"),
    "IncompatibleBrokerVersion": (
        "UnsupportedVersionError",
        "the broker lacks a request version the call needs",
    ),
    "UnsupportedCodecError": (
        "UnsupportedCompressionTypeError",
        "a compression codec that cannot be used",
    ),
    "ProducerClosed": (
        "IllegalStateError",
        "send() on a stopped Producer raises IllegalStateError",
    ),
    # aiokafka's names for broker error codes (some are Kafka's older names)
    "ConcurrentTransactions": ("ConcurrentTransactionsError", "code 51"),
    "DelegationTokenAuthDisabled": ("DelegationTokenAuthDisabledError", "code 61"),
    "DelegationTokenAuthorizationFailed": (
        "DelegationTokenAuthorizationFailedError",
        "code 65",
    ),
    "DelegationTokenExpired": ("DelegationTokenExpiredError", "code 66"),
    "DelegationTokenNotFound": ("DelegationTokenNotFoundError", "code 62"),
    "DelegationTokenOwnerMismatch": ("DelegationTokenOwnerMismatchError", "code 63"),
    "DelegationTokenRequestNotAllowed": ("DelegationTokenRequestNotAllowedError", "code 64"),
    "DuplicateSequenceNumber": ("DuplicateSequenceNumberError", "code 46"),
    "FetchSessionIdNotFound": ("FetchSessionIdNotFoundError", "code 70"),
    "GroupCoordinatorNotAvailableError": ("CoordinatorNotAvailableError", "code 15"),
    "GroupIdNotFound": ("GroupIdNotFoundError", "code 69"),
    "GroupLoadInProgressError": ("CoordinatorLoadInProgressError", "code 14"),
    "InvalidConfigurationError": ("InvalidConfigError", "code 40"),
    "InvalidFetchRequestError": ("InvalidFetchSizeError", "code 4"),
    "InvalidFetchSessionEpoch": ("InvalidFetchSessionEpochError", "code 71"),
    "InvalidPrincipalType": ("InvalidPrincipalTypeError", "code 67"),
    "InvalidProducerEpoch": ("InvalidProducerEpochError", "code 47"),
    "InvalidProducerIdMapping": ("InvalidProducerIdMappingError", "code 49"),
    "InvalidReplicationAssignmentError": ("InvalidReplicaAssignmentError", "code 39"),
    "InvalidTransactionTimeout": ("InvalidTransactionTimeoutError", "code 50"),
    "InvalidTxnState": ("InvalidTxnStateError", "code 48"),
    "KafkaStorageError": ("KafkaStorageErrorError", "code 56"),
    "ListenerNotFound": ("ListenerNotFoundError", "code 72"),
    "LogDirNotFound": ("LogDirNotFoundError", "code 57"),
    "MemberIdRequired": ("MemberIdRequiredError", "code 79"),
    "NonEmptyGroup": ("NonEmptyGroupError", "code 68"),
    "NotCoordinatorForGroupError": ("NotCoordinatorError", "code 16"),
    "NotLeaderForPartitionError": ("NotLeaderOrFollowerError", "code 6"),
    "OperationNotAttempted": ("OperationNotAttemptedError", "code 55"),
    "OutOfOrderSequenceNumber": ("OutOfOrderSequenceNumberError", "code 45"),
    "ReassignmentInProgress": ("ReassignmentInProgressError", "code 60"),
    "SaslAuthenticationFailed": ("SaslAuthenticationFailedError", "code 58"),
    "SecurityDisabled": ("SecurityDisabledError", "code 54"),
    "StaleLeaderEpochCodeError": ("NetworkError", "code 13 (Kafka's NETWORK_EXCEPTION)"),
    "TransactionCoordinatorFenced": ("TransactionCoordinatorFencedError", "code 52"),
    "TransactionalIdAuthorizationFailed": (
        "TransactionalIdAuthorizationFailedError",
        "code 53",
    ),
    "UnknownError": ("UnknownServerErrorError", "code -1"),
    "UnknownProducerId": ("UnknownProducerIdError", "code 59"),
}

# aiokafka.errors names with no meaning here, deliberately absent: an ``except``
# clause for them could never match, so an ImportError says so at once.
AIOKAFKA_NOT_PROVIDED = {
    "NoError": "code 0 is not an error (raise_for_code(0) returns quietly)",
    "Cancelled": "kafka-python's cancelled request; a cancelled call raises CancelledError",
    "StaleMetadata": "aiokafka's internal retry signal; metadata is refreshed and retried",
    "MetadataEmptyBrokerList": "aiokafka's internal metadata-update failure",
    "TooManyInFlightRequests": "requests queue for a free slot instead",
    "UnrecognizedBrokerVersion": "API versions are negotiated, never guessed",
    "QuotaViolationError": "kafka-python's client-side metrics quota; there is none here",
}

# The hand-written classes (base, client-side families, consumer errors, the broker
# errors' base): errors.py re-exports each of them, then adds the broker codes.
FAMILIES = Path(__file__).resolve().parents[2] / "aiokproto" / "error_families.py"

HEADER = '''\
"""Every error a user of aiokproto can see.

GENERATED by ``python -m tools.codegen`` from Kafka's error-code table; do not edit.
The client-side families and the consumer's own errors are written by hand in
``aiokproto/error_families.py`` and re-exported here; then come one class per broker
error code and aiokafka's names for some classes (aliases of the same class).
"""

from __future__ import annotations

'''

FOOTER = '''

def for_code(code: int) -> type[BrokerResponseError]:
    """The exception class for a broker error code (``UnknownBrokerError`` if new)."""
    return ERROR_CLASSES.get(code, UnknownBrokerError)


def raise_for_code(code: int, message: str | None = None) -> None:
    """Raise the typed error for ``code``; return quietly for 0 (no error)."""
    if code:
        raise for_code(code)(message)
'''


def class_name(name: str) -> str:
    base = name.removesuffix("_EXCEPTION")
    return "".join(part.capitalize() for part in base.split("_")) + "Error"


MESSAGES = Path(__file__).with_name("error_messages.tsv")


def _messages() -> dict[int, str]:
    with MESSAGES.open(encoding="utf-8") as f:
        return {int(r["code"]): r["message"] for r in csv.DictReader(f, delimiter="\t")}


def family_names(path: Path = FAMILIES) -> list[str]:
    """The classes ``error_families.py`` defines, in its order (read, not imported)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [node.name for node in tree.body if isinstance(node, ast.ClassDef)]


def render(tsv: Path) -> str:
    """The text of ``aiokproto/errors.py``; every code needs a message of our own."""
    with tsv.open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    messages = _messages()
    families = family_names()
    out = [HEADER, "from aiokproto.error_families import ("]
    out += [f"    {name}," for name in families]
    out.append(")\n\n")
    table: list[tuple[int, str]] = []
    for row in rows:
        code, name = int(row["code"]), row["name"]
        if code == 0:
            continue
        cls = class_name(name)
        bases = ["BrokerResponseError"]
        if name in EXTRA_BASES:
            bases.insert(0, EXTRA_BASES[name])
        if code not in messages:
            raise SystemExit(f"error code {code} ({name}) has no message in {MESSAGES.name}")
        desc = messages[code]
        out.append(f"class {cls}({', '.join(bases)}):")
        out.append(f'    """Kafka error {code}, {name}."""\n')
        out.append(f"    errno = {code}")
        out.append(
            f"    description = (\n        {desc!r}\n    )"
            if len(desc) > 80
            else f"    description = {desc!r}"
        )
        out.append(f"    retriable = {row['retriable'] == 'yes'}")
        if name in INVALID_METADATA:
            out.append("    invalid_metadata = True")
        out.append("\n")
        table.append((code, cls))
    out.append("class UnknownBrokerError(BrokerResponseError):")
    out.append('    """A code this client does not know (a newer broker)."""\n')
    out.append('    description = "an error code unknown to this client"\n\n')
    out.append("ERROR_CLASSES: dict[int, type[BrokerResponseError]] = {")
    out.extend(f"    {code}: {cls}," for code, cls in table)
    out.append("}")
    out.append(_aliases(out, families))
    # __all__ re-exports the hand-written classes (mypy --strict) and says what is public
    public = [*families, *(cls for _, cls in table), "UnknownBrokerError", "ERROR_CLASSES"]
    public += [*AIOKAFKA_ALIASES, "for_code", "raise_for_code"]
    public.sort(key=lambda n: (not n.isupper(), not n[0].isupper(), n))  # ruff's RUF022
    footer = FOOTER + "\n\n__all__ = [\n" + "".join(f"    {n!r},\n" for n in public) + "]\n"
    return "\n".join(out).replace("\n\n\n\n", "\n\n\n") + footer


def _aliases(rendered: list[str], families: list[str]) -> str:
    """The aiokafka names, each bound to a class defined or imported above it."""
    text = "\n".join(rendered)
    lines = ["\n", "# aiokafka's names for the same classes (AIOKAFKA_ALIASES in the generator)."]
    for alias, (target, why) in AIOKAFKA_ALIASES.items():
        if f"\nclass {target}(" not in text and target not in families:
            raise SystemExit(f"alias {alias} names {target}, which errors.py does not define")
        lines += [f"# {why}", f"{alias} = {target}"]
    return "\n".join(lines)
