"""``python -m aiokproto``: the command line (needs the ``cli`` extra)."""

from aiokproto.cli import main

if __name__ == "__main__":
    main()
