"""OffsetCommit and OffsetFetch for one group, sent to its coordinator with retries.

Commits and offset fetches use the coordinator's "default" connection, not the
"group" one, because a JoinGroup can be held on the latter for a whole rebalance and
a broker answers one connection's requests in order.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from aiokproto.cluster.backoff import Backoff
from aiokproto.cluster.client import ClusterClient
from aiokproto.cluster.coordinators import GROUP
from aiokproto.consumer.group.offsets import (
    build_commit,
    build_fetch,
    parse_commit,
    parse_fetch,
    usable_version,
)
from aiokproto.consumer.group.outcomes import (
    COORDINATOR_ERRORS,
    ILLEGAL_GENERATION,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
)
from aiokproto.deadline import before
from aiokproto.errors import KafkaError, KafkaTimeoutError, UnknownServerErrorError, for_code
from aiokproto.protocol.messages.offset_commit import OffsetCommitRequest
from aiokproto.protocol.messages.offset_fetch import OffsetFetchRequest
from aiokproto.structs import OffsetAndMetadata, TopicPartition

if TYPE_CHECKING:
    from aiokproto.metrics.consumer import CoordinatorMetrics

log = logging.getLogger(__name__)

#: the code given to a partition the broker's answer left out (it was not committed)
NOT_ANSWERED = UnknownServerErrorError.errno
# a request that got no answer at all (connection trouble) in a list of codes
_NO_ANSWER = -2


def names(tps: Iterable[TopicPartition]) -> str:
    return ", ".join(f"{tp.topic}-{tp.partition}" for tp in tps)


class _BrokerAnswer(KafkaError):
    """A retriable error the coordinator answered with (the connection is fine)."""

    retriable = True


class _CoordinatorMoved(_BrokerAnswer):
    """NOT_COORDINATOR and friends: look the coordinator up again."""


def _raise_fetch_error(code: int, what: str) -> None:
    if not code:
        return
    error = for_code(code)(what)
    if code in COORDINATOR_ERRORS:
        raise _CoordinatorMoved(str(error)) from error
    if error.retriable:
        raise _BrokerAnswer(str(error)) from error
    raise error


class GroupOffsets:
    """Committed offsets of one group: single commits, and fetches with retries."""

    def __init__(self, client: ClusterClient, group_id: str, group_instance_id: str | None) -> None:
        self._client = client
        self.group_id = group_id
        self.group_instance_id = group_instance_id
        self.metrics: CoordinatorMetrics | None = None  # set by the group member

    def backoff(self) -> Backoff:
        return Backoff.for_retries(self._client.config)

    async def coordinator(self) -> int:
        return (await self._client.coordinators.find(GROUP, self.group_id)).node_id

    def forget_coordinator(self) -> None:
        self._client.coordinators.invalidate(GROUP, self.group_id)

    def _topic_ids(self, topics: Iterable[str]) -> dict[str, uuid.UUID]:
        snap = self._client.metadata.snapshot
        return {t: snap.topics[t].topic_id for t in topics if t in snap.topics}

    def _time_left_ms(self, deadline: float, what: str) -> int:
        left_ms = int((deadline - asyncio.get_running_loop().time()) * 1000)
        if left_ms <= 0:
            raise KafkaTimeoutError(f"{what} for group {self.group_id!r} ran out of time")
        return min(left_ms, self._client.config.request_timeout_ms)

    async def commit_once(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        generation: int,
        member_id: str,
        deadline: float,
    ) -> dict[TopicPartition, int]:
        """One OffsetCommit; the error code per partition (connection trouble raises)."""
        self._time_left_ms(deadline, "OffsetCommit")  # raises once the deadline is past
        # the coordinator look-up and the connection count against the deadline too
        async with before(deadline, f"OffsetCommit for group {self.group_id!r}"):
            conn = await self._client.connection(await self.coordinator(), "default")
            topics = {tp.topic for tp in offsets}
            ids = self._topic_ids(topics)
            version = usable_version(conn.version_for(OffsetCommitRequest), topics, ids)
            request = build_commit(
                self.group_id,
                generation,
                member_id,
                self.group_instance_id,
                offsets,
                ids,
                version,
            )
            sent_at = time.monotonic()
            response = await conn.send(
                request, version, timeout_ms=self._time_left_ms(deadline, "OffsetCommit")
            )
        if self.metrics is not None:
            self.metrics.committed(time.monotonic() - sent_at)
        codes = parse_commit(response, version, ids)
        return {tp: codes.get(tp, NOT_ANSWERED) for tp in offsets}

    async def commit_before_revoke(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        generation: int,
        member_id: str,
        deadline: float,
    ) -> bool:
        """Commit, retrying coordinator trouble until ``deadline``; True if it went
        through. Failures are logged (the rebalance goes on: the partitions may be
        consumed again elsewhere)."""
        loop = asyncio.get_running_loop()
        backoff = self.backoff()
        while True:
            try:
                codes = await self.commit_once(offsets, generation, member_id, deadline)
                failed = {c for c in codes.values() if c}
            except KafkaError as exc:
                if not exc.retriable:
                    failed = {UnknownServerErrorError.errno}
                else:
                    self.forget_coordinator()
                    failed = {_NO_ANSWER}
            if not failed:
                return True
            final = [
                c
                for c in failed
                if c != _NO_ANSWER
                and c not in COORDINATOR_ERRORS
                and (
                    c in (REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION)
                    or not for_code(c).retriable
                )
            ]
            if final:
                log.warning(
                    "group %r: commit before revoking %s failed (%s); their records after "
                    "the last commit may be consumed again",
                    self.group_id,
                    names(sorted(offsets)),
                    ", ".join(for_code(c).__name__ for c in final),
                )
                return False
            if failed & COORDINATOR_ERRORS:
                self.forget_coordinator()
            backoff.failed(loop.time())
            if loop.time() + backoff.delay_s() >= deadline:
                log.warning("group %r: commit before revoke timed out", self.group_id)
                return False
            await asyncio.sleep(backoff.delay_s())

    async def fetch(
        self, partitions: Iterable[TopicPartition], timeout_s: float
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """Committed offsets (None where nothing is committed), retried within the timeout."""
        wanted = sorted(set(partitions))
        if not wanted:
            return {}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        backoff = self.backoff()
        last: BaseException | None = None
        while True:
            try:
                return await self._fetch_once(wanted, deadline)
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                last = exc
                if isinstance(exc, _CoordinatorMoved) or not isinstance(exc, _BrokerAnswer):
                    self.forget_coordinator()
            backoff.failed(loop.time())
            wait = backoff.delay_s()
            if loop.time() + wait >= deadline:
                raise KafkaTimeoutError(
                    f"fetching committed offsets of group {self.group_id!r} did not succeed "
                    f"within {timeout_s:.1f} s; last error: {last}"
                )
            await asyncio.sleep(wait)

    async def _fetch_once(
        self, wanted: list[TopicPartition], deadline: float
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        self._time_left_ms(deadline, "OffsetFetch")  # raises once the deadline is past
        gid = self.group_id
        async with before(deadline, f"OffsetFetch for group {gid!r}"):
            conn = await self._client.connection(await self.coordinator(), "default")
            topics = {tp.topic for tp in wanted}
            ids = self._topic_ids(topics)
            version = usable_version(conn.version_for(OffsetFetchRequest), topics, ids)
            response = await conn.send(
                build_fetch(gid, wanted, ids, version),
                version,
                timeout_ms=self._time_left_ms(deadline, "OffsetFetch"),
            )
        code, parts = parse_fetch(response, version, ids)
        _raise_fetch_error(code, f"OffsetFetch for group {gid!r}")
        out: dict[TopicPartition, OffsetAndMetadata | None] = {}
        for tp in wanted:
            p_code, committed = parts.get(tp, (0, None))
            _raise_fetch_error(p_code, f"OffsetFetch for {tp.topic}-{tp.partition} in {gid!r}")
            out[tp] = committed
        return out
