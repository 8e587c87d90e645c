"""The data source's options (Spark's Kafka names), parsed and checked on the driver
before any task runs: subscribe/pattern/assign, batch vs streaming rules.

Names and meanings follow Spark's built-in Kafka source so a job switches by changing
the format name. Spark hands options over with lower-cased keys; messages use the
documented camelCase spelling.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aiokproto.errors import KafkaConfigError
from aiokproto.spark.formats import (
    FORMAT_OPTIONS,
    REGISTRY_PREFIX,
    Formats,
    SinkFormats,
    parse_formats,
    parse_sink_formats,
)
from aiokproto.spark.kafka_options import client_options
from aiokproto.spark.offsets import (
    EARLIEST,
    LATEST,
    Bound,
    ByTimestamp,
    Earliest,
    Latest,
    Specific,
    assignment_from_json,
    parse_bound,
)
from aiokproto.structs import TopicPartition

#: the data source's short name, ``spark.read.format(FORMAT)``; here (not in the
#: package ``__init__``) so ``datasource.py`` takes it without importing its package
FORMAT = "aiokproto"

# Options Spark itself may add to a data source's map; they mean nothing here.
_SPARK_KEYS = frozenset({"path", "checkpointlocation", "queryname"})

SOURCE_OPTIONS = (
    "subscribe",
    "subscribePattern",
    "assign",
    "startingOffsets",
    "endingOffsets",
    "startingTimestamp",
    "endingTimestamp",
    "startingOffsetsByTimestamp",
    "endingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy",
    "maxOffsetsPerTrigger",
    "minPartitions",
    "failOnDataLoss",
    "includeHeaders",
    "kafkaConsumer.pollTimeoutMs",
    *FORMAT_OPTIONS,
)
SINK_OPTIONS = ("topic", "transactional.id.prefix", *FORMAT_OPTIONS)


@dataclass(frozen=True, slots=True)
class Subscribe:
    topics: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SubscribePattern:
    pattern: str

    def matches(self, topic: str) -> bool:
        # Java's Pattern.matcher(topic).matches(): the whole name must match.
        return re.fullmatch(self.pattern, topic) is not None


@dataclass(frozen=True, slots=True)
class Assign:
    partitions: tuple[TopicPartition, ...]


Subscription = Subscribe | SubscribePattern | Assign


def _check_keys(
    options: Mapping[str, str], allowed: tuple[str, ...], what: str, prefixes: tuple[str, ...]
) -> None:
    known = {name.lower() for name in allowed}
    unknown = sorted(
        k for k in options if not k.startswith(prefixes) and k not in known and k not in _SPARK_KEYS
    )
    if unknown:
        raise KafkaConfigError(
            f"unknown option(s) for the aiokproto {what}: {', '.join(unknown)} "
            f"(known: {', '.join(allowed)} and {' and '.join(p + '*' for p in prefixes)})"
        )


def _get(options: Mapping[str, str], name: str) -> str | None:
    value = options.get(name.lower())
    return None if value is None else str(value)


def _positive(options: Mapping[str, str], name: str) -> int | None:
    text = _get(options, name)
    if text is None:
        return None
    try:
        value = int(text.strip())
    except ValueError:
        raise KafkaConfigError(f"option {name} must be a positive integer, not {text!r}") from None
    if value <= 0:
        raise KafkaConfigError(f"option {name} must be a positive integer, not {value}")
    return value


def _flag(options: Mapping[str, str], name: str, default: bool) -> bool:
    text = _get(options, name)
    if text is None:
        return default
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise KafkaConfigError(f"option {name} must be true or false, not {text!r}")
    return value == "true"


def _subscription(options: Mapping[str, str]) -> Subscription:
    given = [n for n in ("subscribe", "subscribePattern", "assign") if _get(options, n) is not None]
    if len(given) != 1:
        raise KafkaConfigError(
            "give exactly one of the options subscribe, subscribePattern, assign"
            + (f" (got {', '.join(given)})" if given else "")
        )
    (name,) = given
    text = _get(options, name) or ""
    if name == "subscribe":
        topics = tuple(dict.fromkeys(t.strip() for t in text.split(",") if t.strip()))
        if not topics:
            raise KafkaConfigError("option subscribe: give a comma-separated list of topics")
        return Subscribe(topics)
    if name == "subscribePattern":
        if not text.strip():
            raise KafkaConfigError("option subscribePattern is empty")
        try:
            re.compile(text)
        except re.error as exc:
            raise KafkaConfigError(f"option subscribePattern is not a regex: {exc}") from None
        return SubscribePattern(text)
    return Assign(assignment_from_json(text))


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """Everything the source reads from its options (picklable: sent to executors)."""

    client: Mapping[str, Any]
    subscription: Subscription
    starting_given: Bound | None  # None: earliest for batch reads, latest for streams
    ending: Bound
    ending_given: bool
    timestamp_strategy: str
    max_offsets_per_trigger: int | None
    min_partitions: int | None
    fail_on_data_loss: bool
    include_headers: bool
    poll_timeout_ms: int
    # keyFormat/valueFormat avro or json (resolved on the driver: see formats.resolve)
    formats: Formats | None = None

    @property
    def batch_starting(self) -> Bound:
        return Earliest() if self.starting_given is None else self.starting_given

    @property
    def stream_starting(self) -> Bound:
        return Latest() if self.starting_given is None else self.starting_given

    def check_batch(self) -> None:
        """Spark's rules for ``spark.read``: start cannot be latest, end cannot be earliest."""
        start = self.batch_starting
        if isinstance(start, Latest) or (
            isinstance(start, Specific) and LATEST in start.offsets.values()
        ):
            raise KafkaConfigError(
                "startingOffsets cannot be latest (-1) in a batch query; "
                "the range would always be empty"
            )
        if isinstance(self.ending, Earliest) or (
            isinstance(self.ending, Specific) and EARLIEST in self.ending.offsets.values()
        ):
            raise KafkaConfigError("endingOffsets cannot be earliest (-2) in a batch query")

    def check_streaming(self) -> None:
        if self.ending_given:
            raise KafkaConfigError(
                "endingOffsets / endingTimestamp / endingOffsetsByTimestamp are for batch "
                "queries only; a streaming query runs until stopped"
            )


def parse_source_options(options: Mapping[str, str]) -> SourceOptions:
    """Parse and check the reader's options; raises ``KafkaConfigError`` on the first problem."""
    options = {k.lower(): v for k, v in options.items()}
    _check_keys(options, SOURCE_OPTIONS, "source", ("kafka.", REGISTRY_PREFIX))
    client = client_options(options, "consumer")
    subscription = _subscription(options)
    starting = parse_bound(
        _get(options, "startingOffsets"),
        _get(options, "startingOffsetsByTimestamp"),
        _get(options, "startingTimestamp"),
        prefix="starting",
        default=Latest(),  # unused: starting_given stays None when nothing was given
    )
    ending = parse_bound(
        _get(options, "endingOffsets"),
        _get(options, "endingOffsetsByTimestamp"),
        _get(options, "endingTimestamp"),
        prefix="ending",
        default=Latest(),
    )
    ending_given = any(
        _get(options, n) is not None
        for n in ("endingOffsets", "endingOffsetsByTimestamp", "endingTimestamp")
    )
    starting_given = any(
        _get(options, n) is not None
        for n in ("startingOffsets", "startingOffsetsByTimestamp", "startingTimestamp")
    )
    if isinstance(subscription, Assign):
        for bound in (starting, ending):
            named = (
                bound.offsets
                if isinstance(bound, Specific)
                else bound.timestamps
                if isinstance(bound, ByTimestamp)
                else {}
            )
            extra = sorted(set(named) - set(subscription.partitions))
            if extra:
                raise KafkaConfigError(
                    f"offsets name partitions that are not assigned: {extra}; "
                    "list the same partitions as the assign option"
                )
    strategy = (_get(options, "startingOffsetsByTimestampStrategy") or "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise KafkaConfigError(
            f"option startingOffsetsByTimestampStrategy must be error or latest, not {strategy!r}"
        )
    return SourceOptions(
        client=client,
        subscription=subscription,
        starting_given=starting if starting_given else None,
        ending=ending,
        ending_given=ending_given,
        timestamp_strategy=strategy,
        max_offsets_per_trigger=_positive(options, "maxOffsetsPerTrigger"),
        min_partitions=_positive(options, "minPartitions"),
        fail_on_data_loss=_flag(options, "failOnDataLoss", True),
        include_headers=_flag(options, "includeHeaders", False),
        poll_timeout_ms=_positive(options, "kafkaConsumer.pollTimeoutMs") or 120_000,
        formats=parse_formats(options, _topics(subscription)),
    )


def _topics(subscription: Subscription) -> tuple[str, ...] | None:
    """The topics read (None: a pattern, not known on the driver ahead of time)."""
    if isinstance(subscription, Subscribe):
        return subscription.topics
    if isinstance(subscription, Assign):
        return tuple(tp.topic for tp in subscription.partitions)
    return None


# The sink's producer batches up to this many bytes per partition unless
# kafka.batch.size says otherwise: it writes in bulk, and at the producer's 16 KB
# (Java's default) the per-batch work (requests, responses, metrics) cost about a third
# of its CPU per row (benchmarks/spark_sink_bench.py), and the broker's per-batch work
# grows with it. librdkafka's own default is 1 MB.
SINK_BATCH_SIZE = 262_144


@dataclass(frozen=True, slots=True)
class SinkOptions:
    client: Mapping[str, Any]
    topic: str | None
    # each task writes in one transaction, as "<prefix>-<partition id>" (None: plain
    # at-least-once writes)
    transactional_id_prefix: str | None = None
    # keyFormat/valueFormat avro or json (resolved on the driver: formats.resolve_sink)
    formats: SinkFormats | None = None


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    options = {k.lower(): v for k, v in options.items()}
    _check_keys(options, SINK_OPTIONS, "sink", ("kafka.", REGISTRY_PREFIX))
    client = client_options(options, "producer")
    client.setdefault(
        "batch_size", min(SINK_BATCH_SIZE, client.get("max_request_size", SINK_BATCH_SIZE))
    )
    topic = _get(options, "topic")
    if topic is not None and not topic.strip():
        raise KafkaConfigError("option topic is empty")
    prefix = _get(options, "transactional.id.prefix")
    if prefix is not None and not prefix.strip():
        raise KafkaConfigError("option transactional.id.prefix is empty")
    return SinkOptions(
        client=client,
        topic=topic.strip() if topic else None,
        transactional_id_prefix=prefix.strip() if prefix else None,
        formats=parse_sink_formats(options, topic.strip() if topic else None),
    )
