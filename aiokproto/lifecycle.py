"""``async with`` for the clients that start and stop: ``Producer``, ``Consumer`` and
``ShareConsumer`` run ``start()`` on entering the block and ``stop()`` on leaving it,
also when the block raises or is cancelled; ``check_loop`` refuses a call from another
event loop than the one a client started in."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Self

from aiokproto.error_families import IllegalStateError


def check_loop(client: object, started_in: asyncio.AbstractEventLoop | None) -> None:
    """Refuse a call from another event loop than the one ``client`` started in.

    Its tasks run in that loop, usually gone (each ``asyncio.run()`` makes a new one),
    so the call would wait forever for them, or fail deep inside asyncio."""
    if started_in is not None and started_in is not asyncio.get_running_loop():
        name = type(client).__name__
        raise IllegalStateError(
            f"this {name} was started in another event loop (each asyncio.run() makes a "
            f"new one): start, use and stop a {name} in one loop, e.g. in one "
            "asyncio.run(main())"
        )


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
