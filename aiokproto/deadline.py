"""Keep a multi-step operation (look up a coordinator, connect, send) inside the
caller's own deadline, not one request timeout per step."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from aiokproto.errors import KafkaTimeoutError


@contextlib.asynccontextmanager
async def before(deadline: float, what: str) -> AsyncIterator[None]:
    """Run the body until ``deadline`` (event-loop time); past it, cancel the body and
    raise ``KafkaTimeoutError`` naming ``what``. A ``KafkaTimeoutError`` the body raises
    itself (one request timing out) passes through unchanged."""
    try:
        async with asyncio.timeout_at(deadline) as scope:
            yield
    except TimeoutError:
        if not scope.expired():
            raise
        raise KafkaTimeoutError(f"{what} ran out of time") from None
