"""Kafka jar resolution: the resolution marker, unknown versions refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiokproto.testing import (
    KafkaHarnessError,
)
from aiokproto.testing.jars import is_resolved, libs_dir, resolve_jars


def test_resolution_marker_is_required(tmp_path: Path) -> None:
    libs = libs_dir("4.3.1", tmp_path)
    libs.mkdir(parents=True)
    (libs / "kafka_2.13-4.3.1.jar").write_bytes(b"")
    assert not is_resolved("4.3.1", tmp_path)


def test_unknown_version_is_refused() -> None:
    with pytest.raises(KafkaHarnessError, match="unsupported Kafka version"):
        resolve_jars("1.0.0")
