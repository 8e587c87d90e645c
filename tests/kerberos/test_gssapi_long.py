"""The longer GSSAPI checks, run by ``make test-kerberos`` (``AIOKPROTO_KERBEROS=full``;
about 35 s more than the slice in make test): ticket cache renewal by kinit under a
live connection, what happens when nobody renews, a KDC that never answers, and
Kafka's Java client on the same listener, and no KDC or broker left after a SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from aiokproto.consumer import Consumer
from aiokproto.errors import KafkaTimeoutError
from aiokproto.net.kerberos import KerberosTicketExpiredError
from aiokproto.producer import Producer
from aiokproto.protocol.messages.metadata import MetadataRequest
from aiokproto.testing import LocalKafka
from aiokproto.testing.jars import classpath
from aiokproto.testing.kerberos import krb5_conf
from aiokproto.testing.node import find_java
from aiokproto.testing.processes import pid_alive
from tests.clients import client_for
from tests.kerberos.fixtures import GSSAPI, REAUTH_MS, Realm

pytestmark = pytest.mark.skipif(
    os.environ.get("AIOKPROTO_KERBEROS") != "full",
    reason="the longer Kerberos checks: make test-kerberos (AIOKPROTO_KERBEROS=full)",
)


async def test_a_ticket_cache_renewed_by_kinit_carries_the_connection_on(
    realm: Realm, gssapi_kafka: LocalKafka, tmp_path: Path
) -> None:
    # a 3 s ticket, renewed after 1 s by kinit into the same cache (as k5start or a
    # cron'd kinit does): re-authentication after the first ticket's end uses the new one
    ccache = tmp_path / "alice.cc"
    realm.kdc.kinit("alice", realm.keytab("alice"), ccache, lifetime="3s")
    first_ends = time.monotonic() + 3
    async with client_for(
        gssapi_kafka.bootstrap("SASL_PLAINTEXT"), **GSSAPI, sasl_kerberos_ccache=f"FILE:{ccache}"
    ) as client:
        node = next(iter(client.metadata.snapshot.brokers))
        conn = await client.connection(node)
        deadlines = [conn._reauth_at]
        await asyncio.sleep(1)
        await asyncio.to_thread(realm.kdc.kinit, "alice", realm.keytab("alice"), ccache)
        while time.monotonic() < first_ends + REAUTH_MS / 1000:
            await asyncio.sleep(0.4)
            await conn.send(MetadataRequest(topics=[]))
            if conn._reauth_at != deadlines[-1]:
                deadlines.append(conn._reauth_at)
        assert conn.connected and await client.connection(node) is conn
    assert None not in deadlines and len(deadlines) >= 3


async def test_an_expired_unrenewed_ticket_ends_the_session_with_a_typed_error(
    realm: Realm, gssapi_kafka: LocalKafka, tmp_path: Path
) -> None:
    ccache = tmp_path / "alice.cc"
    realm.kdc.kinit("alice", realm.keytab("alice"), ccache, lifetime="2s")
    async with client_for(
        gssapi_kafka.bootstrap("SASL_PLAINTEXT"),
        **GSSAPI,
        sasl_kerberos_ccache=f"FILE:{ccache}",
        default_api_timeout_ms=5000,
    ) as client:
        node = next(iter(client.metadata.snapshot.brokers))
        conn = await client.connection(node)
        await asyncio.sleep(2 + REAUTH_MS / 1000)
        # the session is over and the ticket too: re-authentication fails, by name
        with pytest.raises(KerberosTicketExpiredError, match="run kinit again"):
            await conn.send(MetadataRequest(topics=[]))
        assert not conn.connected


async def test_a_kdc_that_never_answers_is_bounded_and_the_loop_keeps_running(
    realm: Realm, gssapi_kafka: LocalKafka, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a KDC port that accepts connections and never answers: the ticket request blocks
    # in its worker thread while the event loop goes on; request_timeout_ms bounds it
    keytab = realm.keytabs / "erin.keytab"
    if not keytab.exists():
        realm.kdc.add_principal("erin", keytab)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        conf = tmp_path / "krb5.conf"
        conf.write_text(krb5_conf(realm.kdc.realm, silent.getsockname()[1], tmp_path / "cc"))
        monkeypatch.setenv("KRB5_CONFIG", str(conf))
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        ticker = asyncio.ensure_future(tick())
        began = time.monotonic()
        client = client_for(
            gssapi_kafka.bootstrap("SASL_PLAINTEXT"),
            **GSSAPI,
            sasl_kerberos_keytab=str(keytab),
            sasl_kerberos_principal="erin",
            request_timeout_ms=1000,
            default_api_timeout_ms=3000,
        )
        with pytest.raises(KafkaTimeoutError, match="the Kerberos KDC did not answer within"):
            async with client:
                pass
        waited = time.monotonic() - began
        ticker.cancel()
    assert waited < 5
    assert ticks >= waited / 0.01 * 0.5  # the loop ran throughout


async def test_java_client_and_ours_share_the_gssapi_listener(
    realm: Realm, gssapi_kafka: LocalKafka, tmp_path: Path
) -> None:
    # a check of the set-up: Kafka's own Java producer logs in from bob's keytab on the
    # listener our client uses (confluent-kafka's Linux wheels have no GSSAPI: their
    # librdkafka is built without Cyrus SASL, so it cannot take part)
    java = find_java()
    if java is None:
        pytest.skip("java is not on PATH")
    topic = f"krb-mixed-{uuid.uuid4().hex[:8]}"
    bootstrap = gssapi_kafka.bootstrap("SASL_PLAINTEXT")
    async with Producer(
        bootstrap_servers=bootstrap,
        **GSSAPI,
        sasl_kerberos_keytab=str(realm.keytab("alice")),
        sasl_kerberos_principal="alice",
    ) as producer:
        await producer.send_and_wait(topic, b"from aiokproto")
    props = tmp_path / "java-client.properties"
    props.write_text(
        "security.protocol=SASL_PLAINTEXT\n"
        "sasl.mechanism=GSSAPI\n"
        "sasl.kerberos.service.name=kafka\n"
        "sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required "
        f'useKeyTab=true storeKey=true keyTab="{realm.keytab("bob")}" '
        f'principal="{realm.kdc.principal("bob")}";\n'
    )
    argv = [
        java,
        f"-Djava.security.krb5.conf={realm.kdc.krb5_conf}",
        "-cp", classpath(gssapi_kafka.version),
        "org.apache.kafka.tools.ConsoleProducer",
        "--bootstrap-server", bootstrap,
        "--topic", topic,
        "--command-config", str(props),
    ]  # fmt: skip
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(proc.communicate(b"from java\n"), 60)
    assert proc.returncode == 0, output.decode(errors="replace")[-3000:]
    async with Consumer(
        topic,
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        **GSSAPI,
        sasl_kerberos_keytab=str(realm.keytab("alice")),
        sasl_kerberos_principal="alice",
    ) as consumer:
        values = set()
        while len(values) < 2:
            values.add((await asyncio.wait_for(consumer.getone(), 30)).value)
    assert values == {b"from aiokproto", b"from java"}


def _children(pid: int) -> dict[int, str]:
    """Processes whose parent is ``pid`` (by /proc), with their command names."""
    found: dict[int, str] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            name, rest = stat.read_text().rsplit(")", 1)
        except OSError:
            continue
        if int(rest.split()[1]) == pid:
            found[int(stat.parent.name)] = name.split("(", 1)[1]
    return found


def test_a_sigterm_of_pytest_leaves_no_kdc_or_broker_behind(tmp_path: Path) -> None:
    # the fixtures start the KDC and the broker's JVM from a worker thread, where the
    # kernel's parent-death signal cannot be used: a SIGTERM mid-session must still
    # stop them (it left both running, reparented to init)
    env = {k: v for k, v in os.environ.items() if k != "AIOKPROTO_KERBEROS"}
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
            "tests/kerberos/test_gssapi.py::test_keytab_login_over_sasl_ssl"]  # fmt: skip
    with (tmp_path / "out").open("wb") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    started: dict[int, str] = {}
    try:
        deadline = time.monotonic() + 60
        while not {"krb5kdc", "java"} <= set(started.values()):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.1)
            started.update(_children(proc.pid))
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        deadline = time.monotonic() + 15
        while (alive := [pid for pid in started if pid_alive(pid)]) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not alive, f"left running after SIGTERM: {[started[p] for p in alive]}"
    finally:
        for pid in started:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
