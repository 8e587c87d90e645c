"""pytest fixtures for a real Kafka.  Load with
``pytest_plugins = ["aiokproto.testing.pytest_plugin"]``.

Fixtures (all brokers start lazily, on first use, and live for the session):

* ``kafka``: single node of the selected version (``--kafka-version`` or
  ``$AIOKPROTO_KAFKA_VERSION``, default 4.4.0), or ``$KAFKA_BOOTSTRAP_SERVERS``.
  Tests marked ``kafka39`` that use ``kafka`` run once per version.
* ``kafka_secure``: the same local node, which also has SASL_PLAINTEXT, SSL and
  SASL_SSL listeners (skips when the broker is not local).
* ``kafka39``: a single Kafka 3.9.1 node. ``kafka_any``: parametrized over the selected
  version and 3.9.1, the newest and the oldest supported by default (``--kafka-version
  4.3.1`` runs the one in between).
* ``kafka_cluster``: a 3-node cluster (tests may stop/kill/restart nodes; stopped nodes
  are restarted before the next test).
* ``topic_name``: a unique topic name per test.
* ``kafka_oauth``: a single node whose SASL_PLAINTEXT listener validates OAUTHBEARER
  tokens from ``oidc_server`` (a local OpenID Connect provider, Spring Authorization
  Server, built once by Maven into the cache dir) against its JWKS (KIP-768). Both
  start in the background as soon as collection finds a test that uses them.
* ``schema_registry``: a local Confluent-compatible schema registry (Apicurio Registry,
  built once by Maven into the cache dir; ``.url`` for ``SchemaRegistryClient``); tests
  may ``stop()`` and ``start()`` it (it comes back on the same port, empty).

``--event-loop uvloop`` (or ``$AIOKPROTO_EVENT_LOOP=uvloop``) runs every async test on
uvloop instead of asyncio's own loop; ``event_loop_name`` tells a test which one.

Local brokers run from jars in the user cache dir (``default_cache_dir()``:
``$AIOKPROTO_CACHE_DIR``, else ``~/.cache/aiokproto``), fetched by Maven the first time:
a fresh clone of a project on the same machine (CI's included) reuses them.
"""

from __future__ import annotations

import asyncio
import os
import re
import uuid
from collections.abc import Callable, Iterator, Mapping

import pytest

from aiokproto.testing.broker_config import ALL_LISTENERS, PLAINTEXT_ONLY
from aiokproto.testing.cluster import LocalKafka
from aiokproto.testing.discovery import (
    KafkaService,
    external_bootstrap,
    kafka_for_tests,
    local_jars_possible,
    requested_version,
)
from aiokproto.testing.errors import KafkaHarnessError
from aiokproto.testing.jars import DEFAULT_VERSION, SUPPORTED_VERSIONS
from aiokproto.testing.oidc import LocalOidcServer, OAuthSetup, oidc_possible
from aiokproto.testing.schema_registry import LocalSchemaRegistry, registry_possible

_MARKERS = (
    "cluster: needs the 3-node KRaft cluster",
    "kafka39: also runs against Kafka 3.9.1",
    "slow: long-running test",
)


class KafkaPool:
    """One single-node Kafka per version, started on first request, stopped at the end."""

    def __init__(self, primary_version: str) -> None:
        self.primary_version = primary_version
        self._services: dict[str, KafkaService] = {}

    def get(self, version: str) -> KafkaService:
        if version not in self._services:
            if external_bootstrap() is not None and version != self.primary_version:
                pytest.skip(f"KAFKA_BOOTSTRAP_SERVERS is set; no local Kafka {version} is started")
            self._services[version] = kafka_for_tests(version, security=ALL_LISTENERS)
        return self._services[version]

    def close(self) -> None:
        errors = []
        for service in self._services.values():
            try:
                service.stop()
            except Exception as exc:  # keep stopping the others
                errors.append(exc)
        self._services.clear()
        if errors:
            raise KafkaHarnessError(f"stopping Kafka failed: {errors}")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("aiokproto-kafka", "aiokproto local Kafka")
    group.addoption(
        "--kafka-version",
        choices=SUPPORTED_VERSIONS,
        default=None,
        help="Apache Kafka version for the 'kafka' fixture "
        f"(default: $AIOKPROTO_KAFKA_VERSION or {DEFAULT_VERSION})",
    )
    group.addoption(
        "--event-loop",
        choices=EVENT_LOOPS,
        default=None,
        help="event loop for async tests (default: $AIOKPROTO_EVENT_LOOP or asyncio)",
    )
    group.addoption(
        "--unit",
        action="store_true",
        default=False,
        help="only the tests that need no Kafka (the rest are deselected): what runs "
        "again without the compiled codec and on other Pythons",
    )


EVENT_LOOPS = ("asyncio", "uvloop")
#: a test that uses any of these (directly or through another fixture) needs a broker
_BROKER_FIXTURES = frozenset(
    {"kafka_pool", "_kafka_cluster_session", "_schema_registry_session", "_oauth_session"}
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--unit", default=False):
        return
    keep: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        names = getattr(item, "fixturenames", ())
        (dropped if _BROKER_FIXTURES.intersection(names) else keep).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


def selected_event_loop(config: pytest.Config) -> str:
    option = config.getoption("--event-loop", default=None)
    name = option if isinstance(option, str) else os.environ.get("AIOKPROTO_EVENT_LOOP")
    name = name or "asyncio"
    if name not in EVENT_LOOPS:
        raise pytest.UsageError(f"unknown event loop {name!r}; choose from {EVENT_LOOPS}")
    return name


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]]:
    """pytest-asyncio's hook: the one loop factory every async test runs on."""
    if selected_event_loop(config) == "uvloop":
        import uvloop

        return {"uvloop": uvloop.new_event_loop}
    return {"asyncio": asyncio.new_event_loop}


@pytest.fixture(scope="session")
def event_loop_name(pytestconfig: pytest.Config) -> str:
    """``asyncio`` or ``uvloop``: the loop async tests (and examples) run on."""
    return selected_event_loop(pytestconfig)


def pytest_configure(config: pytest.Config) -> None:
    for marker in _MARKERS:
        config.addinivalue_line("markers", marker)


def _primary_version(config: pytest.Config) -> str:
    option = config.getoption("--kafka-version", default=None)
    return requested_version(option if isinstance(option, str) else None)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # A kafka39-marked test using `kafka` runs against the selected version and 3.9.1.
    if "kafka" in metafunc.fixturenames and metafunc.definition.get_closest_marker("kafka39"):
        versions = list(dict.fromkeys([_primary_version(metafunc.config), "3.9.1"]))
        metafunc.parametrize(
            "kafka", versions, indirect=True, ids=[f"kafka-{v}" for v in versions], scope="session"
        )
    # kafka_any: the selected version and 3.9.1 (once when 3.9.1 is the one selected)
    if "kafka_any" in metafunc.fixturenames:
        versions = list(dict.fromkeys([_primary_version(metafunc.config), "3.9.1"]))
        metafunc.parametrize(
            "kafka_any",
            versions,
            indirect=True,
            ids=[f"kafka-{v}" for v in versions],
            scope="session",
        )


@pytest.fixture(scope="session")
def kafka_version(pytestconfig: pytest.Config) -> str:
    return _primary_version(pytestconfig)


@pytest.fixture(scope="session")
def kafka_pool(kafka_version: str) -> Iterator[KafkaPool]:
    pool = KafkaPool(kafka_version)
    try:
        yield pool
    finally:
        pool.close()


@pytest.fixture(scope="session")
def kafka(request: pytest.FixtureRequest, kafka_pool: KafkaPool) -> KafkaService:
    version = getattr(request, "param", kafka_pool.primary_version)
    return kafka_pool.get(str(version))


@pytest.fixture(scope="session")
def kafka39(kafka_pool: KafkaPool) -> KafkaService:
    return kafka_pool.get("3.9.1")


@pytest.fixture(scope="session")
def kafka_any(request: pytest.FixtureRequest, kafka_pool: KafkaPool) -> KafkaService:
    return kafka_pool.get(str(request.param))


@pytest.fixture(scope="session")
def kafka_secure(kafka_pool: KafkaPool) -> LocalKafka:
    service = kafka_pool.get(kafka_pool.primary_version)
    if not isinstance(service, LocalKafka) or not service.security.has_sasl:
        pytest.skip("SASL/SSL listeners exist only on a locally started Kafka")
    return service


@pytest.fixture(scope="session")
def _kafka_cluster_session(kafka_version: str) -> Iterator[LocalKafka]:
    if external_bootstrap() is not None:
        pytest.skip("KAFKA_BOOTSTRAP_SERVERS is set; the 3-node cluster is started locally only")
    if not local_jars_possible(kafka_version):
        pytest.skip("the 3-node cluster needs Java 17+ and Maven on PATH")
    cluster = LocalKafka(nodes=3, version=kafka_version, security=PLAINTEXT_ONLY).start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def kafka_cluster(_kafka_cluster_session: LocalKafka) -> LocalKafka:
    """The session's 3-node cluster with every node running (healed before each test)."""
    cluster = _kafka_cluster_session
    for node in cluster.nodes:
        if not node.is_running:
            cluster.restart_node(node.node_id)
    return cluster


@pytest.fixture(scope="session")
def _schema_registry_session() -> Iterator[LocalSchemaRegistry]:
    why_not = registry_possible()
    if why_not is not None:
        pytest.skip(why_not)
    registry = LocalSchemaRegistry()
    registry.start()
    try:
        yield registry
    finally:
        registry.stop()


_OAUTH_SETUP = pytest.StashKey[OAuthSetup]()


def pytest_collection_finish(session: pytest.Session) -> None:
    # the OAuth servers take ~10 s to start: begin at once, while other tests run
    if not any("_oauth_session" in getattr(i, "fixturenames", ()) for i in session.items):
        return
    version = _primary_version(session.config)
    if oidc_possible() is None and local_jars_possible(version):
        session.config.stash[_OAUTH_SETUP] = OAuthSetup(version).begin()


def pytest_sessionfinish(session: pytest.Session) -> None:
    setup = session.config.stash.get(_OAUTH_SETUP, None)
    if setup is not None:  # begun at collection, maybe never used (a -k selection)
        del session.config.stash[_OAUTH_SETUP]
        setup.stop()


@pytest.fixture(scope="session")
def _oauth_session(pytestconfig: pytest.Config, kafka_version: str) -> OAuthSetup:
    setup = pytestconfig.stash.get(_OAUTH_SETUP, None)
    if setup is None:
        why_not = oidc_possible()
        if why_not is not None:
            pytest.skip(why_not)
        if not local_jars_possible(kafka_version):
            pytest.skip("the OAuth broker needs Java 17+ and Maven on PATH")
        setup = pytestconfig.stash[_OAUTH_SETUP] = OAuthSetup(kafka_version)
    setup.wait()  # stopped at the session's end (pytest_sessionfinish)
    return setup


@pytest.fixture(scope="session")
def oidc_server(_oauth_session: OAuthSetup) -> LocalOidcServer:
    return _oauth_session.server


@pytest.fixture(scope="session")
def kafka_oauth(_oauth_session: OAuthSetup) -> LocalKafka:
    return _oauth_session.kafka


@pytest.fixture
def schema_registry(_schema_registry_session: LocalSchemaRegistry) -> LocalSchemaRegistry:
    """The session's schema registry, running (started again if a test stopped it)."""
    _schema_registry_session.start()
    return _schema_registry_session


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic name unique to this test run: ``t-<test name>-<random hex>``."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", request.node.name)[:60].strip("-.")
    return f"t-{stem}-{uuid.uuid4().hex[:10]}"
