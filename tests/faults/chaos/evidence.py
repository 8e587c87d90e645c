"""Reports and client logs: what a chaos test prints and keeps for a diagnosis."""

from __future__ import annotations

import json
import logging
import os
import random
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

_FORMAT = "%(asctime)s.%(msecs)03d %(levelname)s %(name)s: %(message)s"


def seed() -> int:
    """``AIOKPROTO_FAULTS_SEED`` replays a run's random choices; else a fresh seed."""
    given = os.environ.get("AIOKPROTO_FAULTS_SEED")
    return int(given) if given else random.SystemRandom().randrange(1 << 31)


@contextmanager
def client_log(path: Path, loggers: tuple[str, ...] = ("aiokproto",)) -> Iterator[Path]:
    """Everything aiokproto logs, at DEBUG, into ``path`` while the block runs."""
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter(_FORMAT, "%H:%M:%S"))
    handler.setLevel(logging.DEBUG)
    saved: list[tuple[logging.Logger, int]] = []
    for name in loggers:
        logger = logging.getLogger(name)
        saved.append((logger, logger.level))
        logger.setLevel(logging.DEBUG)
        logger.addHandler(handler)
    try:
        yield path
    finally:
        for logger, level in saved:
            logger.removeHandler(handler)
            logger.setLevel(level)
        handler.close()


def emit(capsys: pytest.CaptureFixture[str], title: str, facts: Mapping[str, Any],
         details: str = "") -> None:
    """Print a run's figures even when the test passes (they are the point of it)."""
    with capsys.disabled():
        print(f"\n=== {title}")
        print(json.dumps(facts, indent=1, default=str, sort_keys=False))
        if details:
            print(details)
