"""Consumer group options (Java's names in snake_case), validated at construction."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

from aiokproto.errors import KafkaConfigError

if TYPE_CHECKING:
    from aiokproto.consumer.group.assignors import Assignor


#: the values of ``group_protocol``
GROUP_PROTOCOLS = ("classic", "consumer")

#: options of the classic protocol only: with group_protocol="consumer" the broker
#: decides the session, the heartbeat interval and the assignor (as in Java, setting
#: one of them is a configuration error)
CLASSIC_ONLY_OPTIONS = (
    "partition_assignment_strategy",
    "session_timeout_ms",
    "heartbeat_interval_ms",
)


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """How a consumer takes part in a group (classic protocol)."""

    group_id: str
    group_instance_id: str | None = None
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 3_000
    max_poll_interval_ms: int = 300_000
    rebalance_timeout_ms: int | None = None
    enable_auto_commit: bool = True
    auto_commit_interval_ms: int = 5_000
    # names, Assignor objects or classes; aiokafka's built-in classes become our names
    partition_assignment_strategy: tuple[Assignor | type[Assignor] | str, ...] = (
        "range",
        "cooperative-sticky",
    )
    exclude_internal_topics: bool = True
    client_rack: str | None = None
    # "classic" (JoinGroup/SyncGroup) or "consumer" (KIP-848: ConsumerGroupHeartbeat,
    # assignments computed by the broker with group_remote_assignor)
    group_protocol: str = "classic"
    group_remote_assignor: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.group_id, str) or not self.group_id:
            raise KafkaConfigError("group_id must be a non-empty string")
        if self.group_instance_id is not None and (
            not isinstance(self.group_instance_id, str) or not self.group_instance_id
        ):
            raise KafkaConfigError("group_instance_id must be a non-empty string or None")
        for name in (
            "session_timeout_ms",
            "heartbeat_interval_ms",
            "max_poll_interval_ms",
            "auto_commit_interval_ms",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise KafkaConfigError(f"{name} must be a positive integer, got {value!r}")
        rebalance = self.rebalance_timeout_ms
        if rebalance is not None and (
            isinstance(rebalance, bool) or not isinstance(rebalance, int) or rebalance <= 0
        ):
            raise KafkaConfigError(
                f"rebalance_timeout_ms must be a positive integer or None, got {rebalance!r}"
            )
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise KafkaConfigError(
                f"heartbeat_interval_ms ({self.heartbeat_interval_ms}) must be lower than "
                f"session_timeout_ms ({self.session_timeout_ms}); a third of it is usual"
            )
        for name in ("enable_auto_commit", "exclude_internal_topics"):
            if not isinstance(getattr(self, name), bool):
                raise KafkaConfigError(f"{name} must be True or False")
        if self.client_rack is not None and not isinstance(self.client_rack, str):
            raise KafkaConfigError("client_rack must be a string or None")
        if self.group_protocol not in GROUP_PROTOCOLS:
            raise KafkaConfigError(
                f"group_protocol must be 'classic' or 'consumer', not {self.group_protocol!r}"
            )
        remote = self.group_remote_assignor
        if remote is not None:
            if not isinstance(remote, str) or not remote:
                raise KafkaConfigError(
                    f"group_remote_assignor must be a non-empty str or None, not {remote!r}"
                )
            if self.group_protocol != "consumer":
                raise KafkaConfigError(
                    "group_remote_assignor needs group_protocol='consumer' (the classic "
                    "protocol's assignors run in the client: partition_assignment_strategy)"
                )
        strategy = self.partition_assignment_strategy
        if isinstance(strategy, str):
            # A single name (Java takes a comma-separated list).
            strategy = tuple(s.strip() for s in strategy.split(",") if s.strip())
        elif not isinstance(strategy, tuple):
            try:
                strategy = tuple(strategy)
            except TypeError:
                raise KafkaConfigError(
                    "partition_assignment_strategy must be a sequence of assignor names, "
                    "Assignor objects or classes"
                ) from None
        from aiokproto.consumer.group.assignors import aiokafka_assignor_name, resolve_assignors

        strategy = tuple(aiokafka_assignor_name(s) or s for s in strategy)
        object.__setattr__(self, "partition_assignment_strategy", strategy)
        # Resolving checks names and types now, not on the group task.
        resolve_assignors(strategy)

    @property
    def effective_rebalance_timeout_ms(self) -> int:
        """The rebalance timeout sent in JoinGroup (max_poll_interval_ms by default)."""
        if self.rebalance_timeout_ms is not None:
            return self.rebalance_timeout_ms
        return self.max_poll_interval_ms


#: The option names the Consumer passes to ``GroupConfig`` (split from its kwargs).
GROUP_OPTIONS: frozenset[str] = frozenset(f.name for f in fields(GroupConfig))
