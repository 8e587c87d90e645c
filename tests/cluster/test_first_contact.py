"""First contact with a cluster that cannot be reached: ``start()`` fails within
``bootstrap_timeout_ms`` (5 s) naming each address and what it said, waits longer when
asked (a service that starts before its brokers), and gives a server that answered the
whole ``default_api_timeout_ms``."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from aiokproto import Admin, Consumer, Producer, ShareConsumer
from aiokproto.errors import BootstrapError, KafkaConnectionError, KafkaError
from tests.clients import client_for
from tests.cluster.test_bootstrap_error import closed_port

UNRESOLVABLE = "nonexistent.invalid:9092"


def share(**options: Any) -> ShareConsumer:
    return ShareConsumer("t", group_id="first-contact", **options)


async def stop(client: Any) -> None:
    await (getattr(client, "stop", None) or client.close)()


async def test_with_defaults_a_dead_bootstrap_list_fails_within_ten_seconds() -> None:
    port = closed_port()
    client = client_for(f"127.0.0.1:{port},{UNRESOLVABLE}")
    began = time.monotonic()
    with pytest.raises(BootstrapError) as info:
        await client.start()
    assert time.monotonic() - began < 10  # the feature: was 60 s (default_api_timeout_ms)
    text = str(info.value)
    assert "within 5 s (bootstrap_timeout_ms; raise it to wait longer" in text
    assert f"127.0.0.1:{port} (connection refused, nothing listens there)" in text
    assert f"{UNRESOLVABLE} (the host name does not resolve: " in text
    assert isinstance(info.value.__cause__, KafkaConnectionError)


@pytest.mark.parametrize("make", [Producer, Consumer, Admin, share])
async def test_every_client_raises_it_from_start(make: Callable[..., Any]) -> None:
    client = make(
        bootstrap_servers=f"{UNRESOLVABLE},127.0.0.1:{closed_port()}", bootstrap_timeout_ms=300
    )
    began = time.monotonic()
    try:
        with pytest.raises(BootstrapError, match=r"within 0\.3 s \(bootstrap_timeout_ms"):
            await client.start()
        assert time.monotonic() - began < 5
    finally:
        await stop(client)


def test_the_cli_fails_fast_and_names_the_setting() -> None:
    port = closed_port()
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "aiokproto", "topics", "list", "-b", f"127.0.0.1:{port}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert time.monotonic() - began < 12  # was 30 s (the CLI's --timeout)
    assert done.returncode == 1
    message = " ".join(done.stderr.split())  # rich wraps long lines
    # the command line's name for the setting (it has no bootstrap_timeout_ms option)
    assert "no bootstrap server answered within 5 s (--timeout" in message
    assert f"127.0.0.1:{port} (connection refused" in message


@contextlib.asynccontextmanager
async def forwarder(port: int, target: str) -> AsyncIterator[None]:
    """A TCP relay on ``127.0.0.1:port`` to ``target`` (a broker that starts late)."""
    host, tport = target.rsplit(":", 1)
    pipes: set[asyncio.Task[None]] = set()

    async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()
        dst.close()

    async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(host, int(tport))
        for task in (pipe(reader, up_writer), pipe(up_reader, writer)):
            pipes.add(t := asyncio.ensure_future(task))
            t.add_done_callback(pipes.discard)

    server = await asyncio.start_server(relay, "127.0.0.1", port)
    try:
        yield
    finally:
        server.close()
        for task in list(pipes):
            task.cancel()


@contextlib.asynccontextmanager
async def silent_server() -> AsyncIterator[tuple[str, list[asyncio.StreamWriter]]]:
    """A port on 127.0.0.1 that accepts connections and never answers: its address,
    and the connections it accepted (kept open until the block ends)."""
    held: list[asyncio.StreamWriter] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    try:
        yield f"127.0.0.1:{server.sockets[0].getsockname()[1]}", held
    finally:
        server.close()
        for writer in held:
            writer.close()


async def test_bootstrap_timeout_ms_waits_for_brokers_that_start_later(kafka: Any) -> None:
    port = closed_port()
    client = client_for(f"127.0.0.1:{port}", bootstrap_timeout_ms=10_000)
    starting = asyncio.ensure_future(client.start())
    await asyncio.sleep(1.0)  # refused meanwhile, and retried
    assert not starting.done()
    async with forwarder(port, kafka.bootstrap_servers.split(",")[0]):
        await asyncio.wait_for(starting, 8)
        assert client.metadata.snapshot.brokers
        await client.close()


async def test_a_server_that_answered_gets_default_api_timeout_ms() -> None:
    # TCP accepted but no Kafka answer: the cluster exists, so the short bound no
    # longer applies (a broker still loading, a slow network)
    async with silent_server() as (address, _):
        client = client_for(
            address,
            bootstrap_timeout_ms=200,
            default_api_timeout_ms=1500,
            request_timeout_ms=400,
        )
        began = time.monotonic()
        with pytest.raises(BootstrapError, match=r"within 1\.5 s \(default_api_timeout_ms\)"):
            await client.start()
        assert time.monotonic() - began > 1.2


async def test_one_dead_and_one_live_address_start_at_once(kafka: Any) -> None:
    live = kafka.bootstrap_servers.split(",")[0]
    for servers in (f"127.0.0.1:{closed_port()},{live}", f"{UNRESOLVABLE},{live}"):
        began = time.monotonic()
        async with Admin(bootstrap_servers=servers) as admin:
            assert (await admin.describe_cluster()).brokers
        assert time.monotonic() - began < 5, servers


async def test_a_server_that_never_answers_does_not_hold_up_a_live_one(
    kafka: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A port that accepts and never answers (or a dropped SYN) first in the list: the
    # live server is tried after a short stagger, not after request_timeout_ms (30 s)
    # or a connect timeout that outlasts bootstrap_timeout_ms. The tie-break of equally
    # loaded nodes is random: fixed here so each order is tried for sure.
    monkeypatch.setattr("aiokproto.cluster.client.random.random", lambda: 0.0)
    live = kafka.bootstrap_servers.split(",")[0]
    async with silent_server() as (silent_at, held):
        for servers in (f"{silent_at},{live}", f"{live},{silent_at}"):
            began = time.monotonic()
            async with Admin(bootstrap_servers=servers) as admin:
                assert (await admin.describe_cluster()).brokers
            assert time.monotonic() - began < 5, servers
        assert held, "the silent server was never tried: the test proves nothing"


# -- hostile: giving up on a failing start ------------------------------------------


@pytest.mark.parametrize("make", [Producer, Consumer, Admin, share])
async def test_cancelling_a_failing_start_leaves_nothing_running(make: Callable[..., Any]) -> None:
    client = make(bootstrap_servers=f"127.0.0.1:{closed_port()}")
    starting = asyncio.ensure_future(client.start())
    await asyncio.sleep(0.5)  # failing, retrying
    starting.cancel()
    began = time.monotonic()
    with pytest.raises(asyncio.CancelledError):
        await starting
    assert time.monotonic() - began < 1
    await stop(client)
    await asyncio.sleep(0.05)
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    assert not [t for t in others if "aiokproto" in t.get_name()], others


async def test_closing_the_cluster_client_ends_a_waiting_start() -> None:
    client = client_for(f"127.0.0.1:{closed_port()}")
    starting = asyncio.ensure_future(client.start())
    await asyncio.sleep(0.5)
    await client.close()
    with pytest.raises(KafkaConnectionError, match="closed while starting"):
        await asyncio.wait_for(starting, 2)


@pytest.mark.parametrize("make", [Producer, Consumer, Admin, share])
async def test_stop_during_a_failing_start_ends_it_at_once(make: Callable[..., Any]) -> None:
    client = make(bootstrap_servers=f"127.0.0.1:{closed_port()}")
    starting = asyncio.ensure_future(client.start())
    await asyncio.sleep(0.5)  # failing, retrying (the deadline is 5 s away)
    began = time.monotonic()
    await stop(client)
    with pytest.raises(KafkaError, match="while starting"):
        await asyncio.wait_for(starting, 2)
    assert time.monotonic() - began < 1.5  # was: start() went on until its deadline
    await asyncio.sleep(0.05)
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    assert not [t for t in others if "aiokproto" in t.get_name()], others


@pytest.mark.parametrize("make", [Producer, Admin, share])
async def test_a_start_stopped_before_it_finished_leaves_the_client_stopped(
    kafka: Any, make: Callable[..., Any]
) -> None:
    client = make(bootstrap_servers=kafka.bootstrap_servers)
    starting = asyncio.ensure_future(client.start())
    await asyncio.sleep(0)  # start() is under way
    await stop(client)
    with pytest.raises(KafkaError, match="while starting"):
        await asyncio.wait_for(starting, 5)
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    assert not [t for t in others if "aiokproto" in t.get_name() and not t.done()], others
