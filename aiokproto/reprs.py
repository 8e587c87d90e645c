"""What ``repr()`` of a client says: its kind, state, client id, bootstrap servers and
what it works on (group, topics, assignment size), for logs and debuggers.

``client_repr`` is cheap (no I/O, no lock) and never raises: a repr that fails hides
the error it was meant to help with (an object half-built by a raising ``__init__``
gets the default ``<Consumer object at 0x...>`` form instead).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def client_repr(obj: object, describe: Callable[[], list[str]]) -> str:
    """``<Kind field field ...>`` from ``describe()``'s fields, or ``object``'s repr if
    that raises."""
    try:
        return f"<{type(obj).__name__} {' '.join(describe())}>"
    except Exception:
        return object.__repr__(obj)


def connection_fields(config: Any) -> list[str]:
    """``client_id=... bootstrap=host:port,...`` of a client config."""
    hosts = ",".join(f"{host}:{port}" for host, port in config.bootstrap_servers)
    return [f"client_id={config.client_id!r}", f"bootstrap={hosts!r}"]
