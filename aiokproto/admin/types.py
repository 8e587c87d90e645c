"""What Admin methods take and return: plain frozen dataclasses and enums.

Enum values are Kafka's wire codes, so a value read off the wire maps straight to a
member (unknown codes map to the ``UNKNOWN`` member, see ``from_code``).
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Self

from aiokproto.cluster.snapshot import BrokerInfo
from aiokproto.errors import KafkaConfigError, KafkaError
from aiokproto.structs import TopicPartition

__all__ = [
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "AlterConfigOp",
    "AlterConfigOpType",
    "ClusterDescription",
    "ConfigEntry",
    "ConfigResource",
    "ConfigResourceType",
    "ConfigSource",
    "ConfigSynonym",
    "ConfigType",
    "ConsumerGroupDescription",
    "ConsumerGroupListing",
    "CreatedTopic",
    "DeletedRecords",
    "ElectionType",
    "FeatureMetadata",
    "FinalizedVersionRange",
    "IsolationLevel",
    "ListOffsetsResult",
    "LogDirDescription",
    "MemberDescription",
    "NewPartitions",
    "NewTopic",
    "OffsetAndMetadata",
    "OffsetSpec",
    "PartitionDescription",
    "ReplicaInfo",
    "ResourcePatternType",
    "ResourceType",
    "ScramCredentialInfo",
    "ScramMechanism",
    "ShareGroupDescription",
    "ShareGroupListing",
    "ShareMemberDescription",
    "SharePartitionOffset",
    "SupportedVersionRange",
    "TopicDescription",
    "TopicPartition",
    "UserScramCredentialDeletion",
    "UserScramCredentialUpsertion",
    "UserScramCredentialsDescription",
]


class _Coded(enum.IntEnum):
    """An enum of wire codes with an UNKNOWN member for codes this client predates."""

    @classmethod
    def from_code(cls, code: int) -> Self:
        try:
            return cls(code)
        except ValueError:
            return cls(0)


# -- topics -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NewTopic:
    """A topic to create. -1 partitions / replication factor means the broker default.

    ``replica_assignments`` (partition -> broker ids) replaces both counts.
    """

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    replica_assignments: Mapping[int, Sequence[int]] | None = None
    topic_configs: Mapping[str, str | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise KafkaConfigError(f"NewTopic name must be a non-empty string, not {self.name!r}")
        for what, value in (
            ("num_partitions", self.num_partitions),
            ("replication_factor", self.replication_factor),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or (value < 1 and value != -1):
                raise KafkaConfigError(
                    f"NewTopic {self.name!r}: {what} must be a positive int or -1 "
                    f"(broker default), not {value!r}"
                )
        if self.replication_factor > 32767:
            raise KafkaConfigError(f"NewTopic {self.name!r}: replication_factor is too large")
        if self.replica_assignments is not None:
            if self.num_partitions != -1 or self.replication_factor != -1:
                raise KafkaConfigError(
                    f"NewTopic {self.name!r}: give replica_assignments or "
                    "num_partitions/replication_factor, not both"
                )
            if not self.replica_assignments:
                raise KafkaConfigError(f"NewTopic {self.name!r}: replica_assignments is empty")


@dataclass(frozen=True, slots=True)
class CreatedTopic:
    """What the broker reports for a created (or validated) topic."""

    name: str
    topic_id: uuid.UUID | None
    num_partitions: int
    replication_factor: int


@dataclass(frozen=True, slots=True)
class NewPartitions:
    """Grow a topic to ``total_count`` partitions; optional replicas for each new one."""

    total_count: int
    new_assignments: Sequence[Sequence[int]] | None = None

    def __post_init__(self) -> None:
        count = self.total_count
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise KafkaConfigError(
                f"NewPartitions total_count must be a positive int, not {count!r}"
            )


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    partition: int
    leader: int | None  # node id; None while the partition has no leader
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    eligible_leader_replicas: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    topic_id: uuid.UUID | None
    is_internal: bool
    partitions: tuple[PartitionDescription, ...]
    authorized_operations: frozenset[AclOperation] | None = None


# -- configs ------------------------------------------------------------------------


class ConfigResourceType(_Coded):
    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class ConfigSource(_Coded):
    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class ConfigType(_Coded):
    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


@dataclass(frozen=True, slots=True)
class ConfigResource:
    """A topic (name), a broker (its node id as a string; "" for the cluster default)..."""

    type: ConfigResourceType
    name: str

    def __post_init__(self) -> None:
        if not isinstance(self.type, ConfigResourceType) or self.type is ConfigResourceType.UNKNOWN:
            raise KafkaConfigError(f"ConfigResource type must be a ConfigResourceType: {self!r}")
        if self.type is ConfigResourceType.TOPIC and not self.name:
            raise KafkaConfigError("a TOPIC ConfigResource needs a topic name")

    @property
    def broker_id(self) -> int | None:
        """The node that must answer for this resource (broker and logger configs)."""
        if self.type in (ConfigResourceType.BROKER, ConfigResourceType.BROKER_LOGGER) and self.name:
            try:
                return int(self.name)
            except ValueError:
                raise KafkaConfigError(
                    f"a {self.type.name} ConfigResource name is a broker id, not {self.name!r}"
                ) from None
        return None


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource
    is_read_only: bool
    is_sensitive: bool
    synonyms: tuple[ConfigSynonym, ...] = ()
    type: ConfigType = ConfigType.UNKNOWN
    documentation: str | None = None

    @property
    def is_default(self) -> bool:
        return self.source is ConfigSource.DEFAULT_CONFIG


class AlterConfigOpType(_Coded):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True, slots=True)
class AlterConfigOp:
    """One incremental change: SET/APPEND/SUBTRACT need a value, DELETE takes none."""

    name: str
    value: str | None = None
    op_type: AlterConfigOpType = AlterConfigOpType.SET

    def __post_init__(self) -> None:
        if not self.name:
            raise KafkaConfigError("AlterConfigOp needs a config name")
        if self.op_type is not AlterConfigOpType.DELETE and self.value is None:
            raise KafkaConfigError(f"AlterConfigOp {self.op_type.name} {self.name!r} needs a value")


# -- groups and offsets -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConsumerGroupListing:
    group_id: str
    protocol_type: str
    state: str | None = None  # ListGroups v4+
    type: str | None = None  # ListGroups v5+ ("classic", "consumer")
    is_simple_consumer_group: bool = False


@dataclass(frozen=True, slots=True)
class MemberDescription:
    """A group member. ``assignment`` is its current assignment; the fields after it
    are reported for consumer-protocol (KIP-848) groups only and are None otherwise."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...]
    member_epoch: int | None = None
    rack: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    # what the broker's assignor wants the member to own once it has reconciled
    target_assignment: tuple[TopicPartition, ...] | None = None


@dataclass(frozen=True, slots=True)
class ConsumerGroupDescription:
    """A group's state and members. ``type`` is "classic" or "consumer" (KIP-848);
    ``partition_assignor`` is the classic group's protocol or the consumer group's
    server-side assignor, which ``server_assignor`` also holds (None for classic)."""

    group_id: str
    is_simple_consumer_group: bool
    members: tuple[MemberDescription, ...]
    partition_assignor: str
    state: str
    coordinator: BrokerInfo
    authorized_operations: frozenset[AclOperation] | None = None
    type: str = "classic"
    group_epoch: int | None = None
    assignment_epoch: int | None = None
    server_assignor: str | None = None


@dataclass(frozen=True, slots=True)
class ShareGroupListing:
    group_id: str
    state: str  # "Empty", "Stable", "Dead"...


@dataclass(frozen=True, slots=True)
class ShareMemberDescription:
    """A share group member; ``assignment`` is the partitions it may fetch from now
    (share groups assign one partition to several members)."""

    member_id: str
    client_id: str
    host: str
    rack: str | None
    member_epoch: int
    subscribed_topic_names: tuple[str, ...]
    assignment: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class ShareGroupDescription:
    """A share group (KIP-932) as its coordinator sees it."""

    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: tuple[ShareMemberDescription, ...]
    coordinator: BrokerInfo
    authorized_operations: frozenset[AclOperation] | None = None


@dataclass(frozen=True, slots=True)
class SharePartitionOffset:
    """Where a share group stands in one partition: records before ``start_offset``
    are done with. ``lag`` counts the records from the start offset to the end of
    the partition that are not yet acknowledged (DescribeShareGroupOffsets v1+); None
    when the broker does not say (v0, or a start offset past the end)."""

    start_offset: int
    leader_epoch: int | None
    lag: int | None


class OffsetAndMetadata(NamedTuple):
    offset: int
    metadata: str = ""
    leader_epoch: int | None = None


class IsolationLevel(_Coded):
    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """Which offset ``list_offsets`` looks up; build with the class methods."""

    timestamp: int

    EARLIEST = -2
    LATEST = -1
    MAX_TIMESTAMP = -3

    @classmethod
    def earliest(cls) -> OffsetSpec:
        return cls(cls.EARLIEST)

    @classmethod
    def latest(cls) -> OffsetSpec:
        return cls(cls.LATEST)

    @classmethod
    def max_timestamp(cls) -> OffsetSpec:
        """The offset of the record with the highest timestamp (ListOffsets v7+)."""
        return cls(cls.MAX_TIMESTAMP)

    @classmethod
    def for_timestamp(cls, timestamp_ms: int) -> OffsetSpec:
        """The first offset whose timestamp is >= ``timestamp_ms``."""
        if timestamp_ms < 0:
            raise KafkaConfigError(f"a timestamp must be >= 0, not {timestamp_ms}")
        return cls(timestamp_ms)


class ListOffsetsResult(NamedTuple):
    offset: int
    timestamp: int
    leader_epoch: int | None


class DeletedRecords(NamedTuple):
    low_watermark: int


# -- cluster ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    cluster_id: str | None
    controller_id: int | None
    brokers: tuple[BrokerInfo, ...]
    authorized_operations: frozenset[AclOperation] | None = None


class FinalizedVersionRange(NamedTuple):
    min_version_level: int
    max_version_level: int


class SupportedVersionRange(NamedTuple):
    min_version: int
    max_version: int


@dataclass(frozen=True, slots=True)
class FeatureMetadata:
    finalized_features: Mapping[str, FinalizedVersionRange]
    finalized_features_epoch: int | None
    supported_features: Mapping[str, SupportedVersionRange]


class ReplicaInfo(NamedTuple):
    size: int
    offset_lag: int
    is_future: bool


@dataclass(frozen=True, slots=True)
class LogDirDescription:
    path: str
    error: KafkaError | None
    replicas: Mapping[TopicPartition, ReplicaInfo]
    total_bytes: int | None = None
    usable_bytes: int | None = None


class ElectionType(_Coded):
    PREFERRED = 0
    UNCLEAN = 1


# -- ACLs ---------------------------------------------------------------------------


class ResourceType(_Coded):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class ResourcePatternType(_Coded):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(_Coded):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(_Coded):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


_FILTER_ONLY = {"ANY", "MATCH", "UNKNOWN"}


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: ``principal`` may do ``operation`` on the resource from ``host``."""

    resource_type: ResourceType
    name: str
    pattern_type: ResourcePatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __post_init__(self) -> None:
        for value in (self.resource_type, self.pattern_type, self.operation, self.permission_type):
            if value.name in _FILTER_ONLY:
                raise KafkaConfigError(
                    f"an AclBinding cannot use {type(value).__name__}.{value.name} "
                    "(only filters match ANY/MATCH)"
                )
        if not self.name or not self.principal or not self.host:
            raise KafkaConfigError(f"an AclBinding needs a name, principal and host: {self!r}")


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Matches ACLs; None and the ANY members match everything."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: ResourcePatternType = ResourcePatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    @classmethod
    def any(cls) -> AclBindingFilter:
        return cls()


# -- SCRAM --------------------------------------------------------------------------


class ScramMechanism(_Coded):
    UNKNOWN = 0
    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @property
    def hash_name(self) -> str:
        return {1: "sha256", 2: "sha512"}[self.value]


class ScramCredentialInfo(NamedTuple):
    mechanism: ScramMechanism
    iterations: int


@dataclass(frozen=True, slots=True)
class UserScramCredentialsDescription:
    user: str
    credential_infos: tuple[ScramCredentialInfo, ...]


@dataclass(frozen=True, slots=True)
class UserScramCredentialUpsertion:
    """Set ``user``'s password for one mechanism; the salted password is computed here.

    ``salt`` defaults to 32 random bytes.
    """

    user: str
    credential_info: ScramCredentialInfo
    password: str | bytes = field(repr=False)
    salt: bytes | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.user:
            raise KafkaConfigError("a SCRAM upsertion needs a user name")
        if self.credential_info.mechanism is ScramMechanism.UNKNOWN:
            raise KafkaConfigError("a SCRAM upsertion needs SCRAM_SHA_256 or SCRAM_SHA_512")
        if self.credential_info.iterations < 1:
            raise KafkaConfigError("SCRAM iterations must be positive")


@dataclass(frozen=True, slots=True)
class UserScramCredentialDeletion:
    user: str
    mechanism: ScramMechanism

    def __post_init__(self) -> None:
        if not self.user:
            raise KafkaConfigError("a SCRAM deletion needs a user name")
