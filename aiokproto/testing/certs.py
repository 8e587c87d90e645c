"""A throw-away CA plus server and client certificates for the SSL listeners."""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from aiokproto.testing.errors import KafkaHarnessError

if TYPE_CHECKING:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec

_VALIDITY = dt.timedelta(days=7)


@dataclass(frozen=True)
class TlsFiles:
    """PEM files written for one cluster.

    ``ca_file`` is what clients pass to verify the broker (``ssl.ca.location`` /
    ``ssl.SSLContext.load_verify_locations``); ``client_cert``/``client_key`` allow mTLS.
    ``server_keystore`` holds the broker's key followed by its certificate chain, the
    layout Kafka's ``ssl.keystore.type=PEM`` expects.
    """

    directory: Path
    ca_file: Path
    server_cert: Path
    server_key: Path
    server_keystore: Path
    client_cert: Path
    client_key: Path


def generate_tls_files(directory: Path, hostname: str = "localhost") -> TlsFiles:
    """Write a CA, a server cert (SAN ``hostname`` and IP 127.0.0.1) and a client cert."""
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise KafkaHarnessError(
            "SSL listeners need the 'cryptography' package (pip install cryptography)"
        ) from exc

    directory.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)  # tolerate small clock skew

    def name(common_name: str) -> x509.Name:
        return x509.Name(
            [
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, "aiokproto tests"),
                x509.NameAttribute(NameOID.COMMON_NAME, common_name),
            ]
        )

    def new_key() -> ec.EllipticCurvePrivateKey:
        # P-256 keys are generated in microseconds, RSA keys take a noticeable while.
        return ec.generate_private_key(ec.SECP256R1())

    def pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
        # Unencrypted PKCS#8: what Kafka's PEM keystore reads without ssl.key.password.
        return key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    ca_key = new_key()
    ca_name = name("aiokproto test CA")
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )

    def leaf(
        common_name: str, usage: x509.ObjectIdentifier, san: list[x509.GeneralName] | None
    ) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
        key = new_key()
        builder = (
            x509.CertificateBuilder()
            .subject_name(name(common_name))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
            )
        )
        if san:
            builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
        return key, builder.sign(ca_key, hashes.SHA256())

    server_key, server_cert = leaf(
        hostname,
        ExtendedKeyUsageOID.SERVER_AUTH,
        [x509.DNSName(hostname), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))],
    )
    client_key, client_cert = leaf("aiokproto-client", ExtendedKeyUsageOID.CLIENT_AUTH, None)

    ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM)
    server_pem = server_cert.public_bytes(serialization.Encoding.PEM)
    files = TlsFiles(
        directory=directory,
        ca_file=directory / "ca.pem",
        server_cert=directory / "server.pem",
        server_key=directory / "server.key",
        server_keystore=directory / "server-keystore.pem",
        client_cert=directory / "client.pem",
        client_key=directory / "client.key",
    )
    files.ca_file.write_bytes(ca_pem)
    files.server_cert.write_bytes(server_pem + ca_pem)
    files.server_key.write_bytes(pem_key(server_key))
    files.server_keystore.write_bytes(pem_key(server_key) + server_pem + ca_pem)
    files.client_cert.write_bytes(client_cert.public_bytes(serialization.Encoding.PEM))
    files.client_key.write_bytes(pem_key(client_key))
    for secret in (files.server_key, files.server_keystore, files.client_key):
        secret.chmod(0o600)
    return files
