"""The Producer's own options (Java's names in snake_case), validated at construction,
idempotence conflicts included."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from aiokproto.config import ClientConfig
from aiokproto.errors import KafkaConfigError, KafkaError
from aiokproto.producer.partitioner import PartitionerFn
from aiokproto.records import compression
from aiokproto.serialization import refuse_async_plain

Serializer = Callable[[Any], bytes | None]

PRODUCER_OPTIONS = frozenset(
    {
        "acks",
        "enable_idempotence",
        "batch_size",
        "linger_ms",
        "compression_type",
        "compression_level",
        "max_request_size",
        "buffer_memory",
        "max_block_ms",
        "delivery_timeout_ms",
        "retries",
        "partitioner",
        "key_serializer",
        "value_serializer",
        "transactional_id",
        "transaction_timeout_ms",
        "metadata_max_idle_ms",
    }
)

_MAX_IDEMPOTENT_IN_FLIGHT = 5
BATCH_HEADER = 61
#: worst-case varint bytes of one record (length, attributes, deltas, lengths, count)
RECORD_OVERHEAD_BOUND = 5 + 1 + 10 + 5 + 5 + 5 + 5
_RECORD_OVERHEAD = BATCH_HEADER + RECORD_OVERHEAD_BOUND
#: batch_size's default: librdkafka's batch.size, not Java's 16,384. At 16 KB a fast
#: one-partition producer waited on round trips (5 requests of 16 KB in flight: 1 KB
#: values went at 0.13x librdkafka's rate). The batch buffer grows with what is
#: appended, so an idle partition holds no more than its records; a batch stays under
#: the broker's default message.max.bytes (1,048,588) and max_request_size (1 MiB), and
#: a topic with a lower limit gets its batches split (KIP-126).
DEFAULT_BATCH_SIZE: Final = 1_000_000
#: keyless records stick to a partition for this many bytes (Java: batch.size; its
#: default here, so load spreads as Java's does) unless batch_size is set
DEFAULT_STICKY_BYTES: Final = 16_384


@dataclass(frozen=True, slots=True)
class ProducerOptions:
    acks: int = -1
    enable_idempotence: bool = True
    batch_size: int = DEFAULT_BATCH_SIZE
    linger_ms: int = 5
    compression: int = compression.NONE
    compression_level: int | None = None
    max_request_size: int = 1_048_576
    buffer_memory: int = 33_554_432
    max_block_ms: int = 60_000
    delivery_timeout_ms: int = 120_000
    retries: int = 2_147_483_647
    max_in_flight: int = 5
    partitioner: PartitionerFn | None = None
    key_serializer: Serializer | None = None
    value_serializer: Serializer | None = None
    transactional_id: str | None = None
    transaction_timeout_ms: int = 60_000
    #: a topic not sent to for this long is dropped from the producer's metadata
    metadata_max_idle_ms: int = 300_000
    #: bytes of keyless records the uniform sticky partitioner sends to one partition
    #: before moving on: batch_size when set, else DEFAULT_STICKY_BYTES
    sticky_bytes: int = DEFAULT_STICKY_BYTES

    @property
    def max_record_size(self) -> int:
        """Largest encoded record accepted: it must fit one request and the buffer."""
        return min(self.max_request_size, self.buffer_memory)


_INT32_MAX = 2**31 - 1
_MAX_PROTOCOL_STRING = 32_767  # an int16-length string


def _int(
    options: Mapping[str, Any],
    name: str,
    default: int,
    *,
    minimum: int,
    maximum: int = _INT32_MAX,
) -> int:
    """An int option in [minimum, maximum] (Java's int configs: int32 by default)."""
    value = options.get(name, default)
    if not isinstance(value, int) or isinstance(value, bool) or not minimum <= value <= maximum:
        raise KafkaConfigError(
            f"{name} must be an int >= {minimum} and <= {maximum}, not {value!r}"
        )
    return value


def _acks(value: Any) -> int:
    if value in ("all", -1, "-1"):
        return -1
    if value in (0, 1, "0", "1"):
        return int(value)
    raise KafkaConfigError(f"acks must be 0, 1 or 'all' (-1), not {value!r}")


def _callable(options: Mapping[str, Any], name: str) -> Any:
    value = options.get(name)
    if value is not None and not callable(value):
        raise KafkaConfigError(f"{name} must be callable, not {value!r}")
    refuse_async_plain(name, value)
    return value


def parse_producer_options(config: ClientConfig, options: Mapping[str, Any]) -> ProducerOptions:
    """Validate the Producer's own options against each other and the shared config.

    Like Java, idempotence that was not asked for explicitly is turned off by settings
    it cannot work with (acks 0/1, more than 5 requests in flight, retries=0); asked for
    explicitly, the conflict is a ``KafkaConfigError``.
    """
    txn_id = options.get("transactional_id")
    if txn_id is not None and (not isinstance(txn_id, str) or not txn_id):
        raise KafkaConfigError(f"transactional_id must be a non-empty str, not {txn_id!r}")
    if txn_id is not None and len(txn_id.encode()) > _MAX_PROTOCOL_STRING:
        raise KafkaConfigError(
            f"transactional_id is {len(txn_id.encode())} bytes in UTF-8; the protocol "
            f"allows {_MAX_PROTOCOL_STRING}"
        )
    txn_timeout = _int(options, "transaction_timeout_ms", 60_000, minimum=1)
    if txn_id is not None and options.get("enable_idempotence") is False:
        raise KafkaConfigError(
            "transactional_id needs idempotence: remove enable_idempotence=False"
        )
    acks = _acks(options.get("acks", "all"))
    retries = _int(options, "retries", 2_147_483_647, minimum=0)
    in_flight = config.max_in_flight_requests_per_connection
    if not isinstance(in_flight, int) or isinstance(in_flight, bool) or in_flight < 1:
        raise KafkaConfigError(
            f"max_in_flight_requests_per_connection must be an int >= 1, not {in_flight!r}"
        )
    explicit = "enable_idempotence" in options
    idempotence = options.get("enable_idempotence", True)
    if not isinstance(idempotence, bool):
        raise KafkaConfigError(f"enable_idempotence must be a bool, not {idempotence!r}")
    if idempotence:
        conflicts = []
        if acks != -1:
            conflicts.append(f"acks must be 'all' (got {options.get('acks')!r})")
        if in_flight > _MAX_IDEMPOTENT_IN_FLIGHT:
            conflicts.append(
                f"max_in_flight_requests_per_connection must be <= {_MAX_IDEMPOTENT_IN_FLIGHT}"
                f" (got {in_flight})"
            )
        if retries == 0:
            conflicts.append("retries must be > 0")
        if conflicts and txn_id is not None:
            raise KafkaConfigError(
                "transactional_id needs idempotence, which needs: " + "; ".join(conflicts)
            )
        if conflicts and explicit:
            raise KafkaConfigError(
                "enable_idempotence=True needs: "
                + "; ".join(conflicts)
                + ". Fix those options or set enable_idempotence=False."
            )
        if conflicts:
            idempotence = False
    try:
        codec = compression.codec_id(options.get("compression_type", "none"))
    except KafkaError as exc:
        raise KafkaConfigError(f"compression_type: {exc}") from None
    level = options.get("compression_level")
    if level is not None and (not isinstance(level, int) or isinstance(level, bool)):
        raise KafkaConfigError(f"compression_level must be an int or None, not {level!r}")
    max_request_size = _int(options, "max_request_size", 1_048_576, minimum=1)
    # a lower max_request_size (often set to a topic's max.message.bytes) lowers the
    # default batch with it: a default batch is never bigger than a request may be
    batch_default = min(DEFAULT_BATCH_SIZE, max_request_size)
    batch_size = _int(options, "batch_size", batch_default, minimum=1)
    linger_ms = _int(options, "linger_ms", 5, minimum=0)
    buffer_memory = _int(options, "buffer_memory", 33_554_432, minimum=1, maximum=2**63 - 1)
    max_block_ms = _int(options, "max_block_ms", 60_000, minimum=0, maximum=2**63 - 1)
    # Java's bounds: at least 5 s
    idle = _int(options, "metadata_max_idle_ms", 300_000, minimum=5_000, maximum=2**63 - 1)
    delivery_default = max(120_000, linger_ms + config.request_timeout_ms)
    delivery = _int(options, "delivery_timeout_ms", delivery_default, minimum=1)
    if "delivery_timeout_ms" in options and delivery < linger_ms + config.request_timeout_ms:
        raise KafkaConfigError(
            f"delivery_timeout_ms ({delivery}) must be >= linger_ms + request_timeout_ms "
            f"({linger_ms} + {config.request_timeout_ms})"
        )
    if max_request_size < _RECORD_OVERHEAD or buffer_memory < _RECORD_OVERHEAD:
        raise KafkaConfigError(
            f"max_request_size and buffer_memory must be at least {_RECORD_OVERHEAD} bytes"
        )
    return ProducerOptions(
        acks=acks,
        enable_idempotence=idempotence,
        batch_size=batch_size,
        linger_ms=linger_ms,
        compression=codec,
        compression_level=level,
        max_request_size=max_request_size,
        buffer_memory=buffer_memory,
        max_block_ms=max_block_ms,
        delivery_timeout_ms=delivery,
        retries=retries,
        max_in_flight=in_flight,
        partitioner=_callable(options, "partitioner"),
        key_serializer=_callable(options, "key_serializer"),
        value_serializer=_callable(options, "value_serializer"),
        transactional_id=txn_id,
        transaction_timeout_ms=txn_timeout,
        metadata_max_idle_ms=idle,
        sticky_bytes=batch_size if "batch_size" in options else DEFAULT_STICKY_BYTES,
    )
