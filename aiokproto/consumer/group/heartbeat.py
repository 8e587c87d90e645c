"""ConsumerGroupHeartbeat requests and their timing (KIP-848), sans-I/O:
``HeartbeatBuilder`` (full vs minimal requests) and ``HeartbeatTimer`` (the broker's
interval, at once when urgent).

``HeartbeatBuilder`` remembers what the last heartbeats told the broker and leaves out
what has not changed, as Java's client does (the broker keeps the member's last values;
a field sent as null / -1 means "unchanged"):

- always: group id, member id, member epoch, and the instance id of a static member;
- when joining (epoch 0), every field: the rebalance timeout, the subscription (topic
  names, or the regex with an empty list of names), the server assignor and rack if
  configured, and the owned partitions (empty when joining: the broker refuses others);
- otherwise each of those only when it differs from what was last sent: the
  subscription when the user changed it, the owned partitions when a reconciliation
  changed the acknowledged assignment (a new local epoch counts as a change, so a
  reconciled target is acknowledged even if its partitions equal the old ones);
- after a failed heartbeat (error answer, lost connection, timeout) ``reset()`` forgets
  what was sent, so the next heartbeat carries every field again;
- leaving (epoch -1 or -2): only the identifying fields.

``HeartbeatTimer`` says when the next heartbeat is due: at once while joining,
acknowledging or leaving, else the interval the broker returned after the last one
sent; never two in flight; after a failure at once or after a back-off, as the error
says.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from uuid import UUID

from aiokproto.consumer.group.reconcile import LocalAssignment
from aiokproto.protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatRequestTopicPartitions,
    ConsumerGroupHeartbeatResponse,
)


@dataclass(frozen=True, slots=True)
class MemberConfig:
    """What the member tells the broker about itself (fixed for a consumer)."""

    group_id: str
    rebalance_timeout_ms: int  # Java sends max.poll.interval.ms
    instance_id: str | None = None
    rack_id: str | None = None
    server_assignor: str | None = None  # group_remote_assignor: "uniform", "range"


@dataclass(frozen=True, slots=True)
class Subscription:
    """Topic names, or a regex (RE2/J syntax, matched by the broker)."""

    topics: frozenset[str] = frozenset()
    regex: str | None = None

    @classmethod
    def to_topics(cls, topics: Iterable[str]) -> Subscription:
        return cls(topics=frozenset(topics))

    @classmethod
    def to_regex(cls, regex: str) -> Subscription:
        return cls(regex=regex)

    @property
    def names(self) -> list[str]:
        """The names to send: sorted; empty for a regex subscription."""
        return sorted(self.topics) if self.regex is None else []


@dataclass(slots=True)
class _Sent:
    """Fields as last sent since the last reset (None: not sent since)."""

    rebalance_timeout_ms: int | None = None
    names: list[str] | None = None
    regex: str | None = None  # "" once a removal was sent
    server_assignor: str | None = None
    rack_id: str | None = None
    assignment: LocalAssignment | None = None


class HeartbeatBuilder:
    """Builds each ConsumerGroupHeartbeatRequest; see the module docstring."""

    def __init__(self, config: MemberConfig) -> None:
        self.config = config
        self._sent = _Sent()
        # A regex (or its removal) was sent before the last reset: the broker may hold
        # one, so a subscription without a regex removes it explicitly. (Java forgets
        # this on reset, so a member that switches from a regex to names after a failed
        # heartbeat could keep the regex on the broker.)
        self._regex_unsure = False

    def reset(self) -> None:
        """Forget what was sent: the next heartbeat carries every field."""
        if self._sent.regex is not None:
            self._regex_unsure = True
        self._sent = _Sent()

    def build(
        self,
        *,
        member_id: str,
        epoch: int,
        subscription: Subscription,
        assignment: LocalAssignment,
        joining: bool = False,
        leaving: bool = False,
    ) -> ConsumerGroupHeartbeatRequest:
        """The next heartbeat; ``joining``/``leaving`` as the member's state says
        (``MemberMachine.joining``/``leaving``), ``assignment`` its ``current``."""
        cfg = self.config
        request = ConsumerGroupHeartbeatRequest(
            group_id=cfg.group_id,
            member_id=member_id,
            member_epoch=epoch,
            instance_id=cfg.instance_id,
        )
        if leaving:
            return request
        full = joining or epoch == 0
        sent = self._sent
        if full or sent.rebalance_timeout_ms != cfg.rebalance_timeout_ms:
            request.rebalance_timeout_ms = cfg.rebalance_timeout_ms
            sent.rebalance_timeout_ms = cfg.rebalance_timeout_ms
        names = subscription.names
        if full or names != sent.names:
            request.subscribed_topic_names = names
            sent.names = names
        regex = subscription.regex
        if regex is not None:
            if full or sent.regex != regex:
                request.subscribed_topic_regex = regex
                sent.regex = regex
        elif (sent.regex is None and self._regex_unsure) or sent.regex not in (None, ""):
            # "" removes a regex the broker may hold (never sent if none ever was)
            request.subscribed_topic_regex = ""
            sent.regex = ""
            self._regex_unsure = False
        if cfg.server_assignor is not None and (
            full or sent.server_assignor != cfg.server_assignor
        ):
            request.server_assignor = cfg.server_assignor
            sent.server_assignor = cfg.server_assignor
        if cfg.rack_id is not None and (full or sent.rack_id != cfg.rack_id):
            request.rack_id = cfg.rack_id
            sent.rack_id = cfg.rack_id
        if full or assignment != sent.assignment:
            request.topic_partitions = [] if full else _topic_partitions(assignment)
            sent.assignment = assignment
        return request


def _topic_partitions(
    assignment: LocalAssignment,
) -> list[ConsumerGroupHeartbeatRequestTopicPartitions]:
    return [
        ConsumerGroupHeartbeatRequestTopicPartitions(topic_id=tid, partitions=sorted(parts))
        for tid, parts in sorted(assignment.partitions.items(), key=lambda kv: kv[0].bytes)
    ]


def response_assignment(
    response: ConsumerGroupHeartbeatResponse,
) -> dict[UUID, frozenset[int]] | None:
    """The answer's target assignment by topic id, or None when it carries none."""
    if response.assignment is None:
        return None
    merged: dict[UUID, set[int]] = {}
    for tp in response.assignment.topic_partitions:
        merged.setdefault(tp.topic_id, set()).update(tp.partitions)
    return {tid: frozenset(ps) for tid, ps in merged.items()}


class HeartbeatTimer:
    """When the next heartbeat is due, from loop times in seconds (no clock of its own).

    ``interval_ms`` is the broker's ``heartbeat_interval_ms`` from the last successful
    answer (0 until the first); a failure makes the next one due at once
    (``after_s=0``: fenced, coordinator moved) or after a back-off."""

    def __init__(self) -> None:
        self.interval_ms = 0
        self.in_flight = False
        self._next_at = 0.0

    def due(self, now: float, *, heartbeat_now: bool) -> bool:
        if self.in_flight:
            return False
        return heartbeat_now or now >= self._next_at

    def delay_s(self, now: float, *, heartbeat_now: bool) -> float | None:
        """Seconds until due; None while one is in flight (its answer decides)."""
        if self.in_flight:
            return None
        if heartbeat_now:
            return 0.0
        return max(0.0, self._next_at - now)

    def sent(self, now: float) -> None:
        self.in_flight = True
        self._next_at = now + self.interval_ms / 1000

    def answered(self, now: float, interval_ms: int) -> None:
        """A successful answer; the interval counts from when the heartbeat was sent."""
        self.in_flight = False
        if interval_ms > 0 and interval_ms != self.interval_ms:
            self._next_at += (interval_ms - self.interval_ms) / 1000
            self.interval_ms = interval_ms

    def failed(self, now: float, *, after_s: float = 0.0) -> None:
        self.in_flight = False
        self._next_at = now + after_s

    def abandoned(self) -> None:
        """The request in flight will not be answered here (leave sent, connection
        replaced): do not wait for it."""
        self.in_flight = False
