"""aiokafka's security helpers: ``create_ssl_context`` and token-provider objects."""

from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from aiokproto import Admin
from aiokproto.errors import KafkaAuthenticationError, KafkaConfigError
from aiokproto.helpers import create_ssl_context
from aiokproto.net.security import SecurityConfig
from aiokproto.testing import LocalKafka
from tests.net.test_broker import unsecured_jwt

x509 = pytest.importorskip("cryptography.x509")
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.x509.oid import NameOID  # noqa: E402

# -- create_ssl_context without a broker -------------------------------------------


def test_create_ssl_context_missing_capath_is_an_error() -> None:
    """With capath given the system CAs are not loaded, so a mistyped directory would
    give a context that trusts nothing, and every connection would fail later with a
    TLS error that does not name capath: it is a KafkaConfigError at once."""
    with pytest.raises(KafkaConfigError, match=r"capath|/nonexistent"):
        create_ssl_context(capath="/nonexistent/ca-dir")


def test_the_context_verifies_the_broker_and_its_host_name() -> None:
    ctx = create_ssl_context()
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    assert not ctx.verify_flags & ssl.VERIFY_CRL_CHECK_LEAF


def test_bad_inputs_are_config_errors_with_their_cause(tmp_path: Path) -> None:
    with pytest.raises(KafkaConfigError, match="cannot build the TLS context") as info:
        create_ssl_context(cafile=tmp_path / "missing.pem")
    assert isinstance(info.value.__cause__, OSError)
    (tmp_path / "junk.pem").write_text("not a certificate")
    with pytest.raises(KafkaConfigError, match="cannot build the TLS context"):
        create_ssl_context(cafile=tmp_path / "junk.pem")
    with pytest.raises(KafkaConfigError, match="need certfile"):
        create_ssl_context(keyfile=tmp_path / "key.pem")


@dataclass
class Pki:
    """A CA, a server certificate for 127.0.0.1, a client certificate, and CRLs."""

    dir: Path
    ca_key: Any
    ca_cert: Any

    def path(self, name: str, data: bytes) -> Path:
        out = self.dir / name
        out.write_bytes(data)
        return out


def _name(cn: str) -> Any:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _cert(
    subject: str, key: Any, issuer: Any, issuer_key: Any, ca: bool = False, ip: bool = False
) -> Any:
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ip:
        san = x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
        builder = builder.add_extension(san, critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _pem(obj: Any) -> bytes:
    return bytes(obj.public_bytes(serialization.Encoding.PEM))


def _key_pem(key: Any, password: bytes | None = None) -> bytes:
    encryption = (
        serialization.BestAvailableEncryption(password)
        if password
        else serialization.NoEncryption()
    )
    return bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
    )


def _crl(issuer: Any, issuer_key: Any, revoked: list[int]) -> bytes:
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    builder = (
        x509.CertificateRevocationListBuilder()
        .issuer_name(issuer)
        .last_update(now)
        .next_update(now + dt.timedelta(days=1))
    )
    for serial in revoked:
        entry = x509.RevokedCertificateBuilder().serial_number(serial).revocation_date(now)
        builder = builder.add_revoked_certificate(entry.build())
    return _pem(builder.sign(issuer_key, hashes.SHA256()))


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = _cert("test CA", ca_key, _name("test CA"), ca_key, ca=True)
    return Pki(tmp_path, ca_key, ca_cert)


@pytest.fixture
async def tls_server(pki: Pki) -> AsyncIterator[tuple[int, int, list[bool]]]:
    """A TLS server for 127.0.0.1 that wants a client certificate signed by the CA:
    (port, the server certificate's serial, whether each client sent a certificate)."""
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _cert("127.0.0.1", key, pki.ca_cert.subject, pki.ca_key, ip=True)
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(
        pki.path("server.pem", _pem(cert)), pki.path("server.key", _key_pem(key))
    )
    server.load_verify_locations(pki.path("ca.pem", _pem(pki.ca_cert)))
    server.verify_mode = ssl.CERT_OPTIONAL
    peers: list[bool] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peers.append(writer.get_extra_info("peercert") is not None)
        writer.close()

    srv = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=server)
    yield srv.sockets[0].getsockname()[1], cert.serial_number, peers
    srv.close()
    await srv.wait_closed()


async def _handshake(port: int, ctx: ssl.SSLContext) -> None:
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx)
    writer.close()


async def test_a_client_certificate_with_a_password_is_presented(
    pki: Pki, tls_server: tuple[int, int, list[bool]]
) -> None:
    port, _, peers = tls_server
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _cert("client", key, pki.ca_cert.subject, pki.ca_key)
    certfile = pki.path("client.pem", _pem(cert))
    keyfile = pki.path("client.key", _key_pem(key, b"s3cret"))
    ca = pki.dir / "ca.pem"
    await _handshake(port, create_ssl_context(cafile=ca))
    await _handshake(
        port, create_ssl_context(cafile=ca, certfile=certfile, keyfile=keyfile, password="s3cret")
    )
    await _handshake(
        port,
        create_ssl_context(
            cafile=ca, certfile=certfile, keyfile=keyfile, password=lambda: b"s3cret"
        ),
    )
    await asyncio.sleep(0.05)
    assert peers == [False, True, True]
    with pytest.raises(KafkaConfigError, match="cannot build the TLS context"):
        create_ssl_context(cafile=ca, certfile=certfile, keyfile=keyfile, password="wrong")


async def test_crlfile_makes_a_revoked_broker_certificate_fail(
    pki: Pki, tls_server: tuple[int, int, list[bool]]
) -> None:
    port, serial, _ = tls_server
    ca = pki.dir / "ca.pem"
    subject, key = pki.ca_cert.subject, pki.ca_key
    clean = pki.path("clean.crl", _crl(subject, key, [serial + 1]))
    revoked = pki.path("revoked.crl", _crl(subject, key, [serial]))
    await _handshake(port, create_ssl_context(cafile=ca, crlfile=clean))
    with pytest.raises(ssl.SSLCertVerificationError, match="revoked"):
        await _handshake(port, create_ssl_context(cafile=ca, crlfile=revoked))
    await _handshake(port, create_ssl_context(cafile=ca))  # without a CRL nothing is checked


# -- against the broker's SSL listener -----------------------------------------------


async def _connects(kafka: LocalKafka, ctx: ssl.SSLContext, **extra: Any) -> None:
    async with Admin(
        bootstrap_servers=kafka.bootstrap("SSL"),
        security_protocol="SSL",
        ssl_context=ctx,
        default_api_timeout_ms=5_000,
        **extra,
    ) as admin:
        assert admin._client.metadata.snapshot.brokers


async def test_create_ssl_context_connects_to_the_broker(kafka_secure: LocalKafka) -> None:
    tls = kafka_secure.tls
    assert tls is not None
    await _connects(kafka_secure, create_ssl_context(cafile=tls.ca_file))
    await _connects(kafka_secure, create_ssl_context(cadata=tls.ca_file.read_text()))
    await _connects(
        kafka_secure,
        create_ssl_context(cafile=tls.ca_file, certfile=tls.client_cert, keyfile=tls.client_key),
    )
    # the system's CAs do not know the test CA
    with pytest.raises(KafkaAuthenticationError, match="TLS handshake"):
        await _connects(kafka_secure, create_ssl_context())


@pytest.fixture
def capath(kafka_secure: LocalKafka, tmp_path: Path) -> Path:
    """A directory holding the test CA under its subject-hash name, as capath wants."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("capath needs `openssl x509 -hash` to name the CA file")
    tls = kafka_secure.tls
    assert tls is not None
    digest = subprocess.run(
        [openssl, "x509", "-hash", "-noout", "-in", str(tls.ca_file)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    shutil.copy(tls.ca_file, tmp_path / f"{digest}.0")
    return tmp_path


async def test_capath_connects_to_the_broker(kafka_secure: LocalKafka, capath: Path) -> None:
    await _connects(kafka_secure, create_ssl_context(capath=capath))
    with pytest.raises(KafkaAuthenticationError, match="TLS handshake"):
        await _connects(kafka_secure, create_ssl_context(capath=capath.parent))


# -- aiokafka-style token providers --------------------------------------------------


class Provider:
    """Shaped like aiokafka's AbstractTokenProvider subclasses."""

    def __init__(self, token: object = "tok", extensions: object = None) -> None:
        self._token = token
        self._extensions = extensions
        self.calls = 0

    async def token(self) -> object:
        self.calls += 1
        return self._token

    def extensions(self) -> object:
        return self._extensions


def oauth(provider: object) -> SecurityConfig:
    return SecurityConfig(
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=provider,  # type: ignore[arg-type]
    )


async def test_a_provider_object_gives_the_token_and_its_extensions() -> None:
    provider = Provider("tok", {"traceId": "1"})
    mechanism = await oauth(provider).new_mechanism()
    assert mechanism.first_message() == b"n,,\x01auth=Bearer tok\x01traceId=1\x01\x01"
    assert provider.calls == 1
    plain = await oauth(Provider("t2")).new_mechanism()  # extensions() -> None: none sent
    assert plain.first_message() == b"n,,\x01auth=Bearer t2\x01\x01"

    async def fn() -> str:
        return "t3"

    assert b"Bearer t3" in (await oauth(fn).new_mechanism()).first_message()


def test_a_provider_that_is_neither_is_refused_at_construction() -> None:
    with pytest.raises(KafkaConfigError, match="async token\\(\\) method"):
        oauth(object())
    with pytest.raises(KafkaConfigError, match="sasl_oauth_token_provider"):
        oauth("a-token-string")


async def test_a_bad_token_or_extension_is_an_authentication_error() -> None:
    for provider, match in [
        (Provider(None), "returned NoneType"),
        (Provider(""), "non-empty str"),
        (Provider("t", {"auth": "x"}), "'auth'"),
        (Provider("t", {"trace-id": "x"}), "ASCII letters"),
        (Provider("t", {"a": "x\x01y"}), "without"),
        (Provider("t", ["a"]), "not a dict"),
    ]:
        with pytest.raises(KafkaAuthenticationError, match=match):
            await oauth(provider).new_mechanism()


async def test_aiokafka_token_provider_subclass_is_accepted() -> None:
    abc = pytest.importorskip("aiokafka.abc")

    class Theirs(abc.AbstractTokenProvider):  # type: ignore[misc]
        async def token(self) -> str:
            return "theirs"

    mechanism = await oauth(Theirs()).new_mechanism()
    assert mechanism.first_message() == b"n,,\x01auth=Bearer theirs\x01\x01"


async def test_a_provider_object_authenticates_with_the_broker(kafka_secure: LocalKafka) -> None:
    provider = Provider(unsecured_jwt("alice"), {"traceId": "abc"})
    async with Admin(
        bootstrap_servers=kafka_secure.bootstrap("SASL_PLAINTEXT"),
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=provider,
        default_api_timeout_ms=10_000,
    ) as admin:
        assert admin._client.metadata.snapshot.brokers
    assert provider.calls >= 1
    rejected = Provider("not-a-jwt")
    with pytest.raises(KafkaAuthenticationError, match="OAUTHBEARER"):
        async with Admin(
            bootstrap_servers=kafka_secure.bootstrap("SASL_PLAINTEXT"),
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="OAUTHBEARER",
            sasl_oauth_token_provider=rejected,
            default_api_timeout_ms=5_000,
        ):
            pass
    assert rejected.calls >= 1
