"""SASL and SSL listeners of the session broker, checked with librdkafka."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from aiokproto.testing import LocalKafka

Connect = Callable[..., Any]  # see try_connect in tests/harness/conftest.py


def _sasl(
    kafka: LocalKafka, protocol: str, mechanism: str, user: str, password: str
) -> dict[str, object]:
    config: dict[str, object] = {
        "bootstrap.servers": kafka.bootstrap(protocol),
        "security.protocol": protocol,
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }
    if protocol == "SASL_SSL":
        config["ssl.ca.location"] = str(kafka.ca_file)
    return config


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_plaintext_accepts_right_credentials(
    kafka_secure: LocalKafka, try_connect: Connect, mechanism: str
) -> None:
    user = kafka_secure.users[0]
    attempt = try_connect(
        _sasl(kafka_secure, "SASL_PLAINTEXT", mechanism, user.username, user.password)
    )
    assert attempt.ok, attempt.logs[-3:]
    assert attempt.broker_ids == [1]


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_plaintext_rejects_wrong_password(
    kafka_secure: LocalKafka, try_connect: Connect, mechanism: str
) -> None:
    user = kafka_secure.users[0].username
    attempt = try_connect(
        _sasl(kafka_secure, "SASL_PLAINTEXT", mechanism, user, "wrong"), timeout=2
    )
    assert not attempt.ok
    assert attempt.logged("Authentication failed"), attempt.logs[-3:]


def test_ssl_with_the_generated_ca(kafka_secure: LocalKafka, try_connect: Connect) -> None:
    attempt = try_connect(
        {
            "bootstrap.servers": kafka_secure.bootstrap("SSL"),
            "security.protocol": "SSL",
            "ssl.ca.location": str(kafka_secure.ca_file),
        }
    )
    assert attempt.ok, attempt.logs[-3:]


def test_ssl_hostname_localhost_matches_the_certificate(
    kafka_secure: LocalKafka, try_connect: Connect
) -> None:
    attempt = try_connect(
        {
            "bootstrap.servers": kafka_secure.bootstrap("SSL").replace("127.0.0.1", "localhost"),
            "security.protocol": "SSL",
            "ssl.ca.location": str(kafka_secure.ca_file),
            "ssl.endpoint.identification.algorithm": "https",
        }
    )
    assert attempt.ok, attempt.logs[-3:]


def test_ssl_rejected_without_trusting_the_ca(
    kafka_secure: LocalKafka, try_connect: Connect
) -> None:
    attempt = try_connect(
        {"bootstrap.servers": kafka_secure.bootstrap("SSL"), "security.protocol": "SSL"}, timeout=2
    )
    assert not attempt.ok
    assert attempt.logged("certificate verify failed"), attempt.logs[-3:]


def test_mutual_tls_with_the_client_certificate(
    kafka_secure: LocalKafka, try_connect: Connect
) -> None:
    tls = kafka_secure.tls
    assert tls is not None
    attempt = try_connect(
        {
            "bootstrap.servers": kafka_secure.bootstrap("SSL"),
            "security.protocol": "SSL",
            "ssl.ca.location": str(tls.ca_file),
            "ssl.certificate.location": str(tls.client_cert),
            "ssl.key.location": str(tls.client_key),
        }
    )
    assert attempt.ok, attempt.logs[-3:]


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_sasl_ssl(kafka_secure: LocalKafka, try_connect: Connect, mechanism: str) -> None:
    user = kafka_secure.users[1]
    good = try_connect(_sasl(kafka_secure, "SASL_SSL", mechanism, user.username, user.password))
    assert good.ok, good.logs[-3:]
    bad = try_connect(_sasl(kafka_secure, "SASL_SSL", mechanism, user.username, "nope"), timeout=2)
    assert not bad.ok
    assert bad.logged("Authentication failed"), bad.logs[-3:]
