"""Incremental fetch sessions (KIP-227), as pure bookkeeping for one broker.

The broker keeps a session of partitions and their fetch parameters; each request then
names only partitions that are new or changed, plus the ones to forget. Partitions in
the session that a request does not name are still fetched with their cached
parameters, so a partition the consumer must not fetch (its data is still buffered)
has to be forgotten, and is added back with its new offset later.

Epochs: a request with epoch 0 is a full fetch that opens a session (and closes
``session_id`` when non-zero); epochs 1, 2, ... are incremental and advance only when
the broker answered; any failure makes the next request a full one.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from aiokproto.structs import TopicPartition

INITIAL_EPOCH = 0
_MAX_EPOCH = 0x7FFFFFFF
FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71


@dataclass(frozen=True, slots=True)
class PartitionFetch:
    """What one partition of a Fetch request asks for."""

    topic_id: uuid.UUID
    fetch_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class FetchPlan:
    """One request's session fields and partitions."""

    session_id: int
    epoch: int
    full: bool
    send: Mapping[TopicPartition, PartitionFetch]
    forgotten: Mapping[TopicPartition, uuid.UUID]
    # every partition the request fetches (named or carried by the session)
    wanted: Mapping[TopicPartition, PartitionFetch]


class FetchSession:
    """Client side of one broker's fetch session."""

    def __init__(self) -> None:
        self.session_id = 0
        self.epoch = INITIAL_EPOCH
        # what the broker's session holds, as of the last answered request
        self._known: dict[TopicPartition, PartitionFetch] = {}

    @property
    def known(self) -> Mapping[TopicPartition, PartitionFetch]:
        return self._known

    def plan(
        self, wanted: Mapping[TopicPartition, PartitionFetch], *, sessions: bool = True
    ) -> FetchPlan:
        """The next request for ``wanted`` (``sessions=False``: pre-v7 brokers)."""
        if not sessions:
            return FetchPlan(0, -1, True, dict(wanted), {}, dict(wanted))
        known = self._known
        if self.epoch == INITIAL_EPOCH or any(
            tp in known and known[tp].topic_id != spec.topic_id for tp, spec in wanted.items()
        ):
            # a recreated topic (new id) cannot be swapped in place: start over
            return FetchPlan(self.session_id, INITIAL_EPOCH, True, dict(wanted), {}, dict(wanted))
        send = {tp: spec for tp, spec in wanted.items() if known.get(tp) != spec}
        forgotten = {tp: spec.topic_id for tp, spec in known.items() if tp not in wanted}
        return FetchPlan(self.session_id, self.epoch, False, send, forgotten, dict(wanted))

    def on_response(self, plan: FetchPlan, error_code: int, session_id: int) -> None:
        """Record the broker's answer to ``plan``."""
        if plan.epoch < 0:
            return
        if error_code:
            if error_code == FETCH_SESSION_ID_NOT_FOUND:
                self.session_id = 0
            self._restart()
            return
        if session_id == 0:
            # the broker did not open (or closed) the session: next is a full fetch
            self.session_id = 0
            self._restart()
            return
        self.session_id = session_id
        self.epoch = 1 if plan.full or self.epoch >= _MAX_EPOCH else self.epoch + 1
        self._known = dict(plan.wanted)

    def on_failure(self) -> None:
        """The request got no answer: the broker's state is unknown; close and reopen."""
        self._restart()

    def _restart(self) -> None:
        self.epoch = INITIAL_EPOCH
        self._known = {}
