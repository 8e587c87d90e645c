"""Which implementation of the record codec's hot loops is in use: loads the compiled
``_accel`` unless ``AIOKPROTO_PURE_PYTHON=1``; ``implementation()`` names it;
``warn_if_pure_python()`` (the first ``ClusterClient`` logs once that the codec failed
to load and what that costs).

``aiokproto._accel`` (C, built from ``aiokproto/_accel.c`` when a compiler is there) is
loaded unless ``AIOKPROTO_PURE_PYTHON`` is set to anything but ``""``/``0``; without it
the Python loops run, which are the reference the compiled ones are tested against.
Read once at import: set the variable before importing aiokproto.

An install that lacks the compiled module by accident (no C compiler when pip built it)
says so once per process, as a WARNING on the ``aiokproto.accel`` logger when the first
client starts (``warn_if_pure_python()``): a log line rather than a warning at import,
because ``-W error`` or pytest's ``filterwarnings = error`` would turn an import-time
warning into a failed ``import aiokproto``, and a command that only imports (``aiokproto
--version``) pays nothing for the codec. Choosing pure Python on purpose with the
variable logs nothing.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from types import ModuleType

ENV_VAR = "AIOKPROTO_PURE_PYTHON"

log = logging.getLogger(__name__)

#: why the compiled module is absent although nobody asked for pure Python, else None
missing_reason: str | None = None


def _load() -> ModuleType | None:
    global missing_reason
    if os.environ.get(ENV_VAR, "") not in ("", "0"):
        return None
    try:
        import aiokproto._accel as _accel
    except ImportError as exc:
        missing_reason = str(exc)
        return None
    return _accel


#: the compiled module, or None when the pure-Python code runs
native: ModuleType | None = _load()

_warned = False

PURE_PYTHON_WARNING = (
    "aiokproto runs without its compiled record codec (%s), so producing and consuming "
    "are 2-3x slower (see the README's benchmarks). It is built at install time when a "
    "C compiler is present: "
    "install one and the Python headers (e.g. 'apt-get install gcc python3-dev'), then "
    "'pip install --force-reinstall --no-deps --no-cache-dir aiokproto'. Set "
    f"{ENV_VAR}=1 to choose pure Python and silence this."
)


def warn_if_pure_python() -> None:
    """Log ``PURE_PYTHON_WARNING`` the first time it is called in a process whose
    compiled codec failed to load (not when ``AIOKPROTO_PURE_PYTHON`` chose Python)."""
    global _warned
    if _warned or missing_reason is None:
        return
    _warned = True
    log.warning(PURE_PYTHON_WARNING, missing_reason)


def implementation() -> str:
    """``"compiled"`` or ``"python"``: what this process runs."""
    return "compiled" if native is not None else "python"


def _now_ms() -> int:
    return int(time.time() * 1000)


#: wall-clock milliseconds, a record's default timestamp (one C call when compiled)
now_ms: Callable[[], int] = _now_ms if native is None else native.now_ms
