"""Errors raised by the group layer.

``CommitFailedError`` is defined in ``aiokproto.errors`` (which names every error a
user can see without importing the consumer) and re-exported here.
"""

from __future__ import annotations

from aiokproto.errors import CommitFailedError

__all__ = ["CommitFailedError"]
