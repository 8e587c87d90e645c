"""``python -m aiokproto.testing``: the harness CLI (``cli.py``)."""

import sys

from aiokproto.testing.cli import main

sys.exit(main())
