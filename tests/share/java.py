"""Kafka's own Java share consumer (ConsoleShareConsumer from the broker's jars) as a
subprocess, for share groups shared with aiokproto members."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from aiokproto.testing.discovery import KafkaService, local_jars_possible
from aiokproto.testing.jars import classpath

CONSOLE_SHARE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleShareConsumer"


class JavaShareConsumer:
    """A ConsoleShareConsumer subprocess; ``lines`` collects the records it prints
    (``Partition:N<TAB>value``), as it prints them."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        async for line in self.proc.stdout:
            self.lines.append(line.decode().rstrip("\n"))

    def values(self) -> list[str]:
        """The values printed so far (the text after the partition)."""
        return [line.rsplit("\t", 1)[-1] for line in self.lines]

    async def stop(self) -> None:
        if self.proc.returncode is None:
            self.proc.terminate()  # SIGTERM: the consumer closes and leaves the group
            try:
                await asyncio.wait_for(self.proc.wait(), 20)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader


@contextlib.asynccontextmanager
async def java_share_consumer(
    kafka: KafkaService, topic: str, group: str
) -> AsyncIterator[JavaShareConsumer]:
    """Start one; on exit it is stopped with SIGTERM (a clean close) and waited for."""
    if not local_jars_possible(kafka.version):
        pytest.skip("needs Java and the Kafka jars for the Java share consumer")
    proc = await asyncio.create_subprocess_exec(
        "java",
        "-cp",
        classpath(kafka.version),
        CONSOLE_SHARE_CONSUMER,
        "--bootstrap-server",
        kafka.bootstrap_servers,
        "--topic",
        topic,
        "--group",
        group,
        "--formatter-property",
        "print.partition=true",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    consumer = JavaShareConsumer(proc)
    try:
        yield consumer
    finally:
        await consumer.stop()
