""""One warning per outage" with more than one broker."""

from __future__ import annotations

import asyncio
import logging

import pytest

from aiokproto.protocol.messages.metadata import MetadataResponse, MetadataResponseBroker
from tests.clients import client_for
from tests.fake_broker import FakeBroker, Received, Reply


async def test_a_whole_cluster_outage_logs_its_metadata_warning_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Expected (DESIGN: "One warning per outage"): while every broker of a 3-broker
    cluster is down, "metadata refresh failed" is logged once (plus at most a summary a
    minute). Observed: the failure's text names the broker tried last, which
    least_loaded_node() picks at random among equally bad nodes, so the message
    alternates and RepeatingWarning logs (nearly) every retry as a new warning."""
    brokers: list[FakeBroker] = []

    def metadata(rec: Received) -> Reply | None:
        if rec.api_key != 3:
            return None
        return Reply(
            response=MetadataResponse(
                brokers=[
                    MetadataResponseBroker(node_id=b.node_id, host=b.host, port=b.port)
                    for b in brokers
                ],
                cluster_id="fake",
                controller_id=1,
            )
        )

    brokers.extend(FakeBroker(metadata, node_id=n) for n in (1, 2, 3))
    for b in brokers:
        await b.__aenter__()
    client = client_for(
        brokers[0].bootstrap,
        retry_backoff_ms=50,
        reconnect_backoff_ms=10,
        reconnect_backoff_max_ms=20,
        request_timeout_ms=1000,
    )
    await client.start()
    try:
        assert len(client.metadata.snapshot.brokers) == 3
        for b in brokers:  # the whole cluster goes away
            await b.__aexit__()
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="aiokproto.cluster.metadata"):
            async with asyncio.timeout(10):
                for _ in range(30):  # a producer with a leaderless partition does this
                    client.metadata.request_refresh()
                    await asyncio.sleep(0.1)
        lines = [
            r.getMessage()
            for r in caplog.records
            if r.levelno >= logging.WARNING and "metadata refresh failed" in r.getMessage()
        ]
    finally:
        await client.close()
    assert len(lines) <= 2, f"{len(lines)} warnings for one outage: {lines[:4]}"
