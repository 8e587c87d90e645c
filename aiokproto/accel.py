"""Which implementation of the record codec's hot loops is in use.

``aiokproto._accel`` (C, built from ``aiokproto/_accel.c`` when a compiler is there) is
loaded unless ``AIOKPROTO_PURE_PYTHON`` is set to anything but ``""``/``0``; without it
the Python loops run, which are the reference the compiled ones are tested against.
Read once at import: set the variable before importing aiokproto.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from types import ModuleType

ENV_VAR = "AIOKPROTO_PURE_PYTHON"


def _load() -> ModuleType | None:
    if os.environ.get(ENV_VAR, "") not in ("", "0"):
        return None
    try:
        import aiokproto._accel as _accel
    except ImportError:
        return None
    return _accel


#: the compiled module, or None when the pure-Python code runs
native: ModuleType | None = _load()


def implementation() -> str:
    """``"compiled"`` or ``"python"``: what this process runs."""
    return "compiled" if native is not None else "python"


def _now_ms() -> int:
    return int(time.time() * 1000)


#: wall-clock milliseconds, a record's default timestamp (one C call when compiled)
now_ms: Callable[[], int] = _now_ms if native is None else native.now_ms
