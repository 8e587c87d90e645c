"""Exponential back-off with jitter, as pure arithmetic (no clock of its own)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Protocol


class RetrySettings(Protocol):
    """The two options every retry back-off is made from (``ClientConfig`` has them)."""

    @property
    def retry_backoff_ms(self) -> int: ...

    @property
    def retry_backoff_max_ms(self) -> int: ...


@dataclass(slots=True)
class Backoff:
    """``base_ms`` doubling per consecutive failure up to ``max_ms``, +/-20% jitter."""

    base_ms: int
    max_ms: int
    failures: int = 0
    not_before: float = 0.0  # loop time before which no new attempt should start

    @classmethod
    def for_retries(cls, config: RetrySettings) -> Backoff:
        """``retry_backoff_ms`` doubling up to ``retry_backoff_max_ms``."""
        return cls(config.retry_backoff_ms, config.retry_backoff_max_ms)

    def delay_s(self, rng: random.Random | None = None) -> float:
        if self.failures == 0:
            return 0.0
        exp = min(self.failures - 1, 32)
        delay = min(self.max_ms, self.base_ms * (1 << exp))
        jitter = (rng or random).uniform(0.8, 1.2)
        return min(self.max_ms, delay * jitter) / 1000

    def failed(self, now: float, rng: random.Random | None = None) -> None:
        self.failures += 1
        self.not_before = now + self.delay_s(rng)

    def succeeded(self) -> None:
        self.failures = 0
        self.not_before = 0.0
