"""The sender's requests written by ``send_now`` in the drain loop's own step."""

from __future__ import annotations

from typing import Any

from aiokproto.producer import Producer
from tests.producer.helpers import FAST, create_topic


async def test_a_request_that_ends_in_the_drain_pass_does_not_lose_the_wake_up(
    kafka: Any, topic_name: str
) -> None:
    # acks=0 written now ends in the drain loop's own pass: its wake() found no waiter
    # and was lost, so batches queued behind the in-flight limit waited for the next
    # send() (none came: flush() hung until delivery_timeout_ms)
    await create_topic(kafka.bootstrap_servers, topic_name)
    async with Producer(
        bootstrap_servers=kafka.bootstrap_servers,
        acks=0,
        linger_ms=0,
        batch_size=300,
        max_in_flight_requests_per_connection=1,
        delivery_timeout_ms=5_000,
        request_timeout_ms=4_000,
        **FAST,
    ) as p:
        await (await p.send(topic_name, b"warm-up", partition=0))  # the connection is open
        futures = [await p.send(topic_name, b"." * 100, partition=0) for _ in range(20)]
        for future in futures:
            await future  # every record of 10 batches is written
