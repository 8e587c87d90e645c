"""The metadata cache actor (``MetadataCache``): one task owns cluster metadata.

Readers take ``cache.snapshot`` (immutable, never blocks). Anyone who learns the
snapshot is stale calls ``request_refresh()`` (fire and forget) or awaits
``refresh()``; requests that arrive while a refresh is being prepared share it, and a
request that arrives while one is on the wire gets the next one, because the answer
on the wire may predate what the caller saw. Only the topics in use are asked for
(``track``), unless a pattern subscription needs the full list.

Newly tracked topics, and waits for particular topics (``wait_for(..., topics=)``), get
a partial refresh that asks for those topics alone and merges the answer into the
snapshot (KIP-526, as Java's producer): a service sending to 500 new topics one after
another asked 500 times for every topic seen so far, and spent most of a minute
decoding the answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from types import MappingProxyType
from typing import Any

from aiokproto.cluster.snapshot import (
    BrokerInfo,
    ClusterSnapshot,
    PartitionInfo,
    TopicInfo,
    apply_leader_hint,
    apply_metadata,
    usable_broker,
)
from aiokproto.errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    UnknownServerErrorError,
    UnknownTopicOrPartitionError,
    for_code,
)
from aiokproto.logs import RepeatingWarning
from aiokproto.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic

log = logging.getLogger(__name__)

# Errors on a topic that mean "ask again later" rather than "this topic is broken".
_TRANSIENT_TOPIC_ERRORS = {5, 6, 9, 56, 74, 75}

MetadataSender = Callable[[Any], Awaitable[Any]]

# A KRaft broker auto-creating a topic answers UNKNOWN_TOPIC_OR_PARTITION until it
# exists (about 0.1 s on Kafka 4.3.1): with auto-creation asked for, a topic is only
# warned about as missing once it has stayed unknown this long.
AUTO_CREATE_GRACE_S = 1.0


def _partition_layout_error(name: str, indexes: list[int]) -> str | None:
    """Why a topic's partition list is malformed, or None: a broker lists partitions
    0..n-1 exactly once each, and clients map keys onto that range."""
    if sorted(indexes) != list(range(len(indexes))):
        shown = sorted(indexes)[:8]
        return (
            f"the Metadata answer for topic {name!r} lists partitions {shown}"
            f"{'...' if len(indexes) > 8 else ''}, not 0..{len(indexes) - 1}; ignored"
        )
    return None


def snapshot_from_response(
    old: ClusterSnapshot, response: Any, *, full: bool
) -> tuple[ClusterSnapshot, dict[str, int]]:
    """Apply a MetadataResponse; also return topic errors keyed by topic name.

    The answer is untrusted: brokers without a usable address and topics whose
    partitions are not exactly 0..n-1 are left out (an old view of such a topic is
    kept, as for a transient error), so nothing downstream meets an impossible layout.
    """
    brokers = [
        broker
        for broker in (BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in response.brokers)
        if usable_broker(broker)
    ]
    topics: list[TopicInfo] = []
    missing: list[str] = []
    errors: dict[str, int] = {}
    for t in response.topics:
        name = t.name
        if not name:
            continue
        if t.error_code:
            errors[name] = t.error_code
            if t.error_code == UnknownTopicOrPartitionError.errno:
                missing.append(name)
            if t.error_code not in _TRANSIENT_TOPIC_ERRORS or not t.partitions:
                continue
        problem = _partition_layout_error(name, [p.partition_index for p in t.partitions])
        if problem is not None:
            _malformed(problem, kind="malformed topic in a Metadata answer")
            errors.setdefault(name, UnknownServerErrorError.errno)
            continue
        parts = {
            p.partition_index: PartitionInfo(
                topic=name,
                partition=p.partition_index,
                leader=p.leader_id,
                leader_epoch=p.leader_epoch,
                replicas=tuple(p.replica_nodes),
                isr=tuple(p.isr_nodes),
                offline_replicas=tuple(p.offline_replicas),
                error_code=p.error_code,
            )
            for p in t.partitions
        }
        topic_id = getattr(t, "topic_id", None) or uuid.UUID(int=0)
        topics.append(
            TopicInfo(name, topic_id, MappingProxyType(parts), t.is_internal, t.error_code)
        )
    snap = apply_metadata(
        old,
        brokers,
        topics,
        missing=missing,
        controller_id=response.controller_id,
        cluster_id=response.cluster_id,
        full=full,
    )
    return snap, errors


_malformed = RepeatingWarning(log)


class MetadataCache:
    """Owns the metadata refresh task; an async context manager."""

    def __init__(
        self,
        send: MetadataSender,
        *,
        max_age_ms: int,
        retry_backoff_ms: int,
        retry_backoff_max_ms: int,
        allow_auto_create_topics: bool,
    ) -> None:
        self._send = send
        self._max_age = max_age_ms / 1000
        self._retry_backoff = retry_backoff_ms / 1000
        self._retry_backoff_max = max(retry_backoff_ms, retry_backoff_max_ms) / 1000
        self._last_refresh = -math.inf  # loop time the last refresh ended
        self._last_asked: frozenset[str] | None = frozenset()  # None: all topics
        # what the next refresh asks for: every tracked topic (anyone who saw staleness,
        # and the max_age poll), else only the topics in _partial
        self._full_wanted = True
        self._partial: set[str] = set()
        # tracked topics no request has asked about yet: they skip the back-off
        self._unasked: set[str] = set()
        self._more = asyncio.Event()  # the next refresh asks for topics the last did not
        self._incomplete = 0  # refreshes in a row that left a tracked topic unusable
        self._auto_create = allow_auto_create_topics
        self.snapshot = ClusterSnapshot()
        self.topic_errors: dict[str, int] = {}
        self._topics: dict[str, int] = {}  # tracked topic -> number of users
        self._all_topics = 0
        self._waiters: list[asyncio.Future[ClusterSnapshot]] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()  # replaced by a fresh one at every publish
        self._poll_timer: asyncio.TimerHandle | None = None
        self._last_error: KafkaError | None = None
        self._closed = False
        # an outage makes every refresh fail the same way: say so once, then summarise
        self._refresh_failed = RepeatingWarning(log)
        # topic -> loop time until which its "does not exist" warning is not repeated
        self._missing_warned: dict[str, float] = {}
        # topic -> loop time of the first warn_missing() about it (auto-creation on)
        self._unknown_since: dict[str, float] = {}
        self._refresh_listeners: list[Callable[[], None]] = []

    async def __aenter__(self) -> MetadataCache:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="aiokproto-metadata"
            )

    async def close(self) -> None:
        """Stop refreshing; callers waiting in ``refresh()``/``wait_for()`` get
        ``KafkaConnectionError`` at once."""
        self._closed = True
        task, self._task = self._task, None
        if self._poll_timer is not None:
            self._poll_timer.cancel()
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
        self._fail_waiters(KafkaConnectionError("the client was closed"))
        self.interrupt_waiters()

    def _fail_waiters(self, error: KafkaError) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_exception(error)
                waiter.exception()  # a waiter whose caller gave up must not warn

    async def next_change(self) -> None:
        """Wait (without asking for a refresh) until a new snapshot is published or the
        cache closes."""
        if self._closed:
            raise KafkaConnectionError("the client was closed")
        await self._changed.wait()

    def interrupt_waiters(self) -> None:
        """Wake ``wait_for()`` callers to re-check their predicate (and the cache)."""
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    # -- what to ask for ---------------------------------------------------------

    def track(self, topics: Iterable[str]) -> None:
        new: list[str] = []
        for topic in topics:
            if topic not in self._topics or self.snapshot.topics.get(topic) is None:
                new.append(topic)
            self._topics[topic] = self._topics.get(topic, 0) + 1
        if new:
            self._unasked.update(new)
            self.request_refresh(new)

    def untrack(self, topics: Iterable[str]) -> None:
        for topic in topics:
            count = self._topics.get(topic, 0) - 1
            if count > 0:
                self._topics[topic] = count
            else:
                self._topics.pop(topic, None)
                self._unasked.discard(topic)

    def want_all_topics(self, on: bool) -> None:
        self._all_topics += 1 if on else -1
        if on:
            self.request_refresh()

    @property
    def last_error(self) -> KafkaError | None:
        """Why the last refresh failed (None after a success)."""
        return self._last_error

    @property
    def tracked(self) -> frozenset[str]:
        return frozenset(self._topics)

    # -- missing topics ----------------------------------------------------------

    def unknown(self, topic: str) -> bool:
        """The last answer said ``topic`` does not exist (UNKNOWN_TOPIC_OR_PARTITION:
        auto-creation is off, or the broker refused to create it)."""
        return self.topic_errors.get(topic) == UnknownTopicOrPartitionError.errno

    def warn_missing(
        self, topic: str, logger: logging.Logger, message: str, *, quiet_s: float = math.inf
    ) -> None:
        """Log ``message`` as a WARNING about missing ``topic``, unless one was logged
        for it less than ``quiet_s`` (that warning's) ago, or auto-creation is asked for
        and it has been missing for less than ``AUTO_CREATE_GRACE_S`` (it is likely being
        created); re-armed once it exists."""
        now = asyncio.get_running_loop().time()
        if self._missing_warned.get(topic, -math.inf) > now:
            return
        if self._auto_create and now - self._unknown_since.setdefault(topic, now) < (
            AUTO_CREATE_GRACE_S
        ):
            return
        self._missing_warned[topic] = now + quiet_s
        logger.warning("%s", message)

    def warn_send_waits(self, topic: str, logger: logging.Logger, wait_s: float) -> None:
        """``warn_missing`` for a send() that waits up to ``wait_s`` for ``topic``
        (max_block_ms): once per such wait, however many records wait."""
        deadline = time.strftime("%H:%M:%S", time.localtime(time.time() + wait_s))
        self.warn_missing(
            topic,
            logger,
            f"topic {topic!r} is not in metadata; auto-creation is disabled or the topic "
            f"does not exist: waiting for it until {deadline} (max_block_ms="
            f"{wait_s * 1000:.0f}), then KafkaTimeoutError",
            quiet_s=wait_s,
        )

    def warn_missing_subscribed(
        self, topics: Iterable[str], logger: logging.Logger, owner: str
    ) -> None:
        """``warn_missing`` for each of a consumer's subscribed ``topics`` that the last
        answer said does not exist (once per topic, until it exists)."""
        for topic in topics:
            if self.unknown(topic):
                self.warn_missing(
                    topic,
                    logger,
                    f"{owner}: subscribed topic {topic!r} is not in metadata; auto-creation "
                    "is disabled or the topic does not exist: it gets no partitions until "
                    "it is created",
                )

    def add_refresh_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` after every successful refresh (until removed)."""
        self._refresh_listeners.append(listener)

    def remove_refresh_listener(self, listener: Callable[[], None]) -> None:
        with contextlib.suppress(ValueError):
            self._refresh_listeners.remove(listener)

    # -- refreshing --------------------------------------------------------------

    def request_refresh(self, topics: Iterable[str] | None = None) -> None:
        """Ask for a refresh soon; returns at once. ``topics``: only these need fresh
        metadata (a partial refresh, unless a full one is due anyway)."""
        if topics is None:
            self._full_wanted = True
        else:
            self._partial.update(topics)
        if self._asks_for_more():
            self._more.set()  # cuts a back-off wait short
        self._wake.set()

    async def refresh(self) -> ClusterSnapshot:
        """Refresh now (coalesced with concurrent callers) and return the new snapshot."""
        if self._task is None:
            raise KafkaConnectionError("the metadata cache is not running (client closed?)")
        waiter: asyncio.Future[ClusterSnapshot] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        self.request_refresh()
        return await asyncio.shield(waiter)

    def apply_leader_hint(
        self,
        topic: str,
        partition: int,
        leader: int,
        leader_epoch: int,
        endpoints: Iterable[BrokerInfo] = (),
    ) -> bool:
        """Apply a KIP-951 new-leader hint; True if it changed the snapshot."""
        snap = apply_leader_hint(self.snapshot, topic, partition, leader, leader_epoch, endpoints)
        if snap is None:
            return False
        self._publish(snap)
        return True

    async def wait_for(
        self,
        predicate: Callable[[ClusterSnapshot], bool],
        timeout_s: float | None,
        *,
        topics: Iterable[str] | None = None,
    ) -> ClusterSnapshot:
        """Wait until a published snapshot satisfies ``predicate``, refreshing as needed
        (``timeout_s`` None: as long as it takes). ``topics``: the predicate looks at
        these only, so refreshes for it ask for them alone."""
        wanted = None if topics is None else tuple(topics)
        try:
            async with asyncio.timeout(timeout_s):
                while not predicate(self.snapshot):
                    if self._closed:
                        raise KafkaConnectionError("the client was closed")
                    changed = self._changed
                    self.request_refresh(wanted)
                    await changed.wait()
        except TimeoutError:
            detail = f" (last error: {self._last_error})" if self._last_error else ""
            raise KafkaTimeoutError(
                f"cluster metadata did not show what was needed within {timeout_s} s{detail}"
            ) from None
        return self.snapshot

    def _publish(self, snap: ClusterSnapshot) -> None:
        self.snapshot = snap
        self.interrupt_waiters()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                async with asyncio.timeout(self._max_age):
                    await self._wake.wait()
            except TimeoutError:
                self._full_wanted = True  # metadata.max.age.ms: every tracked topic
            # Never two refreshes closer than retry_backoff unless topics were added
            # since the last one: a send() to a topic that does not exist asked again
            # after every answer, some 6,500 Metadata requests a second.
            early = self._last_refresh + self._retry_backoff - loop.time()
            if early > 0 and not self._asks_for_more():
                self._more.clear()  # set by track(): a new topic cuts the wait short
                try:
                    async with asyncio.timeout(early):
                        await self._more.wait()
                except TimeoutError:
                    pass
            self._wake.clear()
            waiters, self._waiters = self._waiters, []
            full_wanted, self._full_wanted = self._full_wanted, False
            partial, self._partial = self._partial, set()
            try:
                try:
                    snap = await self._refresh_once(None if full_wanted else partial)
                finally:
                    self._last_refresh = loop.time()
            except asyncio.CancelledError:
                self._waiters[:0] = waiters  # close() fails them with a typed error
                raise
            except KafkaError as exc:
                # whoever asked gets the error; what was asked for is asked again next
                self._full_wanted |= full_wanted
                self._partial |= partial
                self._last_error = exc
                self._refresh_failed(
                    f"metadata refresh failed: {exc}", kind="metadata refresh failed"
                )
                for w in waiters:
                    if not w.done():
                        w.set_exception(exc)
                        w.exception()  # its caller may have given up (timeout)
                await asyncio.sleep(self._retry_backoff)
                continue
            except Exception as exc:  # a bug or an impossible answer: fail the callers
                self._full_wanted |= full_wanted
                self._partial |= partial
                log.exception("metadata refresh failed unexpectedly")
                error = KafkaError(f"metadata refresh failed unexpectedly: {exc!r}")
                for w in waiters:
                    if not w.done():
                        w.set_exception(error)
                        w.exception()
                await asyncio.sleep(self._retry_backoff)
                continue
            self._last_error = None
            self._refresh_failed.recovered()
            for w in waiters:
                if not w.done():
                    w.set_result(snap)
            if self._missing_warned:  # a topic that exists now is warned about again
                for topic in [t for t in self._missing_warned if t in snap.topics]:
                    del self._missing_warned[topic]
            if self._unknown_since:
                for topic in [t for t in self._unknown_since if t in snap.topics]:
                    del self._unknown_since[topic]
            for listener in list(self._refresh_listeners):
                try:
                    listener()
                except Exception:  # a listener's bug must not stop the refreshes
                    log.exception("a metadata refresh listener failed")
            # Unknown or leaderless topics that are in use: poll again soon, backing off
            # up to retry_backoff_max while they stay so (a deleted topic would
            # otherwise be asked for ten times a second for as long as it is tracked).
            if self._unusable():
                delay = min(self._retry_backoff * 2**self._incomplete, self._retry_backoff_max)
                self._incomplete = min(self._incomplete + 1, 30)
                if self._poll_timer is not None:
                    self._poll_timer.cancel()  # one poll pending, not one per refresh
                self._poll_timer = loop.call_later(delay, self._poll_unusable)
            else:
                self._incomplete = 0

    def _unusable(self) -> list[str]:
        return [
            t for t in self._topics
            if self.topic_errors.get(t) or self.snapshot.topics.get(t) is None
        ]

    def _poll_unusable(self) -> None:
        """Ask again about the tracked topics still unusable now (not those that were
        when the poll was scheduled: hundreds of new topics answered by the next
        request meanwhile were asked for again)."""
        unusable = self._unusable()
        if unusable:
            self.request_refresh(unusable)

    def _asks_for_more(self) -> bool:
        """Whether the next refresh asks about topics no request has asked about yet
        (newly tracked, or every topic for a new pattern subscription): only those skip
        the back-off. Asking again about a topic (a NOT_LEADER, a missing topic polled)
        waits for it, however the topics of the partial refreshes vary."""
        if self._all_topics > 0:
            return self._last_asked is not None
        return bool(self._unasked)

    async def _refresh_once(self, partial: set[str] | None) -> ClusterSnapshot:
        """One Metadata round trip: every topic (a pattern subscription), every tracked
        topic (``partial`` None), or the tracked topics of ``partial`` alone, merged
        into the snapshot."""
        full = self._all_topics > 0
        if full:
            topics = None
        elif partial is None:
            topics = sorted(self._topics)
        else:
            # a topic untracked since it was asked for needs nothing; nothing left:
            # the brokers are still asked for (a wake-up always refreshes something)
            topics = sorted(partial.intersection(self._topics))
        self._last_asked = None if topics is None else frozenset(topics)
        if topics is None:
            self._unasked.clear()
        else:
            self._unasked.difference_update(topics)
        request = MetadataRequest(
            topics=None if topics is None else [MetadataRequestTopic(name=t) for t in topics],
            allow_auto_topic_creation=self._auto_create,
        )
        response = await self._send(request)
        top_error = getattr(response, "error_code", 0)
        if top_error:
            raise for_code(top_error)("Metadata request")
        snap, errors = snapshot_from_response(self.snapshot, response, full=full)
        if partial is not None and not full:
            # the other topics' errors still stand: only these were asked about
            kept = {t: code for t, code in self.topic_errors.items() if t not in partial}
            kept.update(errors)
            errors = kept
        self.topic_errors = errors
        self._publish(snap)
        return snap
