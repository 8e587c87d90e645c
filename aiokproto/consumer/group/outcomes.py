"""Broker error codes of the group APIs -> state machine inputs (pure)."""

from __future__ import annotations

from aiokproto.consumer.group.classic_machine import Input
from aiokproto.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    IllegalGenerationError,
    MemberIdRequiredError,
    NotCoordinatorError,
    RebalanceInProgressError,
    UnknownMemberIdError,
    for_code,
)

NONE = 0
UNKNOWN_MEMBER_ID = UnknownMemberIdError.errno
ILLEGAL_GENERATION = IllegalGenerationError.errno
REBALANCE_IN_PROGRESS = RebalanceInProgressError.errno
MEMBER_ID_REQUIRED = MemberIdRequiredError.errno

#: The coordinator moved, is starting or is loading: find it again and retry.
COORDINATOR_ERRORS = frozenset(
    {
        CoordinatorLoadInProgressError.errno,
        CoordinatorNotAvailableError.errno,
        NotCoordinatorError.errno,
    }
)


def join_input(code: int) -> Input:
    """The input for a JoinGroup error code (NONE -> JOINED)."""
    if code == NONE:
        return Input.JOINED
    if code == MEMBER_ID_REQUIRED:
        return Input.MEMBER_ID_REQUIRED
    if code == UNKNOWN_MEMBER_ID:
        return Input.JOIN_UNKNOWN_MEMBER
    if code in COORDINATOR_ERRORS:
        return Input.JOIN_COORDINATOR_LOST
    if code == REBALANCE_IN_PROGRESS or for_code(code).retriable:
        return Input.JOIN_RETRY
    # FENCED_INSTANCE_ID, GROUP_AUTHORIZATION_FAILED, INVALID_SESSION_TIMEOUT,
    # INCONSISTENT_GROUP_PROTOCOL, GROUP_MAX_SIZE_REACHED, UNSUPPORTED_VERSION, ...
    return Input.FATAL


def sync_input(code: int) -> Input:
    """The input for a SyncGroup error code (NONE -> SYNCED)."""
    if code == NONE:
        return Input.SYNCED
    if code == UNKNOWN_MEMBER_ID:
        return Input.SYNC_UNKNOWN_MEMBER
    if code == ILLEGAL_GENERATION:
        return Input.SYNC_ILLEGAL_GENERATION
    if code in COORDINATOR_ERRORS:
        return Input.SYNC_COORDINATOR_LOST
    if code == REBALANCE_IN_PROGRESS or for_code(code).retriable:
        return Input.SYNC_REJOIN
    return Input.FATAL


def member_input(code: int) -> Input | None:
    """The input for a Heartbeat or OffsetCommit error code; None: nothing to tell the
    group (success, or a retriable error the caller simply retries)."""
    if code == NONE:
        return Input.HEARTBEAT_OK
    if code == REBALANCE_IN_PROGRESS:
        return Input.REBALANCING
    if code == UNKNOWN_MEMBER_ID:
        return Input.UNKNOWN_MEMBER
    if code == ILLEGAL_GENERATION:
        return Input.ILLEGAL_GENERATION
    if code in COORDINATOR_ERRORS:
        return Input.COORDINATOR_LOST
    if for_code(code).retriable:
        return None
    return Input.FATAL
