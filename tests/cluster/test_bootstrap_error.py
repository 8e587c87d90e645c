"""An unreachable bootstrap server: start() retries, then raises ``BootstrapError``."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

import pytest

from aiokproto import Admin, Consumer, Producer
from aiokproto.errors import BootstrapError, KafkaConnectionError, KafkaTimeoutError
from tests.clients import client_for


def closed_port() -> int:
    """A local port nobody listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


async def test_start_names_every_server_tried_with_its_last_error() -> None:
    a, b = closed_port(), closed_port()
    client = client_for(f"127.0.0.1:{a},127.0.0.1:{b}", default_api_timeout_ms=800)
    began = time.monotonic()
    with pytest.raises(BootstrapError) as info:
        await client.start()
    assert 0.7 < time.monotonic() - began < 5  # it kept retrying until the deadline
    err = info.value
    assert isinstance(err, KafkaConnectionError) and isinstance(err, KafkaTimeoutError)
    text = str(err)
    assert "within 0.8 s (default_api_timeout_ms)" in text
    for port in (a, b):
        assert f"127.0.0.1:{port} (connection refused, nothing listens there)" in text
    assert "last error" not in text  # the same refusal is not said twice
    assert isinstance(err.__cause__, KafkaConnectionError)
    assert not isinstance(err.__cause__, BootstrapError)
    assert "cannot connect" in str(err.__cause__)


@pytest.mark.parametrize("make", [Producer, Consumer, Admin])
async def test_the_clients_raise_it_from_start(make: Callable[..., Any]) -> None:
    # aiokafka code catches KafkaConnectionError around start(); ours catches timeouts
    client = make(bootstrap_servers=f"127.0.0.1:{closed_port()}", default_api_timeout_ms=300)
    with pytest.raises(KafkaConnectionError) as info:
        await client.start()
    assert isinstance(info.value, KafkaTimeoutError)
    await (getattr(client, "stop", None) or client.close)()


async def test_a_dead_bootstrap_server_is_skipped_for_a_live_one(kafka: Any) -> None:
    dead = f"127.0.0.1:{closed_port()}"
    for servers in (f"{dead},{kafka.bootstrap_servers}", f"{kafka.bootstrap_servers},{dead}"):
        async with client_for(servers, default_api_timeout_ms=10_000) as client:
            assert client.metadata.snapshot.brokers
