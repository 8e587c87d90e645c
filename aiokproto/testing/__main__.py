import sys

from aiokproto.testing.cli import main

sys.exit(main())
