"""``Signals``: what the share consumer, its group driver and its fetcher tell each
other: a wake-up on every change (records acquired, handed out, an assignment, a
stop), the errors the application's next call raises, and the fatal one that every
call raises until a new subscription."""

from __future__ import annotations

from aiokproto.cluster.broker_tasks import Wakeup, wait_event
from aiokproto.errors import KafkaError


class Signals:
    """The share consumer's shared wake-up and errors."""

    __slots__ = ("_wakeup", "errors", "fatal")

    def __init__(self) -> None:
        self._wakeup = Wakeup()
        #: raised one by one by the application's next calls
        self.errors: list[KafkaError] = []
        #: raised by every call until a new subscription clears it
        self.fatal: KafkaError | None = None

    def notify(self) -> None:
        """Something changed: every waiter looks again."""
        self._wakeup.set()

    async def wait(self, timeout_s: float) -> None:
        """Until the next ``notify()``, at most ``timeout_s``."""
        await wait_event(self._wakeup.waiter(), timeout_s)

    def fail(self, error: KafkaError) -> None:
        """The application's next call raises ``error``."""
        self.errors.append(error)
        self.notify()

    def fail_fatal(self, error: KafkaError) -> None:
        """Every call raises ``error`` from now on (fetching or membership stopped)."""
        self.fatal = error
        self.fail(error)

    def raise_errors(self) -> None:
        if self.errors:
            raise self.errors.pop(0)
        if self.fatal is not None:
            raise self.fatal
