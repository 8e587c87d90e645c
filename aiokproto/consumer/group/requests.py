"""The group membership requests, built from the member's state (pure)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from aiokproto.consumer.group.assignors import Assignor
from aiokproto.consumer.group.group_config import GroupConfig
from aiokproto.consumer.group.protocol import PROTOCOL_TYPE, Subscription, encode_subscription
from aiokproto.errors import FencedInstanceIdError, KafkaError, for_code
from aiokproto.protocol.messages.heartbeat import HeartbeatRequest
from aiokproto.protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from aiokproto.protocol.messages.leave_group import (
    LeaveGroupRequest,
    LeaveGroupRequestMemberIdentity,
)
from aiokproto.protocol.messages.sync_group import SyncGroupRequest, SyncGroupRequestAssignment
from aiokproto.structs import TopicPartition


def join_request(
    config: GroupConfig,
    assignors: Iterable[Assignor],
    topics: frozenset[str],
    member_id: str,
    generation: int,
    owned: Iterable[TopicPartition],
) -> JoinGroupRequest:
    """One protocol per assignor, in preference order, each with its subscription."""
    owned_sorted = tuple(sorted(owned))
    return JoinGroupRequest(
        group_id=config.group_id,
        session_timeout_ms=config.session_timeout_ms,
        rebalance_timeout_ms=config.effective_rebalance_timeout_ms,
        member_id=member_id,
        group_instance_id=config.group_instance_id,
        protocol_type=PROTOCOL_TYPE,
        protocols=[
            JoinGroupRequestProtocol(
                name=a.name,
                metadata=encode_subscription(
                    Subscription(
                        topics=tuple(sorted(topics)),
                        user_data=a.subscription_user_data(topics),
                        owned_partitions=owned_sorted,
                        generation_id=generation,
                        rack_id=config.client_rack,
                    )
                ),
            )
            for a in assignors
        ],
    )


def sync_request(
    config: GroupConfig,
    member_id: str,
    generation: int,
    protocol_name: str | None,
    assignments: Mapping[str, bytes],
) -> SyncGroupRequest:
    """Followers send no assignments; the leader sends every member's."""
    return SyncGroupRequest(
        group_id=config.group_id,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=config.group_instance_id,
        protocol_type=PROTOCOL_TYPE,
        protocol_name=protocol_name,
        assignments=[
            SyncGroupRequestAssignment(member_id=m, assignment=a) for m, a in assignments.items()
        ],
    )


def heartbeat_request(config: GroupConfig, member_id: str, generation: int) -> HeartbeatRequest:
    return HeartbeatRequest(
        group_id=config.group_id,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=config.group_instance_id,
    )


def leave_request(group_id: str, member_id: str, version: int) -> LeaveGroupRequest:
    """v3+ leaves by a list of members (KIP-345); older versions by one member id."""
    request = LeaveGroupRequest(group_id=group_id)
    if version >= 3:
        request.members = [
            LeaveGroupRequestMemberIdentity(
                member_id=member_id, reason="the consumer is leaving the group"
            )
        ]
    else:
        request.member_id = member_id
    return request


def describe_error(code: int, what: str, config: GroupConfig) -> KafkaError:
    """The broker's error for ``code`` with a message that says what to do."""
    if code == FencedInstanceIdError.errno:
        return FencedInstanceIdError(
            f"{what}: another consumer joined group {config.group_id!r} with the same "
            f"group_instance_id {config.group_instance_id!r}, so this one was fenced; give "
            "every consumer instance its own group_instance_id"
        )
    return for_code(code)(f"{what} for group {config.group_id!r}")
