"""KIP-714 client telemetry: the subscription/push state machine, sans-I/O.

The states are Java's ``ClientTelemetryState``. One ``TABLE`` maps every (state, input)
to the next state and when the next request is due; an unlisted pair leaves both as
they are (a late answer after close, say). ``TelemetryMachine`` applies the table with
times from the caller's clock, keeps the current subscription and says what to do next.

Inputs, and what the actor feeds for each:

* ``SEND``: a GetTelemetrySubscriptions or PushTelemetry request goes out now
* ``SUBSCRIBED`` / ``NO_METRICS``: a subscription arrived that requests some / no metrics
  (none: ask again after the push interval, push nothing)
* ``PUSHED``: the broker took the push
* ``RESUBSCRIBE``: UNKNOWN_SUBSCRIPTION_ID or UNSUPPORTED_COMPRESSION_TYPE: subscribe
  again at once
* ``BACK_OFF``: TELEMETRY_TOO_LARGE or THROTTLING_QUOTA_EXCEEDED: subscribe again after
  the push interval
* ``FATAL``: INVALID_REQUEST, INVALID_RECORD, UNSUPPORTED_VERSION or a code KIP-714 does
  not name: telemetry stops for good
* ``CONNECTION_ERROR``: the request failed on the wire: subscribe again (on another
  broker) after a back-off that doubles with each failure in a row (``retry_s`` up to
  ``RETRY_MAX_S``), so an outage does not add a connection attempt a second
* ``UNSUPPORTED``: the broker does not offer the telemetry APIs: ask again (maybe
  another broker) after the default interval, as Java does
* ``CLOSE``: the client is closing: one terminating push if a subscription is in use
"""

from __future__ import annotations

import enum
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final
from uuid import UUID

from aiokproto.errors import (
    InvalidRecordError,
    InvalidRequestError,
    TelemetryTooLargeError,
    ThrottlingQuotaExceededError,
    UnknownSubscriptionIdError,
    UnsupportedCompressionTypeError,
    UnsupportedVersionError,
)
from aiokproto.telemetry.name import MetricSelector

#: Java's ClientTelemetryReporter.DEFAULT_PUSH_INTERVAL_MS
DEFAULT_PUSH_INTERVAL_MS: Final = 5 * 60 * 1000
#: the first push after a subscription is spread over 50%-150% of the interval
JITTER_LOW: Final = 0.5
JITTER_HIGH: Final = 1.5
#: the longest back-off after connection errors in a row
RETRY_MAX_S: Final = 30.0
#: the least a client metrics subscription's interval.ms may be (KIP-714)
MIN_PUSH_INTERVAL_MS: Final = 100


class State(enum.Enum):
    SUBSCRIPTION_NEEDED = "SUBSCRIPTION_NEEDED"
    SUBSCRIPTION_IN_PROGRESS = "SUBSCRIPTION_IN_PROGRESS"
    PUSH_NEEDED = "PUSH_NEEDED"
    PUSH_IN_PROGRESS = "PUSH_IN_PROGRESS"
    TERMINATING_PUSH_NEEDED = "TERMINATING_PUSH_NEEDED"
    TERMINATING_PUSH_IN_PROGRESS = "TERMINATING_PUSH_IN_PROGRESS"
    TERMINATED = "TERMINATED"


class Input(enum.Enum):
    SEND = "SEND"
    SUBSCRIBED = "SUBSCRIBED"
    NO_METRICS = "NO_METRICS"
    PUSHED = "PUSHED"
    RESUBSCRIBE = "RESUBSCRIBE"
    BACK_OFF = "BACK_OFF"
    FATAL = "FATAL"
    CONNECTION_ERROR = "CONNECTION_ERROR"
    UNSUPPORTED = "UNSUPPORTED"
    CLOSE = "CLOSE"


class Due(enum.Enum):
    """When the next request is due after a transition."""

    KEEP = "KEEP"  # unchanged
    NOW = "NOW"
    INTERVAL = "INTERVAL"  # the subscription's push interval (default if none)
    JITTERED = "JITTERED"  # the interval times a random 0.5-1.5
    RETRY = "RETRY"  # the connection-error back-off (doubling)
    DEFAULT = "DEFAULT"  # DEFAULT_PUSH_INTERVAL_MS


@dataclass(frozen=True, slots=True)
class Transition:
    state: State
    due: Due = Due.KEEP


S, In = State, Input
_ERRORS_IN_FLIGHT: Mapping[Input, Transition] = {
    In.RESUBSCRIBE: Transition(S.SUBSCRIPTION_NEEDED, Due.NOW),
    In.BACK_OFF: Transition(S.SUBSCRIPTION_NEEDED, Due.INTERVAL),
    In.FATAL: Transition(S.TERMINATED),
    In.CONNECTION_ERROR: Transition(S.SUBSCRIPTION_NEEDED, Due.RETRY),
    In.UNSUPPORTED: Transition(S.SUBSCRIPTION_NEEDED, Due.DEFAULT),
}

_LISTED: Mapping[tuple[State, Input], Transition] = {
    (S.SUBSCRIPTION_NEEDED, In.SEND): Transition(S.SUBSCRIPTION_IN_PROGRESS),
    (S.SUBSCRIPTION_NEEDED, In.CLOSE): Transition(S.TERMINATED),
    (S.SUBSCRIPTION_IN_PROGRESS, In.SUBSCRIBED): Transition(S.PUSH_NEEDED, Due.JITTERED),
    (S.SUBSCRIPTION_IN_PROGRESS, In.NO_METRICS): Transition(S.SUBSCRIPTION_NEEDED, Due.INTERVAL),
    **{(S.SUBSCRIPTION_IN_PROGRESS, i): t for i, t in _ERRORS_IN_FLIGHT.items()},
    # "subscribe again" in answer to a subscription request: not at once, or a broker
    # that kept answering so got about 12,900 requests a second
    (S.SUBSCRIPTION_IN_PROGRESS, In.RESUBSCRIBE): Transition(S.SUBSCRIPTION_NEEDED, Due.RETRY),
    (S.SUBSCRIPTION_IN_PROGRESS, In.CLOSE): Transition(S.TERMINATED),
    (S.PUSH_NEEDED, In.SEND): Transition(S.PUSH_IN_PROGRESS),
    (S.PUSH_NEEDED, In.CLOSE): Transition(S.TERMINATING_PUSH_NEEDED, Due.NOW),
    (S.PUSH_IN_PROGRESS, In.PUSHED): Transition(S.PUSH_NEEDED, Due.INTERVAL),
    **{(S.PUSH_IN_PROGRESS, i): t for i, t in _ERRORS_IN_FLIGHT.items()},
    (S.PUSH_IN_PROGRESS, In.CLOSE): Transition(S.TERMINATING_PUSH_NEEDED, Due.NOW),
    (S.TERMINATING_PUSH_NEEDED, In.SEND): Transition(S.TERMINATING_PUSH_IN_PROGRESS),
    **{
        (S.TERMINATING_PUSH_IN_PROGRESS, i): Transition(S.TERMINATED)
        for i in (In.PUSHED, *_ERRORS_IN_FLIGHT)
    },
}

#: every (state, input); unlisted pairs keep the state and the due time
TABLE: Mapping[tuple[State, Input], Transition] = {
    (s, i): _LISTED.get((s, i), Transition(s)) for s in State for i in Input
}

TERMINATING = frozenset({S.TERMINATING_PUSH_NEEDED, S.TERMINATING_PUSH_IN_PROGRESS, S.TERMINATED})

_RESUBSCRIBE = frozenset({UnknownSubscriptionIdError.errno, UnsupportedCompressionTypeError.errno})
_BACK_OFF = frozenset({TelemetryTooLargeError.errno, ThrottlingQuotaExceededError.errno})
_FATAL_NAMED = frozenset(
    {InvalidRequestError.errno, InvalidRecordError.errno, UnsupportedVersionError.errno}
)


def input_for_error(code: int) -> Input:
    """A non-zero error code of either telemetry response, as a machine input (an
    unknown code stops telemetry, as in Java)."""
    if code in _RESUBSCRIBE:
        return In.RESUBSCRIBE
    if code in _BACK_OFF:
        return In.BACK_OFF
    return In.FATAL


@dataclass(frozen=True, slots=True)
class Subscription:
    """What GetTelemetrySubscriptions answered."""

    client_instance_id: UUID
    subscription_id: int
    push_interval_ms: int
    accepted_compression_types: tuple[int, ...] = ()
    telemetry_max_bytes: int = 1024 * 1024
    delta_temporality: bool = False
    requested_metrics: tuple[str, ...] = ()
    selector: MetricSelector = field(init=False, compare=False)

    def __post_init__(self) -> None:
        # the broker's interval, or Java's default for a missing or invalid one
        if self.push_interval_ms <= 0:
            object.__setattr__(self, "push_interval_ms", DEFAULT_PUSH_INTERVAL_MS)
        elif self.push_interval_ms < MIN_PUSH_INTERVAL_MS:  # below what a broker may set
            object.__setattr__(self, "push_interval_ms", MIN_PUSH_INTERVAL_MS)
        object.__setattr__(self, "selector", MetricSelector.from_requested(self.requested_metrics))


class TelemetryMachine:
    """The state, the subscription in use and when the next request is due.

    Times are seconds on the caller's monotonic clock; ``uniform`` draws the first
    push's jitter (injectable for tests).
    """

    def __init__(
        self,
        *,
        retry_s: float = 1.0,
        uniform: Callable[[float, float], float] = random.uniform,
    ) -> None:
        self.state = S.SUBSCRIPTION_NEEDED
        self.subscription: Subscription | None = None
        self.next_at = 0.0  # the first subscription request is due at once
        self.retry_s = retry_s
        self.failures = 0  # connection errors in a row
        self._uniform = uniform

    def __repr__(self) -> str:
        return f"<TelemetryMachine {self.state.name} next_at={self.next_at:.3f}>"

    @property
    def interval_s(self) -> float:
        sub = self.subscription
        return (sub.push_interval_ms if sub else DEFAULT_PUSH_INTERVAL_MS) / 1000

    @property
    def terminated(self) -> bool:
        return self.state is S.TERMINATED

    @property
    def terminating_push_due(self) -> bool:
        return self.state is S.TERMINATING_PUSH_NEEDED

    def feed(self, event: Input, now: float) -> Transition:
        """Apply ``event`` at ``now``; returns the transition taken."""
        step = TABLE[(self.state, event)]
        if step.state is not self.state or step.due is not Due.KEEP:
            if event is In.CONNECTION_ERROR or (
                event is In.RESUBSCRIBE and self.state is S.SUBSCRIPTION_IN_PROGRESS
            ):
                self.failures += 1
            elif event in (In.SUBSCRIBED, In.NO_METRICS, In.PUSHED):
                self.failures = 0
        self.state = step.state
        if step.due is Due.NOW:
            self.next_at = now
        elif step.due is Due.INTERVAL:
            self.next_at = now + self.interval_s
        elif step.due is Due.JITTERED:
            self.next_at = now + self.interval_s * self._uniform(JITTER_LOW, JITTER_HIGH)
        elif step.due is Due.RETRY:
            self.next_at = now + min(self.retry_s * 2 ** (self.failures - 1), RETRY_MAX_S)
        elif step.due is Due.DEFAULT:
            self.next_at = now + DEFAULT_PUSH_INTERVAL_MS / 1000
        return step

    def subscribed(self, subscription: Subscription, now: float) -> Transition:
        """A subscription arrived (in SUBSCRIPTION_IN_PROGRESS): keep it, then push
        (jittered first push) or, if it requests nothing, ask again after the interval."""
        if self.state is not S.SUBSCRIPTION_IN_PROGRESS:
            return Transition(self.state)  # late: closed meanwhile
        self.subscription = subscription
        nothing = subscription.selector.nothing
        return self.feed(In.NO_METRICS if nothing else In.SUBSCRIBED, now)

    def error(self, code: int, now: float) -> Transition:
        return self.feed(input_for_error(code), now)

    def delay(self, now: float) -> float:
        """Seconds until the next request (0: now); a terminating push is never delayed."""
        if self.state is S.TERMINATING_PUSH_NEEDED:
            return 0.0
        return max(0.0, self.next_at - now)
