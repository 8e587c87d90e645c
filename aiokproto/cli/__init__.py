"""The ``aiokproto`` command: topics, groups, cluster, produce and consume from a terminal.

Needs the ``cli`` extra (``pip install 'aiokproto[cli]'``: Click and Rich).
"""

from __future__ import annotations

__all__ = ["main"]


def main() -> None:
    """The console script's entry point."""
    from aiokproto.cli.app import main as run

    run()
