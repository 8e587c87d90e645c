"""SASL/GSSAPI against a real MIT KDC and a Kafka broker that logs in from a keytab:
a ticket cache and a keytab, SASL_PLAINTEXT and SASL_SSL, KIP-368 re-authentication,
and each failure a user meets (no ticket, expired ticket, unknown service principal)
failing at once with what to fix."""

from __future__ import annotations

import asyncio
import json
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from aiokproto.consumer import Consumer
from aiokproto.net.kerberos import (
    KerberosClockSkewError,
    KerberosCredentialsError,
    KerberosServicePrincipalError,
    KerberosTicketExpiredError,
)
from aiokproto.producer import Producer
from aiokproto.protocol.messages.metadata import MetadataRequest
from aiokproto.testing import LocalKafka
from tests.cli.helpers import cli
from tests.clients import client_for
from tests.kerberos.fixtures import GSSAPI, Realm


async def test_ticket_cache_login_produces_and_consumes(
    realm: Realm, gssapi_kafka: LocalKafka, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ccache = tmp_path / "alice.cc"
    realm.kdc.kinit("alice", realm.keytab("alice"), ccache)
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{ccache}")  # the default cache, as after kinit
    topic = f"krb-{uuid.uuid4().hex[:8]}"
    bootstrap = gssapi_kafka.bootstrap("SASL_PLAINTEXT")
    async with Producer(bootstrap_servers=bootstrap, **GSSAPI) as producer:
        await producer.send_and_wait(topic, b"over kerberos")
    async with Consumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", **GSSAPI
    ) as consumer:
        record = await asyncio.wait_for(consumer.getone(), 30)
    assert record.value == b"over kerberos"


async def test_keytab_login_over_sasl_ssl(realm: Realm, gssapi_kafka: LocalKafka) -> None:
    assert gssapi_kafka.ca_file is not None
    async with client_for(
        gssapi_kafka.bootstrap("SASL_SSL"),
        **{**GSSAPI, "security_protocol": "SASL_SSL"},
        ssl_cafile=str(gssapi_kafka.ca_file),
        sasl_kerberos_keytab=str(realm.keytab("bob")),
        sasl_kerberos_principal="bob",
    ) as client:
        node = next(iter(client.metadata.snapshot.brokers))
        conn = await client.connection(node)
        response = await conn.send(MetadataRequest(topics=[]))
        assert [b.node_id for b in response.brokers] == [node]


async def test_keytab_sessions_are_reauthenticated_across_ticket_renewal(
    realm: Realm, gssapi_kafka: LocalKafka
) -> None:
    # carol's tickets live 2 s, the listener's sessions 1.5 s: one connection
    # re-authenticates (KIP-368) again and again while its tickets expire and the
    # client gets new ones from the keytab
    keytab = realm.keytabs / "carol.keytab"
    if not keytab.exists():
        realm.kdc.add_principal("carol", keytab, max_life="2 seconds")
    logins_before = realm.kdc.as_requests("carol")
    async with client_for(
        gssapi_kafka.bootstrap("SASL_PLAINTEXT"),
        **GSSAPI,
        sasl_kerberos_keytab=str(keytab),
        sasl_kerberos_principal="carol",
    ) as client:
        node = next(iter(client.metadata.snapshot.brokers))
        conn = await client.connection(node)
        deadlines = [conn._reauth_at]
        began = time.monotonic()
        while time.monotonic() - began < 3.2:  # past the first ticket's end
            await asyncio.sleep(0.5)
            await conn.send(MetadataRequest(topics=[]))
            if conn._reauth_at != deadlines[-1]:
                deadlines.append(conn._reauth_at)
        assert conn.connected
        assert await client.connection(node) is conn
    assert None not in deadlines and len(deadlines) >= 3  # re-authenticated twice or more
    assert realm.kdc.as_requests("carol") - logins_before >= 2  # a new ticket was got


def test_the_cli_logs_in_with_its_kerberos_flags(realm: Realm, gssapi_kafka: LocalKafka) -> None:
    """A keytab through the CLI's flags (krb5.conf from $KRB5_CONFIG, as the realm
    fixture set it), no properties file."""
    run = cli(
        "cluster", "describe",
        "-b", gssapi_kafka.bootstrap("SASL_PLAINTEXT"),
        "--security-protocol", "SASL_PLAINTEXT",
        "--sasl-mechanism", "GSSAPI",
        "--sasl-kerberos-domain-name", "localhost",
        "--sasl-kerberos-keytab", str(realm.keytab("bob")),
        "--sasl-kerberos-principal", "bob",
        "--output", "json",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["brokers"]


async def _fails_fast(gssapi_kafka: LocalKafka, error: type[Exception], **options: Any) -> str:
    began = time.monotonic()
    client = client_for(
        gssapi_kafka.bootstrap("SASL_PLAINTEXT"),
        **{**GSSAPI, **options},
        default_api_timeout_ms=10_000,
    )
    with pytest.raises(error) as caught:
        async with client:
            pass
    assert time.monotonic() - began < 3  # not a retry loop until the API timeout
    return str(caught.value)


async def test_no_ticket_names_kinit(gssapi_kafka: LocalKafka, tmp_path: Path) -> None:
    message = await _fails_fast(
        gssapi_kafka, KerberosCredentialsError, sasl_kerberos_ccache=f"FILE:{tmp_path}/none"
    )
    assert "no Kerberos ticket" in message and "kinit" in message


async def test_expired_ticket_says_so(realm: Realm, gssapi_kafka: LocalKafka) -> None:
    await asyncio.sleep(max(0.0, realm.short_ticket_ends + 0.1 - time.time()))
    message = await _fails_fast(
        gssapi_kafka,
        KerberosTicketExpiredError,
        sasl_kerberos_ccache=f"FILE:{realm.short_ccache}",
    )
    assert "expired" in message and "kinit" in message


async def test_unknown_service_principal_names_the_options(
    realm: Realm, gssapi_kafka: LocalKafka
) -> None:
    message = await _fails_fast(
        gssapi_kafka,
        KerberosServicePrincipalError,
        sasl_kerberos_service_name="kafka-nope",
        sasl_kerberos_keytab=str(realm.keytab("alice")),
    )
    assert "kafka-nope/localhost" in message
    assert "sasl_kerberos_service_name" in message


async def test_clock_skew_with_the_kdc_says_to_synchronize(
    realm: Realm, gssapi_kafka: LocalKafka, monkeypatch: pytest.MonkeyPatch
) -> None:
    if shutil.which("faketime") is None:
        pytest.skip("faketime is not installed (make krb5-deps installs it as root)")
    # the same realm served by a KDC an hour ahead, MIT's clock correction off
    keytab = realm.keytabs / "dave.keytab"
    if not keytab.exists():
        realm.kdc.add_principal("dave", keytab)
    monkeypatch.setenv("KRB5_CONFIG", str(realm.kdc.start_skewed("+1 hour")))
    message = await _fails_fast(
        gssapi_kafka,
        KerberosClockSkewError,
        sasl_kerberos_keytab=str(keytab),
        sasl_kerberos_principal="dave",
    )
    assert "synchronize the clocks" in message and "skew" in message.lower()
