"""``ShareGroupDriver``: the share consumer's membership, the I/O around the pure
``ShareMember`` (``share/member.py``): a heartbeat task that sends ShareGroupHeartbeat
to the group coordinator at the interval the broker returns, turns the assignment (by
topic id) into partitions, and leaves the group at ``stop()``.

A fatal group error (e.g. GROUP_AUTHORIZATION_FAILED) is raised by every call of the
application until a new subscription; the task's own failure is fatal the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid

from aiokproto.cluster.backoff import Backoff
from aiokproto.cluster.client import ClusterClient
from aiokproto.cluster.coordinators import GROUP
from aiokproto.config import ClientConfig
from aiokproto.consumer.group.consumer_driver import new_member_id
from aiokproto.errors import IllegalStateError, KafkaError, for_code
from aiokproto.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from aiokproto.share.member import Answer, ShareMember, classify
from aiokproto.share.signals import Signals
from aiokproto.structs import TopicPartition

# the share consumer's documented logger (docs/guides/logging.md), for all its parts
log = logging.getLogger("aiokproto.share.consumer")


class ShareGroupDriver:
    """Keeps this member in its share group; ``assigned`` is what the group gave it."""

    def __init__(
        self, group_id: str, rack: str | None, config: ClientConfig, signals: Signals
    ) -> None:
        self.group_id = group_id
        self.member = ShareMember(new_member_id(), rack)
        #: the partitions assigned now (other members may share them)
        self.assigned: frozenset[TopicPartition] = frozenset()
        #: topic names by id, from the metadata the assignment was resolved with
        self.ids: dict[uuid.UUID, str] = {}
        self._config = config
        self._signals = signals
        self._wake = asyncio.Event()
        self._client: ClusterClient | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self, client: ClusterClient) -> None:
        """Start the heartbeat task (it idles until there is a subscription)."""
        self._client = client
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"aiokproto-share-heartbeat-{self.group_id}"
        )

    @property
    def dead(self) -> bool:
        """Whether the heartbeat task ended (it only does by failing or at close)."""
        return self._task is not None and self._task.done()

    def wake(self) -> None:
        """Heartbeat now (the subscription changed)."""
        self._wake.set()

    async def leave(self) -> None:
        """Leave the group: the heartbeat task ends, a last heartbeat says so."""
        m = self.member
        if m.epoch <= 0:
            return
        m.leaving = True
        await self._stop_task()
        await self.heartbeat_once(self._require_client())

    async def close(self) -> None:
        await self._stop_task()

    async def _stop_task(self) -> None:
        task = self._task
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def _require_client(self) -> ClusterClient:
        if self._client is None:
            raise IllegalStateError("the share consumer is not started")
        return self._client

    # -- the heartbeat task -----------------------------------------------------------

    async def _run(self) -> None:
        try:
            await self._heartbeats()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # a defect, not a broker answer: every poll raises it, never a quiet member
            log.exception("share group %r: the heartbeat task failed", self.group_id)
            self._signals.fail_fatal(KafkaError(f"share heartbeat failed: {exc!r}"))

    async def _heartbeats(self) -> None:
        m = self.member
        client = self._require_client()
        backoff = Backoff.for_retries(self._config)
        while True:
            if not m.topics and m.epoch == 0:
                self.set_assignment()
                self._wake.clear()
                await self._wake.wait()
                continue
            if self._signals.fatal is not None:
                self._wake.clear()
                await self._wake.wait()
                continue
            if not m.topics:
                m.leaving = True
            joining = m.epoch == 0
            answer = await self.heartbeat_once(client)
            if m.left:
                m.leaving = False
                m.left = False
                self.set_assignment()
                continue
            if answer is Answer.OK:
                backoff.succeeded()
                wait = m.interval_ms / 1000 if m.interval_ms else 1.0
            elif answer is Answer.FENCED and not joining:
                wait = 0.0  # rejoin at once; a join fenced again backs off (10k/s before)
            else:
                backoff.failed(0.0)
                wait = backoff.delay_s()
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._wake.wait()

    async def heartbeat_once(self, client: ClusterClient) -> Answer:
        m, gid = self.member, self.group_id
        fields = m.next_heartbeat()
        request = ShareGroupHeartbeatRequest(
            group_id=gid,
            member_id=m.member_id,
            member_epoch=fields.member_epoch,
            rack_id=fields.rack_id,
            subscribed_topic_names=fields.subscribed_topic_names,
        )
        try:
            node = (await client.coordinators.find(GROUP, gid)).node_id
            response = await client.send(node, request, purpose="group")
        except KafkaError as exc:
            log.info("share group %r: heartbeat failed: %r", gid, exc)
            client.coordinators.invalidate(GROUP, gid)
            m.failed()
            return Answer.RETRY
        m.sent(fields)
        answer = classify(response.error_code)
        if answer is Answer.OK:
            assignment = None
            if response.assignment is not None:
                assignment = {
                    tp.topic_id: tp.partitions for tp in response.assignment.topic_partitions
                }
            m.answered(response.member_epoch, response.heartbeat_interval_ms, assignment)
            self.set_assignment()
            return answer
        error = for_code(response.error_code)(
            f"ShareGroupHeartbeat for group {gid!r}: {response.error_message or ''}".rstrip(": ")
        )
        m.failed()
        if answer is Answer.FENCED:
            log.info("share group %r: fenced (%s); joining again", gid, type(error).__name__)
            m.fenced()
            self.set_assignment()
        elif answer is Answer.COORDINATOR:
            client.coordinators.invalidate(GROUP, gid)
        elif answer is Answer.FATAL:
            log.error("share group %r: %s", gid, error)
            if m.leaving:
                m.left = True
            else:
                self._signals.fatal = error
                self._signals.errors.append(error)
                m.fenced()
                self.set_assignment()
            self._signals.notify()
        return answer

    def set_assignment(self) -> None:
        """Resolve the member's assignment (topic ids) against the metadata now."""
        client = self._client
        if client is None:
            return
        snap = client.metadata.snapshot
        self.ids = {info.topic_id: name for name, info in snap.topics.items()}
        assigned, unknown = self.member.resolve(self.ids)
        if unknown:
            client.metadata.request_refresh()
        new = frozenset(assigned)
        if new != self.assigned:
            log.info(
                "share group %r: epoch %d assigned %s",
                self.group_id,
                self.member.epoch,
                ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(new)) or "nothing",
            )
            self.assigned = new
            self._signals.notify()
