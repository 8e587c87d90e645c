"""The consumer's own options (Java names in snake_case), checked at construction."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from aiokproto.consumer.budget import DEFAULT_FETCH_BUFFER_MAX_BYTES
from aiokproto.errors import KafkaConfigError
from aiokproto.serialization import refuse_async_plain

Deserializer = Callable[[bytes | None], Any]

READ_UNCOMMITTED = 0
READ_COMMITTED = 1
_ISOLATION = {"read_uncommitted": READ_UNCOMMITTED, "read_committed": READ_COMMITTED}
_RESETS = ("earliest", "latest", "none")

# The group options (GroupConfig's fields, per the consumer/group interface). The group
# package's own GROUP_OPTIONS is used when it is importable; this is the fallback so
# that a consumer without a group does not import it.
_GROUP_OPTION_NAMES = frozenset(
    {
        "group_instance_id",
        "session_timeout_ms",
        "heartbeat_interval_ms",
        "max_poll_interval_ms",
        "rebalance_timeout_ms",
        "enable_auto_commit",
        "auto_commit_interval_ms",
        "partition_assignment_strategy",
        "exclude_internal_topics",
        "group_protocol",
        "group_remote_assignor",
    }
)


def group_option_names() -> frozenset[str]:
    try:
        from aiokproto.consumer.group.group_config import GROUP_OPTIONS
    except ImportError:
        return _GROUP_OPTION_NAMES
    return frozenset(GROUP_OPTIONS) - {"group_id", "client_rack"}


@dataclass(frozen=True, slots=True)
class ConsumerConfig:
    """Fetching and position options; group options live in ``GroupConfig``."""

    group_id: str | None = None
    auto_offset_reset: str = "latest"
    fetch_min_bytes: int = 1
    fetch_max_wait_ms: int = 500
    fetch_max_bytes: int = 52_428_800
    max_partition_fetch_bytes: int = 1_048_576
    #: all fetched data not yet handed out, across brokers and partitions, plus the
    #: fetches in flight (librdkafka's queued.max.messages.kbytes; Java has none)
    fetch_buffer_max_bytes: int = DEFAULT_FETCH_BUFFER_MAX_BYTES
    max_poll_records: int = 500
    isolation_level: str = "read_uncommitted"
    check_crcs: bool = True
    client_rack: str | None = None
    key_deserializer: Deserializer | None = None
    value_deserializer: Deserializer | None = None
    #: False: commits without explicit offsets (auto-commit included) commit what
    #: ``store_offsets()`` stored, not the positions (confluent-kafka's
    #: ``enable.auto.offset.store``)
    enable_auto_offset_store: bool = True

    def __post_init__(self) -> None:
        if self.group_id is not None and (not isinstance(self.group_id, str) or not self.group_id):
            raise KafkaConfigError(
                f"group_id must be a non-empty str or None, not {self.group_id!r}"
            )
        if self.auto_offset_reset not in _RESETS:
            raise KafkaConfigError(
                f"auto_offset_reset must be one of {', '.join(_RESETS)}, "
                f"not {self.auto_offset_reset!r}"
            )
        if self.isolation_level not in _ISOLATION:
            raise KafkaConfigError(
                "isolation_level must be 'read_uncommitted' or 'read_committed', "
                f"not {self.isolation_level!r}"
            )
        for name, low in (
            ("fetch_min_bytes", 0),
            ("fetch_max_wait_ms", 0),
            ("fetch_max_bytes", 1),
            ("max_partition_fetch_bytes", 1),
            ("fetch_buffer_max_bytes", 1),
            ("max_poll_records", 1),
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise KafkaConfigError(f"{name} must be an int >= {low}, not {value!r}")
        for name in ("check_crcs", "enable_auto_offset_store"):
            if not isinstance(getattr(self, name), bool):
                raise KafkaConfigError(f"{name} must be a bool, not {getattr(self, name)!r}")
        if self.client_rack is not None and not isinstance(self.client_rack, str):
            raise KafkaConfigError(f"client_rack must be a str or None, not {self.client_rack!r}")
        for name in ("key_deserializer", "value_deserializer"):
            value = getattr(self, name)
            if value is not None and not callable(value):
                raise KafkaConfigError(f"{name} must be callable, not {value!r}")
            refuse_async_plain(name, value)

    @property
    def isolation(self) -> int:
        return _ISOLATION[self.isolation_level]


CONSUMER_OPTIONS = frozenset(f.name for f in fields(ConsumerConfig))
