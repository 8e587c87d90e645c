"""The error a batch Admin call raises when some of its items failed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiokproto.errors import KafkaError

__all__ = ["AdminBatchError"]


class AdminBatchError(KafkaError):
    """Some items of a batch call failed.

    ``results`` holds the items that succeeded (as the call would have returned them),
    ``errors`` the error of each failed item.
    """

    def __init__(
        self, operation: str, results: Mapping[Any, Any], errors: Mapping[Any, KafkaError]
    ):
        self.operation = operation
        self.results: dict[Any, Any] = dict(results)
        self.errors: dict[Any, KafkaError] = dict(errors)
        total = len(self.results) + len(self.errors)
        details = "; ".join(f"{key!r}: {err}" for key, err in self.errors.items())
        super().__init__(f"{operation}: {len(self.errors)} of {total} item(s) failed: {details}")
        # Retrying the call is worth it only if every failure was retriable.
        self.retriable_items = all(e.retriable for e in self.errors.values())
