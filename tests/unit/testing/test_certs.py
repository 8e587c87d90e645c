"""The throw-away certificates carry the names the SSL listeners need."""

from __future__ import annotations

import ipaddress
from pathlib import Path

from cryptography import x509

from aiokproto.testing import (
    generate_tls_files,
)


def test_certificates_have_the_required_names(tmp_path: Path) -> None:
    tls = generate_tls_files(tmp_path)
    cert = x509.load_pem_x509_certificate(tls.server_cert.read_bytes())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["localhost"]
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    ca = x509.load_pem_x509_certificate(tls.ca_file.read_bytes())
    cert.verify_directly_issued_by(ca)
    keystore = tls.server_keystore.read_text()
    assert keystore.startswith("-----BEGIN PRIVATE KEY-----")
    assert keystore.count("BEGIN CERTIFICATE") == 2
