"""Smoke test of an installed aiokproto wheel: ``make dist-check`` runs it in a fresh
venv per built wheel (outside the checkout, so the import must come from the venv).

Checks that the compiled codec loaded, then produces a record to a throw-away local
Kafka (``aiokproto.testing.LocalKafka``, jars from the user cache dir) and consumes it
back. Exit status 0 on success; a failed check raises.
"""

from __future__ import annotations

import asyncio
import sys
import uuid


async def roundtrip(bootstrap: str) -> None:
    from aiokproto import Consumer, Producer

    topic = f"dist-smoke-{uuid.uuid4().hex[:8]}"
    async with Producer(bootstrap_servers=bootstrap) as producer:
        metadata = await producer.send_and_wait(topic, b"hello", key=b"k")
    async with Consumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest"
    ) as consumer:
        record = await asyncio.wait_for(consumer.getone(), 30)
    assert (record.key, record.value, record.offset) == (b"k", b"hello", metadata.offset)


def main() -> int:
    import aiokproto
    import aiokproto.accel
    from aiokproto.testing import PLAINTEXT_ONLY, LocalKafka

    assert sys.prefix != sys.base_prefix, "run this in the venv the wheel went into"
    assert aiokproto.__file__ and aiokproto.__file__.startswith(sys.prefix), aiokproto.__file__
    assert aiokproto.accel.implementation() == "compiled", aiokproto.accel.missing_reason
    with LocalKafka(security=PLAINTEXT_ONLY) as kafka:
        asyncio.run(roundtrip(kafka.bootstrap_servers))
    print(f"ok: aiokproto from {aiokproto.__file__}, compiled codec, produce+consume")
    return 0


if __name__ == "__main__":
    sys.exit(main())
