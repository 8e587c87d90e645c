"""During an outage the metadata cache retries quietly: one warning, not one a second."""

from __future__ import annotations

import asyncio
import logging

import pytest

from tests.clients import client_for
from tests.fake_broker import FakeBroker


async def test_an_outage_logs_its_warning_once(caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeBroker()
    await fake.__aenter__()
    client = client_for(
        fake.bootstrap, retry_backoff_ms=20, reconnect_backoff_ms=10, reconnect_backoff_max_ms=20
    )
    await client.start()
    try:
        await fake.__aexit__(None, None, None)  # the only broker goes away
        with caplog.at_level(logging.INFO, logger="aiokproto.cluster.metadata"):
            for _ in range(40):  # ~40 failed refreshes
                client.metadata.request_refresh()
                await asyncio.sleep(0.03)
        failures = [r for r in caplog.records if "metadata refresh failed" in r.getMessage()]
        assert len(failures) == 1, [r.getMessage() for r in failures]
        assert failures[0].levelno == logging.WARNING
        assert client.metadata.last_error is not None
    finally:
        await client.close()
