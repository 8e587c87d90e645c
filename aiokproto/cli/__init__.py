"""The ``aiokproto`` command: topics, groups, cluster, produce and consume from a terminal.

Needs the ``cli`` extra (``pip install 'aiokproto[cli]'``: Click and Rich).
"""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> None:
    """The console script's entry point (and ``python -m aiokproto``'s): without the
    ``cli`` extra, one line saying what to install and exit status 1, not a traceback
    (the library itself does not need Click or Rich)."""
    if sys.argv[1:] == ["--version"]:  # answered without importing Click or the clients
        from aiokproto import __version__

        print(f"aiokproto, version {__version__}")
        return
    try:
        import click  # noqa: F401
        import rich  # noqa: F401
    except ImportError as exc:
        print(
            f"aiokproto: the command line needs {exc.name}: pip install 'aiokproto[cli]'",
            file=sys.stderr,
        )
        sys.exit(1)
    from aiokproto.cli.app import main as run

    run()
