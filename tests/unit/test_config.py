"""Client configuration fails fast with clear typed errors."""

from __future__ import annotations

from typing import Any

import pytest

from aiokproto import Producer
from aiokproto.config import parse_bootstrap_servers, split_options
from aiokproto.errors import KafkaConfigError

B = "localhost:1"  # never contacted: construction-only tests


def test_bootstrap_forms() -> None:
    assert parse_bootstrap_servers("a:1, b:2") == (("a", 1), ("b", 2))
    assert parse_bootstrap_servers(["[::1]:9093", "host"]) == (("::1", 9093), ("host", 9092))
    for bad in ["", "a:notaport", "a:0", ":9092", " , "]:
        with pytest.raises(KafkaConfigError):
            parse_bootstrap_servers(bad)


@pytest.mark.parametrize("given", ["PLAINTEXT://localhost:9092", "http://localhost:9092/"])
def test_a_bootstrap_server_with_a_scheme_fails_at_once_naming_host_port(given: str) -> None:
    # it was taken as the host "PLAINTEXT://localhost": start() failed 5 s later with
    # "the host name does not resolve"
    with pytest.raises(KafkaConfigError) as info:
        Producer(bootstrap_servers=f"a:1,{given}")
    assert "give host:port ('localhost:9092')" in str(info.value)
    assert "security_protocol" in str(info.value)


def test_unknown_and_invalid_options() -> None:
    with pytest.raises(KafkaConfigError, match=r"unknown option.*linger"):
        split_options({"bootstrap_servers": "a:1", "linger": 5}, (), "Admin")
    with pytest.raises(KafkaConfigError, match="bootstrap_servers"):
        split_options({}, (), "Admin")
    with pytest.raises(KafkaConfigError, match="request_timeout_ms"):
        split_options({"bootstrap_servers": "a:1", "request_timeout_ms": 0}, (), "Admin")
    with pytest.raises(KafkaConfigError, match="metadata_max_age_ms"):
        split_options({"bootstrap_servers": "a:1", "metadata_max_age_ms": "x"}, (), "Admin")
    config, own = split_options({"bootstrap_servers": "a:1", "acks": "all"}, ("acks",), "Producer")
    assert own == {"acks": "all"} and config.bootstrap_servers == (("a", 1),)


def test_client_config_repr_hides_secrets() -> None:
    config, _ = split_options(
        {
            "bootstrap_servers": "a:1",
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_plain_username": "u",
            "sasl_plain_password": "hunter2",
            "ssl_password": "keypass",
        },
        (),
        "test",
    )
    text = repr(config) + repr(config.connection) + repr(config.security)
    assert "hunter2" not in text and "keypass" not in text


def test_bootstrap_servers_none_is_a_config_error() -> None:
    """Ill-typed options fail with KafkaConfigError naming them: not a TypeError
    "'NoneType' object is not iterable", nor "bootstrap server 108 is not a string"
    for bytes."""
    for bad in (None, 9092, b"localhost:9092"):
        with pytest.raises(KafkaConfigError, match="bootstrap_servers"):
            Producer(bootstrap_servers=bad)


@pytest.mark.parametrize(
    "options",
    [
        {"security_protocol": "SSL", "ssl_context": "not a context"},
        {"allow_auto_create_topics": "no"},
        {"ssl_check_hostname": "no"},
    ],
    ids=["ssl_context-str", "allow_auto_create_topics-str", "ssl_check_hostname-str"],
)
def test_ill_typed_shared_options_fail_at_construction(options: dict[str, Any]) -> None:
    """The str "no" is truthy: allow_auto_create_topics="no" and ssl_check_hostname="no" would
    silently mean True, and a str ssl_context would fail only when a connection is
    made. Ill-typed options fail at construction."""
    with pytest.raises(KafkaConfigError):
        Producer(bootstrap_servers=B, **options)
