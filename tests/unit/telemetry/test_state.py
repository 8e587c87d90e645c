"""KIP-714 state machine: every (state, input), timing, error classes (no sockets)."""

from __future__ import annotations

import uuid

import pytest

from aiokproto.errors import (
    BrokerResponseError,
    InvalidRecordError,
    InvalidRequestError,
    NotControllerError,
    TelemetryTooLargeError,
    ThrottlingQuotaExceededError,
    UnknownServerErrorError,
    UnknownSubscriptionIdError,
    UnsupportedCompressionTypeError,
    UnsupportedVersionError,
)
from aiokproto.telemetry.state import (
    DEFAULT_PUSH_INTERVAL_MS,
    RETRY_MAX_S,
    TABLE,
    Due,
    Input,
    State,
    Subscription,
    TelemetryMachine,
    Transition,
    input_for_error,
)

S, In = State, Input
IID = uuid.UUID(int=42)

# The table as KIP-714 (and Java's ClientTelemetryReporter) describe it, written out
# independently: anything not listed keeps the state and the due time.
IN_FLIGHT_FAILURES = {
    In.RESUBSCRIBE: (S.SUBSCRIPTION_NEEDED, Due.NOW),
    In.BACK_OFF: (S.SUBSCRIPTION_NEEDED, Due.INTERVAL),
    In.FATAL: (S.TERMINATED, Due.KEEP),
    In.CONNECTION_ERROR: (S.SUBSCRIPTION_NEEDED, Due.RETRY),
    In.UNSUPPORTED: (S.SUBSCRIPTION_NEEDED, Due.DEFAULT),
}
EXPECTED: dict[tuple[State, Input], tuple[State, Due]] = {
    (S.SUBSCRIPTION_NEEDED, In.SEND): (S.SUBSCRIPTION_IN_PROGRESS, Due.KEEP),
    (S.SUBSCRIPTION_NEEDED, In.CLOSE): (S.TERMINATED, Due.KEEP),
    (S.SUBSCRIPTION_IN_PROGRESS, In.SUBSCRIBED): (S.PUSH_NEEDED, Due.JITTERED),
    (S.SUBSCRIPTION_IN_PROGRESS, In.NO_METRICS): (S.SUBSCRIPTION_NEEDED, Due.INTERVAL),
    **{(S.SUBSCRIPTION_IN_PROGRESS, i): v for i, v in IN_FLIGHT_FAILURES.items()},
    # a subscription request answered "subscribe again" retries with back-off, not at
    # once (a broker answering so forever got ~12,900 requests a second)
    (S.SUBSCRIPTION_IN_PROGRESS, In.RESUBSCRIBE): (S.SUBSCRIPTION_NEEDED, Due.RETRY),
    (S.SUBSCRIPTION_IN_PROGRESS, In.CLOSE): (S.TERMINATED, Due.KEEP),
    (S.PUSH_NEEDED, In.SEND): (S.PUSH_IN_PROGRESS, Due.KEEP),
    (S.PUSH_NEEDED, In.CLOSE): (S.TERMINATING_PUSH_NEEDED, Due.NOW),
    (S.PUSH_IN_PROGRESS, In.PUSHED): (S.PUSH_NEEDED, Due.INTERVAL),
    **{(S.PUSH_IN_PROGRESS, i): v for i, v in IN_FLIGHT_FAILURES.items()},
    (S.PUSH_IN_PROGRESS, In.CLOSE): (S.TERMINATING_PUSH_NEEDED, Due.NOW),
    (S.TERMINATING_PUSH_NEEDED, In.SEND): (S.TERMINATING_PUSH_IN_PROGRESS, Due.KEEP),
    (S.TERMINATING_PUSH_IN_PROGRESS, In.PUSHED): (S.TERMINATED, Due.KEEP),
    **{(S.TERMINATING_PUSH_IN_PROGRESS, i): (S.TERMINATED, Due.KEEP) for i in IN_FLIGHT_FAILURES},
}


@pytest.mark.parametrize("state", list(State), ids=lambda s: s.name)
@pytest.mark.parametrize("event", list(Input), ids=lambda i: i.name)
def test_every_state_and_input(state: State, event: Input) -> None:
    want_state, want_due = EXPECTED.get((state, event), (state, Due.KEEP))
    assert TABLE[(state, event)] == Transition(want_state, want_due)
    # and the machine applies it with these times
    machine = TelemetryMachine(retry_s=1.0, uniform=lambda lo, hi: hi)
    machine.state = state
    machine.subscription = _subscription(interval_ms=10_000)
    machine.next_at = 123.0
    machine.feed(event, 100.0)
    assert machine.state is want_state
    assert (
        machine.next_at
        == {
            Due.KEEP: 123.0,
            Due.NOW: 100.0,
            Due.INTERVAL: 110.0,
            Due.JITTERED: 115.0,  # 1.5 x the interval (uniform returned its upper bound)
            Due.RETRY: 101.0,
            Due.DEFAULT: 100.0 + DEFAULT_PUSH_INTERVAL_MS / 1000,
        }[want_due]
    )


def test_the_table_is_complete_and_terminated_is_final() -> None:
    assert set(TABLE) == {(s, i) for s in State for i in Input}
    assert all(TABLE[(S.TERMINATED, i)].state is S.TERMINATED for i in Input)


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (UnknownSubscriptionIdError, In.RESUBSCRIBE),
        (UnsupportedCompressionTypeError, In.RESUBSCRIBE),
        (TelemetryTooLargeError, In.BACK_OFF),
        (ThrottlingQuotaExceededError, In.BACK_OFF),
        (InvalidRequestError, In.FATAL),
        (InvalidRecordError, In.FATAL),
        (UnsupportedVersionError, In.FATAL),
        (UnknownServerErrorError, In.FATAL),  # codes KIP-714 does not name stop telemetry
        (NotControllerError, In.FATAL),
    ],
)
def test_error_codes(error: type[BrokerResponseError], expected: Input) -> None:
    assert input_for_error(error.errno) is expected


def _subscription(
    metrics: tuple[str, ...] = ("org.apache.kafka.",), interval_ms: int = 1000
) -> Subscription:
    return Subscription(
        client_instance_id=IID,
        subscription_id=7,
        push_interval_ms=interval_ms,
        accepted_compression_types=(4, 3),
        requested_metrics=metrics,
    )


def test_a_full_cycle_with_jittered_first_push_and_terminating_push() -> None:
    draws: list[tuple[float, float]] = []

    def uniform(lo: float, hi: float) -> float:
        draws.append((lo, hi))
        return 0.5

    m = TelemetryMachine(uniform=uniform)
    assert m.state is S.SUBSCRIPTION_NEEDED and m.delay(0.0) == 0  # the first ask is at once
    m.feed(In.SEND, 0.0)
    m.subscribed(_subscription(interval_ms=2000), 1.0)
    assert m.state is S.PUSH_NEEDED and draws == [(0.5, 1.5)]
    assert m.next_at == 2.0  # 0.5 x 2 s after the answer
    assert m.delay(1.5) == 0.5
    m.feed(In.SEND, 2.0)
    m.feed(In.PUSHED, 2.1)
    assert m.state is S.PUSH_NEEDED and m.next_at == pytest.approx(4.1)
    m.feed(In.CLOSE, 3.0)
    assert m.terminating_push_due and m.delay(3.0) == 0
    m.feed(In.SEND, 3.0)
    m.feed(In.PUSHED, 3.1)
    assert m.terminated


def test_a_subscription_requesting_no_metrics_is_asked_again_after_the_interval() -> None:
    m = TelemetryMachine()
    m.feed(In.SEND, 0.0)
    m.subscribed(_subscription(metrics=(), interval_ms=30_000), 0.5)
    assert m.state is S.SUBSCRIPTION_NEEDED and m.next_at == 30.5
    assert m.subscription is not None and m.subscription.client_instance_id == IID
    # closing then pushes nothing: no subscription in use
    m.feed(In.CLOSE, 1.0)
    assert m.terminated


def test_an_invalid_push_interval_becomes_the_default() -> None:
    assert _subscription(interval_ms=0).push_interval_ms == DEFAULT_PUSH_INTERVAL_MS
    assert _subscription(interval_ms=-5).push_interval_ms == DEFAULT_PUSH_INTERVAL_MS


def test_a_late_subscription_after_close_is_ignored() -> None:
    m = TelemetryMachine()
    m.feed(In.SEND, 0.0)
    m.feed(In.CLOSE, 0.1)
    assert m.terminated
    assert m.subscribed(_subscription(), 0.2) == Transition(S.TERMINATED)
    assert m.subscription is None


def test_errors_while_pushing() -> None:
    m = TelemetryMachine(retry_s=0.25)
    m.feed(In.SEND, 0.0)
    m.subscribed(_subscription(interval_ms=1000), 0.0)
    m.feed(In.SEND, 1.0)
    m.error(UnknownSubscriptionIdError.errno, 1.1)  # the subscription changed: at once
    assert m.state is S.SUBSCRIPTION_NEEDED and m.next_at == 1.1
    m.feed(In.SEND, 1.1)
    m.subscribed(_subscription(interval_ms=1000), 1.2)
    m.feed(In.SEND, 2.0)
    m.error(ThrottlingQuotaExceededError.errno, 2.1)  # too early: after the interval
    assert m.state is S.SUBSCRIPTION_NEEDED and m.next_at == pytest.approx(3.1)
    m.feed(In.SEND, 3.1)
    m.feed(In.CONNECTION_ERROR, 3.2)  # another broker, shortly
    assert m.state is S.SUBSCRIPTION_NEEDED and m.next_at == pytest.approx(3.45)
    m.feed(In.SEND, 3.5)
    m.subscribed(_subscription(), 3.6)
    m.feed(In.SEND, 4.0)
    m.error(InvalidRecordError.errno, 4.1)  # cannot be fixed by retrying: stop
    assert m.terminated


def test_connection_errors_in_a_row_back_off_exponentially_up_to_a_cap() -> None:
    m = TelemetryMachine(retry_s=1.0)
    delays = []
    for i in range(8):
        m.feed(In.SEND, float(i))
        m.feed(In.CONNECTION_ERROR, float(i))
        delays.append(m.next_at - i)
    assert delays == [1, 2, 4, 8, 16, RETRY_MAX_S, RETRY_MAX_S, RETRY_MAX_S]
    m.feed(In.SEND, 10.0)
    m.subscribed(_subscription(), 10.0)  # a success resets the back-off
    m.feed(In.SEND, 11.0)
    m.feed(In.CONNECTION_ERROR, 11.0)
    assert m.next_at == 12.0
    # a stale connection error (nothing in flight) counts for nothing
    m.feed(In.CONNECTION_ERROR, 11.5)
    assert m.failures == 1


def test_a_failed_terminating_push_still_terminates() -> None:
    m = TelemetryMachine()
    m.feed(In.SEND, 0.0)
    m.subscribed(_subscription(), 0.0)
    m.feed(In.CLOSE, 0.1)
    m.feed(In.SEND, 0.1)
    m.error(ThrottlingQuotaExceededError.errno, 0.2)
    assert m.terminated


def test_a_subscription_answered_resubscribe_backs_off_growing() -> None:
    machine = TelemetryMachine(retry_s=1.0, uniform=lambda lo, hi: hi)
    now, waits = 0.0, []
    for _ in range(4):
        machine.feed(In.SEND, now)
        machine.error(UnknownSubscriptionIdError.errno, now)
        waits.append(machine.delay(now))
        now = machine.next_at
    assert waits == [1.0, 2.0, 4.0, 8.0]


def test_a_push_interval_below_the_kip714_minimum_is_raised_to_it() -> None:
    assert _subscription(interval_ms=1).push_interval_ms == 100
    assert _subscription(interval_ms=0).push_interval_ms == DEFAULT_PUSH_INTERVAL_MS
    assert _subscription(interval_ms=250).push_interval_ms == 250


def test_a_resubscribe_after_a_push_does_not_lengthen_the_connection_back_off() -> None:
    machine = TelemetryMachine(retry_s=1.0, uniform=lambda lo, hi: hi)
    machine.state = S.PUSH_IN_PROGRESS
    machine.error(UnknownSubscriptionIdError.errno, 0.0)  # resubscribe at once, as KIP-714
    assert machine.delay(0.0) == 0.0
    machine.feed(In.SEND, 0.0)
    machine.feed(In.CONNECTION_ERROR, 0.0)
    assert machine.delay(0.0) == 1.0  # the first failure's back-off, not the second's
