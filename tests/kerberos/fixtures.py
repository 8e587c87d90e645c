"""Fixtures (a pytest plugin, loaded by tests/conftest.py): a throwaway MIT Kerberos
realm and a Kafka broker with GSSAPI listeners, both started once per session on first
use (skipped, saying why, without MIT Kerberos, the gssapi package or a locally started
Kafka). ``realm.default_ccache`` is the realm's default ticket cache, where the guides'
"after kinit" example finds alice's ticket."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from aiokproto.testing import LocalKafka
from aiokproto.testing.broker_config import SASL_PLAINTEXT, SASL_SSL, SecurityOptions
from aiokproto.testing.discovery import external_bootstrap, local_jars_possible
from aiokproto.testing.kerberos import LocalKdc, gssapi_broker_options, kerberos_missing
from aiokproto.testing.node import FAST_START_JVM_OPTIONS

#: KIP-368 sessions on the SASL_PLAINTEXT GSSAPI listener (SASL_SSL keeps unlimited ones)
REAUTH_MS = 1500


@dataclass
class Realm:
    kdc: LocalKdc
    keytabs: Path  # folder: kafka.keytab, alice.keytab, bob.keytab
    # a ticket cache whose 1 s ticket was got at the start of the session
    short_ccache: Path
    short_ticket_ends: float

    def keytab(self, user: str) -> Path:
        return self.keytabs / f"{user}.keytab"


@pytest.fixture(scope="session")
def realm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Realm]:
    why_not = kerberos_missing()
    if why_not is not None:
        pytest.skip(why_not)
    pytest.importorskip("gssapi", reason='the gssapi extra: pip install "aiokproto[gssapi]"')
    keytabs = tmp_path_factory.mktemp("keytabs")
    saved = {k: os.environ.get(k) for k in ("KRB5_CONFIG", "KRB5CCNAME")}
    with LocalKdc() as kdc:
        kdc.add_principal("kafka/localhost", keytabs / "kafka.keytab")
        for user in ("alice", "bob"):
            kdc.add_principal(user, keytabs / f"{user}.keytab")
        # the client library reads krb5.conf from here; the default ticket cache of
        # the realm is a file in the KDC's folder, empty until a test fills it
        os.environ["KRB5_CONFIG"] = str(kdc.krb5_conf)
        os.environ.pop("KRB5CCNAME", None)
        # got now, so it has expired by the time the broker has started
        short = keytabs / "short.cc"
        kdc.kinit("alice", keytabs / "alice.keytab", short, lifetime="1s")
        ends = time.time() + 1
        try:
            yield Realm(kdc, keytabs, short, ends)
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


@pytest.fixture(scope="session")
def gssapi_kafka(realm: Realm, kafka_version: str) -> Iterator[LocalKafka]:
    if external_bootstrap() is not None:
        pytest.skip("KAFKA_BOOTSTRAP_SERVERS is set; the GSSAPI broker is started locally only")
    if not local_jars_possible(kafka_version):
        pytest.skip("the GSSAPI broker needs Java 17+ and Maven on PATH")
    protocols = (SASL_PLAINTEXT, SASL_SSL)
    overrides, jvm = gssapi_broker_options(realm.kdc, realm.keytab("kafka"), protocols)
    overrides[f"listener.name.{SASL_PLAINTEXT.lower()}.gssapi.connections.max.reauth.ms"] = str(
        REAUTH_MS
    )
    kafka = LocalKafka(
        version=kafka_version,
        security=SecurityOptions(protocols=protocols, mechanisms=("PLAIN",)),
        overrides=overrides,
        jvm_options=(*FAST_START_JVM_OPTIONS, *jvm),
    )
    with kafka:
        yield kafka
