"""Generated message modules that run on first use: ``message_module(name)`` returns a
module that runs on its first attribute read. The Admin's APIs use it through
``aiokproto.admin.codecs``, so ``from aiokproto import Admin`` loads only the codecs of
the connection, metadata and coordinators (tests/unit/protocol/test_lazy.py,
tests/test_import_cost.py).

A generated module (``aiokproto.protocol.messages.<api>``) costs a few milliseconds to
import, most of it building its dataclasses, and the Admin client refers to two dozen
of them: ``message_module("create_topics")`` stands for the module at once and imports
it when an attribute is first read, so a program (or a CLI command) pays only for the
APIs it calls. ``admin/codecs.py`` imports the real modules under ``TYPE_CHECKING``,
so mypy sees them, and calls this from its module ``__getattr__`` at run time.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType
from typing import Any

__all__ = ["message_module"]

_PACKAGE = "aiokproto.protocol.messages"


class _LazyModule(ModuleType):
    """The module named ``__name__``: imported by the first attribute read, whose
    namespace it then copies, so later reads are plain attribute lookups."""

    def __getattr__(self, attr: str) -> Any:
        module = importlib.import_module(self.__name__)  # thread-safe, once
        self.__dict__.update(module.__dict__)
        return getattr(module, attr)


def message_module(name: str) -> ModuleType:
    """The generated module ``aiokproto.protocol.messages.<name>``, imported on first
    use (at once if it already is); ``ImportError`` now for a name that has none."""
    full = f"{_PACKAGE}.{name}"
    loaded = sys.modules.get(full)
    if loaded is not None:
        return loaded
    if importlib.util.find_spec(full) is None:
        raise ImportError(f"no generated message module {full!r}", name=full)
    return _LazyModule(full)
