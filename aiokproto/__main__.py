"""``python -m aiokproto``: the command line (needs the ``cli`` extra, Click and Rich;
without it, one line and exit 1), as the ``aiokproto`` console script."""

from aiokproto.cli import main

if __name__ == "__main__":
    main()
