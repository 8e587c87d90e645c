"""Fault-injection suite: shared knobs.

``make test`` runs a time-boxed slice of every fault test; ``make faults`` sets
``AIOKPROTO_FAULTS=full`` and runs all of it at full size. Tests read their sizes from
the ``fault_scale`` fixture instead of checking the variable themselves.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest


@dataclass(frozen=True)
class FaultScale:
    """How big a fault run is: ``full`` in ``make faults``, a slice in ``make test``."""

    full: bool

    def pick(self, slice_value: int, full_value: int) -> int:
        return full_value if self.full else slice_value


def fault_scale_from_env() -> FaultScale:
    return FaultScale(full=os.environ.get("AIOKPROTO_FAULTS", "").lower() == "full")


@pytest.fixture(scope="session")
def fault_scale() -> FaultScale:
    return fault_scale_from_env()
