"""Shared pytest setup: the real-Kafka fixtures come from aiokproto's own plugin."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

pytest_plugins = [
    "aiokproto.testing.pytest_plugin",
    # a local MIT KDC and a broker with GSSAPI listeners (tests/kerberos, the guides)
    "tests.kerberos.fixtures",
]


@pytest.fixture(autouse=True)
def _root_log_level_kept() -> Iterator[None]:
    """A test that runs the CLI in-process (its ``configure_logging`` sets the root
    level, CRITICAL+1 when quiet) would leave every later ``caplog`` test seeing
    nothing: the root logger's level is put back after each test."""
    root = logging.getLogger()
    level = root.level
    yield
    root.setLevel(level)
