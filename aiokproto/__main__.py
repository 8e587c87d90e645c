"""``python -m aiokproto``: the command line (needs the ``cli`` extra)."""

import sys


def _main() -> None:
    try:
        import click  # noqa: F401
        import rich  # noqa: F401
    except ImportError as exc:
        # one clear line rather than a traceback: the library itself does not need these
        print(
            f"aiokproto: the command line needs {exc.name}: pip install 'aiokproto[cli]'",
            file=sys.stderr,
        )
        sys.exit(1)
    from aiokproto.cli.app import main

    main()


if __name__ == "__main__":
    _main()
