"""Fixtures (a pytest plugin, loaded by tests/conftest.py): a throwaway MIT Kerberos
realm and a Kafka broker with GSSAPI listeners, started once per session in the
background as soon as collection shows a test that uses them (skipped, saying why,
without MIT Kerberos, the gssapi package or a locally started Kafka).
``realm.kdc.default_ccache`` is the realm's default ticket cache, where the guides'
"after kinit" example finds alice's ticket."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from aiokproto.testing import LocalKafka
from aiokproto.testing.broker_config import SASL_PLAINTEXT, SASL_SSL, SecurityOptions
from aiokproto.testing.discovery import (
    external_bootstrap,
    local_jars_possible,
    requested_version,
)
from aiokproto.testing.kerberos import LocalKdc, gssapi_broker_options, kerberos_missing
from aiokproto.testing.node import FAST_START_JVM_OPTIONS

#: client options for the SASL_PLAINTEXT GSSAPI listener: the broker's principal is
#: kafka/localhost while its listeners advertise 127.0.0.1
GSSAPI = {
    "security_protocol": "SASL_PLAINTEXT",
    "sasl_mechanism": "GSSAPI",
    "sasl_kerberos_domain_name": "localhost",
}

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


def _why_not(version: str) -> str | None:
    """Why the realm or the broker cannot run here, or None."""
    why_not = kerberos_missing()
    if why_not is not None:
        return why_not
    try:
        import gssapi  # noqa: F401
    except ImportError:
        return 'the gssapi extra is not installed: pip install "aiokproto[gssapi]"'
    if external_bootstrap() is not None:
        return "KAFKA_BOOTSTRAP_SERVERS is set; the GSSAPI broker is started locally only"
    if not local_jars_possible(version):
        return "the GSSAPI broker needs Java 17+ and Maven on PATH"
    return None


class _Starter:
    """The KDC, then the broker, started in a worker thread as soon as collection shows
    that a test will use them: the broker's JVM boots (8-25 s on a 2-core machine)
    while the tests before the first user run, instead of in front of it."""

    def __init__(self, version: str, keytabs: Path) -> None:
        self.version = version
        self.keytabs = keytabs
        self.kdc = LocalKdc()
        self.kafka: LocalKafka | None = None
        self.short_ticket_ends = 0.0
        # the KDC and the JVM are started from a worker thread, so the kernel does not
        # kill them with pytest (PDEATHSIG follows the thread), and a SIGTERM's default
        # action skips the atexit reaper: make it stop the session as Ctrl-C does
        self._sigterm = signal.getsignal(signal.SIGTERM)
        if self._sigterm == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _interrupt)
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="gssapi-broker")
        self.realm_ready = self._pool.submit(self._start_realm)
        self.kafka_ready = self._pool.submit(self._start_kafka)
        self._pool.shutdown(wait=False)

    def _start_realm(self) -> None:
        self.kdc.start()
        self.kdc.add_principal("kafka/localhost", self.keytabs / "kafka.keytab")
        for user in ("alice", "bob"):
            self.kdc.add_principal(user, self.keytabs / f"{user}.keytab")
        # got now, so it has expired by the time the broker has started
        self.kdc.kinit(
            "alice", self.keytabs / "alice.keytab", self.keytabs / "short.cc", lifetime="1s"
        )
        self.short_ticket_ends = time.time() + 1

    def _start_kafka(self) -> None:
        self.realm_ready.result()
        protocols = (SASL_PLAINTEXT, SASL_SSL)
        overrides, jvm = gssapi_broker_options(self.kdc, self.keytabs / "kafka.keytab", protocols)
        reauth = f"listener.name.{SASL_PLAINTEXT.lower()}.gssapi.connections.max.reauth.ms"
        overrides[reauth] = str(REAUTH_MS)
        kafka = LocalKafka(
            version=self.version,
            security=SecurityOptions(protocols=protocols, mechanisms=("PLAIN",)),
            overrides=overrides,
            jvm_options=(*FAST_START_JVM_OPTIONS, *jvm),
        )
        self.kafka = kafka.start()

    def stop(self) -> None:
        if self._sigterm == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        for future in (self.kafka_ready, self.realm_ready):
            future.exception()  # wait for the thread: nothing is left half started
        try:
            if self.kafka is not None:
                self.kafka.stop()
        finally:
            self.kdc.stop()


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


_STARTER = pytest.StashKey[_Starter]()


def _needs_kerberos(item: pytest.Item) -> bool:
    if any(m.args and m.args[0] is True for m in item.iter_markers("skipif")):
        return False  # make test-kerberos's longer tests outside that target
    names = getattr(item, "fixturenames", ())
    if "realm" in names or "gssapi_kafka" in names:
        return True
    # a guide's code block (tests/docs) that logs in with GSSAPI, or a page of CLI
    # commands that does
    params = getattr(getattr(item, "callspec", None), "params", {})
    return any(
        '"GSSAPI"' in str(getattr(p, "code", ""))
        or (isinstance(p, Path) and "--sasl-mechanism GSSAPI" in p.read_text())
        for p in params.values()
    )


@pytest.hookimpl(trylast=True)  # after -k/-m deselection: only for tests that will run
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    if config.option.collectonly or not any(_needs_kerberos(i) for i in items):
        return
    version = config.getoption("--kafka-version", None) or requested_version()
    if _why_not(version) is not None:
        return
    keytabs = Path(tempfile.mkdtemp(prefix="aiokproto-keytabs-"))
    config.stash[_STARTER] = _Starter(version, keytabs)


def pytest_unconfigure(config: pytest.Config) -> None:
    starter = config.stash.get(_STARTER, None)
    if starter is not None:
        del config.stash[_STARTER]
        try:
            starter.stop()
        finally:
            shutil.rmtree(starter.keytabs, ignore_errors=True)


@pytest.fixture(scope="session")
def realm(pytestconfig: pytest.Config, kafka_version: str) -> Iterator[Realm]:
    why_not = _why_not(kafka_version)
    if why_not is not None:
        pytest.skip(why_not)
    starter = pytestconfig.stash.get(_STARTER, None)
    if starter is None:  # collected in a way the hook did not see: start here
        keytabs = Path(tempfile.mkdtemp(prefix="aiokproto-keytabs-"))
        starter = pytestconfig.stash[_STARTER] = _Starter(kafka_version, keytabs)
    starter.realm_ready.result()
    kdc = starter.kdc
    saved = {k: os.environ.get(k) for k in ("KRB5_CONFIG", "KRB5CCNAME")}
    # the client library reads krb5.conf from here; the default ticket cache of the
    # realm is a file in the KDC's folder, empty until a test fills it
    os.environ["KRB5_CONFIG"] = str(kdc.krb5_conf)
    os.environ.pop("KRB5CCNAME", None)
    try:
        yield Realm(kdc, starter.keytabs, starter.keytabs / "short.cc", starter.short_ticket_ends)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="session")
def gssapi_kafka(pytestconfig: pytest.Config, realm: Realm) -> LocalKafka:
    starter = pytestconfig.stash[_STARTER]
    starter.kafka_ready.result()
    assert starter.kafka is not None
    return starter.kafka
