"""``DONE``: what a call that finished its work synchronously gives back, so that both
``call()`` and ``await call()`` work (aiokafka has such methods plain, Java too)."""

from __future__ import annotations

from collections.abc import Generator


class Done:
    """An awaitable that is already complete."""

    def __await__(self) -> Generator[None, None, None]:
        return
        yield  # a generator: ``await`` on it returns at once


DONE = Done()
