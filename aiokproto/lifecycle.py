"""``async with`` for the clients that start and stop: ``Producer``, ``Consumer`` and
``ShareConsumer`` run ``start()`` on entering the block and ``stop()`` on leaving it,
also when the block raises or is cancelled."""

from __future__ import annotations

from typing import TYPE_CHECKING, Self


class StartStop:
    """The ``async with`` protocol over a client's ``start()`` and ``stop()``."""

    __slots__ = ()  # adds nothing to a subclass's layout (the producer's is fixed)

    if TYPE_CHECKING:

        async def start(self) -> None: ...

        async def stop(self) -> None: ...

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()
