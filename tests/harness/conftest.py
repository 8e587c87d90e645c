"""Helpers for the harness's own tests: an independent client (librdkafka) that tells
whether a listener lets a given configuration in."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient


@dataclass
class Attempt:
    ok: bool
    broker_ids: list[int] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)

    def logged(self, fragment: str) -> bool:
        return any(fragment in line for line in self.logs)


class _Collect(logging.Handler):
    def __init__(self, sink: list[str]) -> None:
        super().__init__()
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        self.sink.append(record.getMessage())


def list_topics(config: dict[str, object], timeout: float = 10.0) -> Attempt:
    """Run AdminClient.list_topics; collect librdkafka's log lines to see why it failed."""
    logs: list[str] = []
    logger = logging.getLogger(f"harness.rdkafka.{id(logs)}")
    logger.propagate = False
    logger.addHandler(_Collect(logs))
    admin = AdminClient({**config, "logger": logger, "socket.timeout.ms": 3000})
    try:
        metadata = admin.list_topics(timeout=timeout)
    except KafkaException:
        admin.poll(0.2)  # deliver pending log callbacks
        return Attempt(False, logs=logs)
    return Attempt(True, sorted(metadata.brokers), logs)


@pytest.fixture
def try_connect() -> Callable[..., Attempt]:
    return list_topics
