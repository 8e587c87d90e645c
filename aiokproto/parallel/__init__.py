"""Concurrent processing of one consumer's records with order kept per key or
partition and commits that never pass an unfinished record (issue 36):
``ParallelConsumer`` (``consumer.py``) over sans-I/O offset tracking (``offsets.py``),
scheduling with back-pressure bounds (``scheduling.py``) and the failure policy
(``failures.py``). ``from aiokproto import ParallelConsumer`` imports it on first use.
"""

from aiokproto.parallel.consumer import ParallelConsumer

__all__ = ["ParallelConsumer"]
