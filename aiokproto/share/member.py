"""Share group membership (KIP-932 ShareGroupHeartbeat), without I/O.

Simpler than a KIP-848 consumer member: the broker assigns partitions (possibly to
several members at once), and a member just starts or stops fetching them: no
revocation step, no listener, nothing to acknowledge in the heartbeat. Join with epoch
0 and every field; afterwards the subscription only when it changed (or after a failed
heartbeat); leave with epoch -1. FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID: drop the
assignment and join again at epoch 0.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from aiokproto.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedMemberEpochError,
    NotCoordinatorError,
    UnknownMemberIdError,
)
from aiokproto.structs import TopicPartition

JOIN_EPOCH = 0
LEAVE_EPOCH = -1


class Answer(enum.Enum):
    OK = "ok"
    FENCED = "fenced"  # join again at epoch 0, nothing owned
    COORDINATOR = "coordinator"  # find the coordinator again, then retry
    RETRY = "retry"  # back off and retry
    FATAL = "fatal"  # raised to the application; no more heartbeats


_FENCED = frozenset({FencedMemberEpochError.errno, UnknownMemberIdError.errno})
_COORDINATOR = frozenset({NotCoordinatorError.errno, CoordinatorNotAvailableError.errno})
_RETRY = frozenset({CoordinatorLoadInProgressError.errno})


def classify(code: int) -> Answer:
    if code == 0:
        return Answer.OK
    if code in _FENCED:
        return Answer.FENCED
    if code in _COORDINATOR:
        return Answer.COORDINATOR
    if code in _RETRY:
        return Answer.RETRY
    return Answer.FATAL


@dataclass(frozen=True, slots=True)
class HeartbeatFields:
    member_epoch: int
    rack_id: str | None
    subscribed_topic_names: list[str] | None


class ShareMember:
    """Epoch, subscription sent, and the assignment (by topic id) of one member."""

    def __init__(self, member_id: str, rack: str | None = None) -> None:
        self.member_id = member_id
        self.rack = rack
        self.epoch = JOIN_EPOCH
        self.topics: frozenset[str] = frozenset()
        self._sent_topics: frozenset[str] | None = None  # None: send them next time
        self.leaving = False
        self.left = False
        #: the broker's last assignment: topic id -> partitions
        self.target: dict[uuid.UUID, frozenset[int]] = {}
        self.interval_ms = 0

    @property
    def joined(self) -> bool:
        return self.epoch > 0 and not self.leaving

    def subscribe(self, topics: Iterable[str]) -> None:
        self.topics = frozenset(topics)
        self.left = False

    def next_heartbeat(self) -> HeartbeatFields:
        if self.leaving:
            return HeartbeatFields(LEAVE_EPOCH, None, None)
        full = self.epoch == JOIN_EPOCH or self._sent_topics is None
        names = None
        if full or self._sent_topics != self.topics:
            names = sorted(self.topics)
        return HeartbeatFields(self.epoch, self.rack if full else None, names)

    def sent(self, fields: HeartbeatFields) -> None:
        if fields.subscribed_topic_names is not None:
            self._sent_topics = frozenset(fields.subscribed_topic_names)

    def answered(
        self,
        epoch: int,
        interval_ms: int,
        assignment: Mapping[uuid.UUID, Iterable[int]] | None,
    ) -> None:
        if self.leaving or epoch == LEAVE_EPOCH:
            # the answer to a leave: also when subscribe() came while it was in flight
            # (then the member joins again at epoch 0, not at -1 forever)
            self.left = self.leaving
            self.epoch = JOIN_EPOCH
            self.target = {}
            self._sent_topics = None
            return
        self.epoch = epoch
        if interval_ms > 0:
            self.interval_ms = interval_ms
        if assignment is not None:
            self.target = {tid: frozenset(ps) for tid, ps in assignment.items() if ps}

    def failed(self) -> None:
        """Any failed heartbeat: every field again next time."""
        self._sent_topics = None

    def fenced(self) -> None:
        self.epoch = JOIN_EPOCH
        self.target = {}
        self._sent_topics = None

    def resolve(self, name_of: Mapping[uuid.UUID, str]) -> tuple[set[TopicPartition], bool]:
        """(assigned partitions whose topic id is known, True if some id is not)."""
        out: set[TopicPartition] = set()
        unknown = False
        for tid, parts in self.target.items():
            name = name_of.get(tid)
            if name is None:
                unknown = True
                continue
            out.update(TopicPartition(name, p) for p in parts)
        return out, unknown
