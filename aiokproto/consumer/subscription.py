"""What the consumer is subscribed to, what it is assigned, and where it is in each
partition: ``SubscriptionState``, one ``PartitionState`` per assigned partition (pure).

Plain state on one event loop: no I/O, no tasks, no locks. The user API, the group task
and the fetcher all read and write it; the rules that keep them consistent live here.

Each assigned partition has a ``PartitionState`` object. When a partition leaves the
assignment its object is dropped, and if it comes back it gets a new one, so the fetcher
can tell stale prefetched data apart by object identity (``state_of(tp) is state``) and
by offset (``state.position == fetched offset``); a seek changes the position, which
invalidates buffered data for that partition the same way.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Literal

from aiokproto.consumer.listener import ConsumerRebalanceListener
from aiokproto.errors import IllegalStateError, KafkaConfigError
from aiokproto.structs import OffsetAndMetadata, TopicPartition

SubscriptionKind = Literal["none", "topics", "pattern", "assigned"]
ResetStrategy = Literal["earliest", "latest"]


class PartitionState:
    """One assigned partition: position and what the last fetch told us about it."""

    __slots__ = (
        "base",
        "fetched_at_ms",
        "handed",
        "held",
        "highwater",
        "last_stable_offset",
        "leader_epoch",
        "log_start_offset",
        "paused",
        "position",
        "preferred_replica",
        "preferred_until",
        "reset",
        "revoking",
        "seeks",
        "stored",
        "validate_epoch",
    )

    def __init__(self) -> None:
        # next offset to hand out; None until resolved (committed offset or a reset)
        self.position: int | None = None
        # epoch of the last consumed record (-1 unknown); sent as last_fetched_epoch
        self.leader_epoch = -1
        self.paused = False
        # a seek_to_beginning/end (or auto reset) waiting for ListOffsets
        self.reset: ResetStrategy | None = None
        # position came with an epoch that must be checked against the leader (KIP-320)
        self.validate_epoch = False
        self.highwater: int | None = None
        self.fetched_at_ms: int | None = None  # wall clock of the last fetch answer
        self.last_stable_offset: int | None = None
        self.log_start_offset: int | None = None
        # KIP-392 follower fetching: node to fetch from, until a monotonic deadline
        self.preferred_replica: int | None = None
        self.preferred_until = 0.0
        # counts seeks and resets: an error tied to a position is over once it moves,
        # even to the same offset
        self.seeks = 0
        # the position as of the last commit, seek or reset: position != base means
        # records were handed out that no commit covers yet
        self.base: int | None = None
        # the offset after the last record handed to the application (None: none yet);
        # handed > base means records were handed out that no commit covers
        self.handed: int | None = None
        # being given back to the group: nothing is fetched or handed out any more
        self.revoking = False
        # just assigned, on_partitions_assigned still running (it may seek): nothing is
        # fetched, handed out or looked up until it returns
        self.held = False
        # what store_offsets() stored (enable_auto_offset_store=False): commits take
        # it instead of the position; gone with the state when the partition is revoked
        self.stored: OffsetAndMetadata | None = None

    @property
    def fetchable(self) -> bool:
        return (
            self.position is not None
            and not self.paused
            and self.reset is None
            and not self.validate_epoch
            and not self.revoking
            and not self.held
        )

    def uncommitted(self) -> bool:
        """Records were handed out past the last commit, seek or reset."""
        handed = self.handed
        return handed is not None and (self.base is None or handed > self.base)

    def __repr__(self) -> str:
        return (
            f"PartitionState(position={self.position}, leader_epoch={self.leader_epoch},"
            f" paused={self.paused}, reset={self.reset})"
        )


def _check_topics(topics: Iterable[str]) -> frozenset[str]:
    if isinstance(topics, str):
        topics = (topics,)
    out = []
    for topic in topics:
        if not isinstance(topic, str) or not topic:
            hint = ""
            if isinstance(topic, list | tuple | set | frozenset):
                # Consumer(["a", "b"]): the constructor takes names as arguments (aiokafka's
                # does too), where subscribe() and confluent-kafka's take one list
                hint = "; Consumer() takes topic names as separate arguments: Consumer('a', 'b')"
            raise KafkaConfigError(f"topic names must be non-empty strings, not {topic!r}{hint}")
        out.append(topic)
    return frozenset(out)


# Python flags with an RE2/J inline equivalent; any other flag (VERBOSE, LOCALE) would
# silently change the meaning, so it is refused.
_INLINE_FLAGS = ((re.IGNORECASE, "i"), (re.MULTILINE, "m"), (re.DOTALL, "s"))


def _broker_regex(pattern: object) -> str:
    if isinstance(pattern, re.Pattern):
        source = pattern.pattern
        if not isinstance(source, str):
            raise KafkaConfigError("a topic pattern must be text, not bytes")
        flags = pattern.flags & ~re.UNICODE
        inline = "".join(letter for flag, letter in _INLINE_FLAGS if flags & flag)
        flags &= ~(re.IGNORECASE | re.MULTILINE | re.DOTALL)
        if flags:
            raise KafkaConfigError(
                f"pattern flags {re.RegexFlag(flags)!r} have no RE2/J equivalent; the broker "
                "matches the regex, so write it without them"
            )
        return f"(?{inline}){source}" if inline else source
    if not isinstance(pattern, str):
        raise KafkaConfigError(f"pattern must be a str or re.Pattern, not {pattern!r}")
    if not pattern:
        raise KafkaConfigError("the topic pattern is empty")
    return pattern


def _check_partitions(partitions: Iterable[TopicPartition]) -> frozenset[TopicPartition]:
    out = []
    for tp in partitions:
        if not isinstance(tp, tuple) or len(tp) != 2:
            raise KafkaConfigError(f"expected TopicPartition(topic, partition), not {tp!r}")
        topic, partition = tp
        if not isinstance(topic, str) or not topic:
            raise KafkaConfigError(f"{tp!r}: topic must be a non-empty string")
        if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
            raise KafkaConfigError(f"{tp!r}: partition must be an int >= 0")
        out.append(TopicPartition(topic, partition))
    return frozenset(out)


class SubscriptionState:
    """What the consumer is subscribed to and where it is in each assigned partition.

    Plain state, no I/O, no tasks; single event loop, so no locks.
    ``version`` counts subscription changes (the group rejoins when it moves);
    ``assignment_version`` counts assignment changes.
    """

    def __init__(self) -> None:
        self._kind: SubscriptionKind = "none"
        self._topics: frozenset[str] = frozenset()
        self._pattern: re.Pattern[str] | None = None
        # a regex the broker matches (group_protocol="consumer"): its RE2/J source
        self._regex: str | None = None
        self._matched: frozenset[str] = frozenset()
        self._listener: ConsumerRebalanceListener | None = None
        self._states: dict[TopicPartition, PartitionState] = {}
        self._assigned: frozenset[TopicPartition] = frozenset()
        self.version = 0
        self.assignment_version = 0
        self._listeners: list[Callable[[], None]] = []
        #: set by the consumer: {tp: (offset, leader epoch)} of the first record taken
        #: from the fetcher but not yet handed to the application, per partition
        self.not_yet_consumed: Callable[[], dict[TopicPartition, tuple[int, int]]] | None = None
        #: set by the consumer: forget records of these partitions taken from the
        #: fetcher but not handed out yet (rewinding their positions)
        self.on_revoking: Callable[[frozenset[TopicPartition]], None] | None = None
        #: set by a ParallelConsumer: wraps the listener given to ``subscribe()`` (its
        #: own in front), so the revoke a re-subscription starts goes through it too
        self.listener_hook: (
            Callable[[ConsumerRebalanceListener | None], ConsumerRebalanceListener] | None
        ) = None
        # states that left the assignment with records handed out but not committed
        self._retired: dict[TopicPartition, PartitionState] = {}
        #: enable_auto_offset_store=False: commits without offsets (auto-commit, the
        #: commit before a revoke or a leave, commit()) take the stored offsets
        self.use_stored = False

    def add_change_listener(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` (synchronously) after the assignment changes or a partition
        gets a new position, reset request or resume: the fetcher wakes on it."""
        self._listeners.append(callback)

    def notify_changed(self) -> None:
        """Tell listeners about a change made directly on a ``PartitionState``."""
        self._changed()

    def _changed(self) -> None:
        for callback in self._listeners:
            callback()

    # --- subscription -------------------------------------------------------------

    def subscribe(
        self,
        topics: Iterable[str] = (),
        *,
        pattern: re.Pattern[str] | str | None = None,
        listener: ConsumerRebalanceListener | None = None,
        broker_regex: bool = False,
    ) -> None:
        """Subscribe to topics or to a regex (not both); an empty subscription unsubscribes.

        ``broker_regex``: the broker matches the regex (RE2/J syntax), so it is kept as
        text rather than compiled with Python's ``re`` (``pattern`` stays None)."""
        names = _check_topics(topics)
        if names and pattern is not None:
            hint = ""
            if isinstance(topics, str) and isinstance(pattern, str):
                # subscribe("a", "b"), as Consumer("a", "b") takes them: "b" is the pattern
                hint = f"; for several topics pass one list: subscribe({[topics, pattern]!r})"
            raise KafkaConfigError(f"subscribe() takes topics or a pattern, not both{hint}")
        if listener is not None and not isinstance(listener, ConsumerRebalanceListener):
            raise KafkaConfigError(
                f"listener must be a ConsumerRebalanceListener, not {type(listener).__name__}"
            )
        if self._kind == "assigned":
            raise IllegalStateError(
                "the consumer has a manual assignment; call unsubscribe() before subscribe()"
            )
        regex: str | None = None
        if broker_regex and pattern is not None:
            regex = _broker_regex(pattern)
            pattern = None
        elif isinstance(pattern, str):
            try:
                pattern = re.compile(pattern)
            except re.error as exc:
                raise KafkaConfigError(f"invalid topic pattern {pattern!r}: {exc}") from None
        elif pattern is not None and not isinstance(pattern, re.Pattern):
            raise KafkaConfigError(f"pattern must be a str or re.Pattern, not {pattern!r}")
        if not names and pattern is None and regex is None:
            self.unsubscribe()
            return
        hook = self.listener_hook
        self._listener = listener if hook is None else hook(listener)
        if pattern is not None or regex is not None:
            if self._kind == "pattern" and self._pattern == pattern and self._regex == regex:
                return
            self._kind = "pattern"
            self._pattern = pattern
            self._regex = regex
            self._topics = frozenset()
            self._matched = frozenset()
        else:
            if self._kind == "topics" and self._topics == names:
                return
            self._kind = "topics"
            self._topics = names
            self._pattern = None
            self._regex = None
            self._matched = frozenset()
        self.version += 1

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Manual assignment; replaces the previous one (kept partitions keep positions)."""
        tps = _check_partitions(partitions)
        if self._kind in ("topics", "pattern"):
            raise IllegalStateError(
                "the consumer is subscribed to topics; call unsubscribe() before assign()"
            )
        if not tps:
            self.unsubscribe()
            return
        if self._kind == "none" and self._assigned:
            # still assigned: a group being left in the background (unsubscribe()).
            # Its partition states are the group's (being revoked, positions for its
            # final commit); the manual assignment starts afresh.
            self._states = {}
            self._assigned = frozenset()
        self._kind = "assigned"
        self._listener = None
        self._set_assignment(tps)

    def forget_subscription(self) -> None:
        """Stop being subscribed now, keeping the assignment, its positions and the
        listener until ``unsubscribe()``: a group member leaving in the background still
        commits and revokes what it owns."""
        if self._kind in ("topics", "pattern"):
            self.version += 1
            self._kind = "none"
            self._topics = frozenset()
            self._pattern = None
            self._regex = None
            self._matched = frozenset()

    def unsubscribe(self) -> None:
        """Drop the subscription or manual assignment and every position."""
        if self._kind in ("topics", "pattern"):
            self.version += 1
        self._retired.clear()
        self._kind = "none"
        self._topics = frozenset()
        self._pattern = None
        self._regex = None
        self._matched = frozenset()
        self._listener = None
        self._set_assignment(frozenset())

    @property
    def kind(self) -> SubscriptionKind:
        return self._kind

    @property
    def pattern(self) -> re.Pattern[str] | None:
        return self._pattern

    @property
    def regex(self) -> str | None:
        """The regex the broker matches (RE2/J source), for group_protocol="consumer"."""
        return self._regex

    @property
    def listener(self) -> ConsumerRebalanceListener | None:
        return self._listener

    @property
    def topics(self) -> frozenset[str]:
        """The subscribed topics: the explicit ones, or the pattern's current matches."""
        return self._matched if self._kind == "pattern" else self._topics

    @property
    def in_group(self) -> bool:
        """True when the assignment comes from a group (topics or a pattern)."""
        return self._kind in ("topics", "pattern")

    def set_matched_topics(self, topics: Iterable[str]) -> bool:
        """Record which existing topics the pattern matches; True if that changed."""
        if self._kind != "pattern":
            return False
        matched = _check_topics(topics)
        if matched == self._matched:
            return False
        self._matched = matched
        self.version += 1
        return True

    # --- assignment ---------------------------------------------------------------

    def assigned(self) -> frozenset[TopicPartition]:
        return self._assigned

    def set_group_assignment(
        self, partitions: Iterable[TopicPartition], *, hold: bool = False
    ) -> None:
        """The group's assignment for this member (the full owned set). With ``hold``
        the partitions it adds are held until ``release_held()`` (the listener runs).

        Ignored unless subscribed: an answer that arrives after ``unsubscribe()`` or a
        switch to manual assignment must not overwrite what the user chose.
        """
        tps = _check_partitions(partitions)
        if self._kind in ("topics", "pattern"):
            self._set_assignment(tps, retire=True, hold=hold)

    def release_held(self) -> None:
        """``on_partitions_assigned`` returned: fetch and hand out the new partitions."""
        released = False
        for state in self._states.values():
            if state.held:
                state.held = False
                released = True
        if released:
            self._changed()

    def _set_assignment(
        self, tps: frozenset[TopicPartition], *, retire: bool = False, hold: bool = False
    ) -> None:
        if tps == self._assigned:
            return
        states = self._states
        new_states: dict[TopicPartition, PartitionState] = {}
        for tp in tps:
            state = states.get(tp)
            if state is None:
                state = PartitionState()
                state.held = hold
            new_states[tp] = state
        self._states = new_states
        if retire:  # the group took them: remember any consumption no commit covers
            for tp, state in states.items():
                if tp not in tps and state.uncommitted():
                    self._retired[tp] = state
        self._assigned = tps
        self.assignment_version += 1
        self._changed()

    def state_of(self, tp: TopicPartition) -> PartitionState | None:
        """The partition's live state object, or None when it is not assigned."""
        return self._states.get(tp)

    def states(self) -> dict[TopicPartition, PartitionState]:
        """Live view of every assigned partition's state (do not mutate the dict)."""
        return self._states

    def _state(self, tp: TopicPartition) -> PartitionState:
        state = self._states.get(tp)
        if state is None:
            raise IllegalStateError(f"{tp} is not assigned to this consumer")
        return state

    # --- positions ----------------------------------------------------------------

    def position(self, tp: TopicPartition) -> int | None:
        return self._state(tp).position

    def leader_epoch(self, tp: TopicPartition) -> int:
        return self._state(tp).leader_epoch

    def seek(self, tp: TopicPartition, offset: int, leader_epoch: int = -1) -> None:
        """Consume ``tp`` from ``offset`` next; buffered data for it is discarded."""
        if not isinstance(offset, int) or isinstance(offset, bool) or not 0 <= offset < 2**63:
            # (an offset past int64 could not even be sent: the fetch would fail for
            # every partition)
            raise KafkaConfigError(f"seek offset must be an int in [0, 2**63), not {offset!r}")
        state = self._state(tp)
        state.position = state.base = offset
        state.leader_epoch = leader_epoch
        state.seeks += 1
        state.reset = None
        # an epoch from elsewhere (a commit) must be checked against the log (KIP-320)
        state.validate_epoch = leader_epoch >= 0
        self._changed()

    def request_reset(self, tp: TopicPartition, strategy: ResetStrategy) -> None:
        """Move ``tp`` to its earliest/latest offset once ListOffsets answers."""
        state = self._state(tp)
        state.reset = strategy
        state.validate_epoch = False
        self._changed()

    def pending_resets(self) -> dict[TopicPartition, ResetStrategy]:
        return {tp: s.reset for tp, s in self._states.items() if s.reset is not None}

    def finish_reset(self, tp: TopicPartition, strategy: ResetStrategy, offset: int) -> bool:
        """Apply a ListOffsets answer unless the partition moved meanwhile; True if applied."""
        state = self._states.get(tp)
        if state is None or state.reset != strategy:
            return False
        state.position = state.base = offset
        state.leader_epoch = -1
        state.seeks += 1
        state.reset = None
        state.validate_epoch = False
        self._changed()
        return True

    def missing_positions(self) -> list[TopicPartition]:
        """Assigned partitions with no position and no reset pending."""
        return [
            tp
            for tp, s in self._states.items()
            if s.position is None and s.reset is None and not s.held
        ]

    def any_held(self) -> bool:
        """Some partition waits for ``on_partitions_assigned`` to return."""
        return any(s.held for s in self._states.values())

    def needs_validation(self) -> list[TopicPartition]:
        return [tp for tp, s in self._states.items() if s.validate_epoch]

    def all_consumed(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """Position and epoch of every assigned partition that has a position.

        Records the consumer has taken from the fetcher but not yet given to the
        application (``async for`` hands out a chunk one by one) do not count. With
        ``use_stored``, the offsets ``store_offsets()`` stored instead (partitions with
        none are left out).
        """
        if self.use_stored:
            return {tp: s.stored for tp, s in self._states.items() if s.stored is not None}
        out = {
            tp: OffsetAndMetadata(s.position, "", s.leader_epoch)
            for tp, s in self._states.items()
            if s.position is not None
        }
        if self.not_yet_consumed is not None:
            for tp, (offset, epoch) in self.not_yet_consumed().items():
                if tp in out:
                    out[tp] = OffsetAndMetadata(offset, "", epoch)
        return out

    # --- rebalances and commits ---------------------------------------------------

    def start_revoking(self, tps: frozenset[TopicPartition]) -> None:
        """The group takes these back: stop fetching and handing them out now (before
        the commit and the listener run); they stay assigned until it is done."""
        for tp in tps:
            state = self._states.get(tp)
            if state is not None:
                state.revoking = True
        if self.on_revoking is not None:
            self.on_revoking(tps)
        self._changed()

    def note_committed(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        states: Mapping[TopicPartition, PartitionState | None],
    ) -> None:
        """A commit of ``offsets`` succeeded; ``states`` are the partitions' states as
        of when it was sent (one may have left the assignment meanwhile)."""
        for tp, om in offsets.items():
            state = states.get(tp)
            if state is not None:
                state.base = om.offset

    def take_uncommitted_moved(self) -> list[TopicPartition]:
        """Partitions that left the assignment with records handed out and never
        committed (they will be consumed again elsewhere); forgotten once returned."""
        moved = sorted(tp for tp, state in self._retired.items() if state.uncommitted())
        self._retired.clear()
        return moved

    # --- pause / resume -----------------------------------------------------------

    def pause(self, *tps: TopicPartition) -> None:
        for tp in tps:
            self._state(tp).paused = True

    def resume(self, *tps: TopicPartition) -> None:
        for tp in tps:
            self._state(tp).paused = False
        self._changed()

    def paused(self) -> frozenset[TopicPartition]:
        return frozenset(tp for tp, s in self._states.items() if s.paused)
