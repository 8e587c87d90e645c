"""One connection per broker and purpose: the bootstrap server's connection does not
stay open beside the broker's own once metadata names the brokers (issue 33: 3 sockets
per producer and 4 per consumer to a one-broker cluster, the bootstrap one kept for
connections_max_idle_ms)."""

from __future__ import annotations

import uuid
from typing import Any

from aiokproto import Consumer, Producer
from tests.producer.helpers import FAST, create_topic


def _open(client: Any) -> list[tuple[int, str]]:
    return sorted(key for key, conn in client._conns.items() if conn.connected)


async def test_clients_keep_one_connection_per_broker_and_purpose(kafka: Any) -> None:
    topic = await create_topic(kafka.bootstrap_servers, f"conns-{uuid.uuid4().hex[:8]}")
    async with Producer(bootstrap_servers=kafka.bootstrap_servers, **FAST) as p:
        await p.send_and_wait(topic, b"v")
        produced = _open(p._client)
    async with Consumer(topic, bootstrap_servers=kafka.bootstrap_servers,
                        group_id=f"g-{uuid.uuid4().hex[:8]}", auto_offset_reset="earliest",
                        retry_backoff_ms=50) as c:
        batch = await c.getmany(timeout_ms=20_000, max_records=1)
        assert sum(len(records) for records in batch.values()) == 1
        consumed = _open(c._client)
    for conns in (produced, consumed):
        assert all(node >= 0 for node, _ in conns), conns  # no bootstrap connection left
        assert len(conns) == len(set(conns))
    assert len(produced) <= 2, produced  # metadata + produce (librdkafka: 1)
    assert len(consumed) <= 3, consumed  # metadata, fetch, group (librdkafka: 2)
