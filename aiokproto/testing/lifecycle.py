"""``with`` and ``async with`` for harness services that start and stop blocking."""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Self


class BlockingService:
    """Subclasses define ``start()`` (returning self) and ``stop()``; both block for
    seconds (JVMs starting), so the async forms run them in a thread and keep the event
    loop free."""

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        return await asyncio.to_thread(self.start)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.stop)
