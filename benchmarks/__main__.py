"""``python -m benchmarks``: run the project's benchmarks (``make bench``).

For now the record codec against aiokafka; the producer, consumer and peer-client
scenarios join as they land. ``--quick`` gives CI-sized runs.
"""

from __future__ import annotations

import sys

from benchmarks import records_bench


def main(argv: list[str]) -> int:
    records_bench.main(argv)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
