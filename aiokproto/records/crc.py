"""CRC-32C, the v2 record batch checksum: the ``crc32c`` package's compiled function,
loaded without running that package's ``__init__``.

``import crc32c`` reads the package's own version through ``importlib.metadata`` (which
imports ``email``, ``zipfile``, ``csv`` ...) and imports its command line (``argparse``):
25-35 ms of every producer's and consumer's cold start, for one C function. Its
extension module (``crc32c/_crc32c*.so``, the one the package re-exports) is loaded
here by path instead (~1 ms). Should a release of the package lay itself out otherwise,
the public ``crc32c.crc32c`` is imported: slower to import, same function.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
from collections.abc import Callable
from typing import Any

#: the extension module's name inside the package (its ``PyInit__crc32c``)
_EXTENSION = "crc32c._crc32c"


def _from_extension() -> Callable[[Any], int] | None:
    """The extension's ``crc32c``, or None if it is not where the package keeps it."""
    package = importlib.util.find_spec("crc32c")  # finds, runs nothing
    if package is None or not package.submodule_search_locations:
        return None
    for folder in package.submodule_search_locations:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(folder, "_crc32c" + suffix)
            if not os.path.isfile(path):
                continue
            spec = importlib.util.spec_from_file_location(_EXTENSION, path)
            if spec is None or spec.loader is None:
                return None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            function = getattr(module, "crc32c", None)
            return function if callable(function) else None
    return None


def _load() -> Callable[[Any], int]:
    try:
        function = _from_extension()
    except (ImportError, OSError, ValueError):
        function = None
    if function is not None:
        return function
    from crc32c import crc32c as public

    return public


#: ``crc32c(data) -> int`` for any bytes-like ``data`` (the package's, hardware-based
#: where the CPU has the instruction)
crc32c: Callable[[Any], int] = _load()
