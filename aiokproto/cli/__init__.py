"""The ``aiokproto`` command: topics, groups, cluster, produce and consume from a terminal.

Needs the ``cli`` extra (``pip install 'aiokproto[cli]'``: Click and Rich).
"""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> None:
    """The console script's entry point."""
    if sys.argv[1:] == ["--version"]:  # answered without importing Click or the clients
        from aiokproto import __version__

        print(f"aiokproto, version {__version__}")
        return
    from aiokproto.cli.app import main as run

    run()
