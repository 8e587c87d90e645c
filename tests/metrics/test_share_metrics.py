"""ShareConsumer.metrics() against the real broker."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.share.test_share_consumer_broker import setup, share


async def test_share_consumer_counts_records_and_acknowledgements(
    kafka: Any, topic_name: str
) -> None:
    group = await setup(kafka, topic_name, 2, 100)
    sc = share(kafka, group, topic_name, acknowledgement_mode="explicit", client_id="s-test")
    got = 0
    async with sc, asyncio.timeout(60):
        while got < 200:
            batch = await sc.getmany(timeout_ms=1000)
            for records in batch.values():
                for r in records:
                    sc.acknowledge(r, "accept")
                    got += 1
        await sc.commit()
        m = sc.metrics()
    fetch = "consumer-share-fetch-manager-metrics"
    assert m.value("records-consumed-total", fetch) == 200
    assert m.value("acknowledgements-send-total", fetch) == 200
    assert m.value("acknowledgements-error-total", fetch) == 0
    assert m.value("fetch-total", fetch) >= 1
    assert m.value("fetch-latency-max", fetch) > 0
    assert m.value("bytes-consumed-total", fetch) > 0
    assert m.value("request-total", "consumer-share-metrics") > 0
    assert m.find("request-total", "consumer-share-node-metrics")
    assert all(n.tag("client-id") == "s-test" for n in m)
