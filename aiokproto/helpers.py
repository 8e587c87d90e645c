"""Helpers with aiokafka's names and signatures, for code moving from aiokafka
(``create_ssl_context``).

``create_ssl_context(...)`` builds the ``ssl.SSLContext`` that every client takes as
``ssl_context=`` (with ``security_protocol="SSL"`` or ``"SASL_SSL"``).
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Callable
from os import PathLike

from aiokproto.errors import KafkaConfigError

__all__ = ["create_ssl_context"]

StrPath = str | bytes | PathLike[str] | PathLike[bytes]
Password = Callable[[], str | bytes | bytearray] | str | bytes | bytearray


def create_ssl_context(
    *,
    cafile: StrPath | None = None,
    capath: StrPath | None = None,
    cadata: str | bytes | None = None,
    certfile: StrPath | None = None,
    keyfile: StrPath | None = None,
    password: Password | None = None,
    crlfile: StrPath | None = None,
) -> ssl.SSLContext:
    """A client TLS context that verifies the broker, as aiokafka's helper builds it.

    ``cafile``/``capath``/``cadata`` are the CAs that signed the brokers' certificates
    (PEM file, directory of hashed PEM files, or PEM text / DER bytes); with none of
    them the system's CAs are trusted. ``certfile`` (PEM chain), ``keyfile`` and
    ``password`` (str, bytes or a callable returning one) are the client certificate
    for mutual TLS. ``crlfile`` (kafka-python's ``ssl_crlfile``; aiokafka has none)
    is a PEM CRL: the broker's certificate is then checked against it.

    The broker's certificate and host name are always verified. A file that cannot
    be read or parsed raises ``KafkaConfigError`` (aiokafka lets ``OSError`` or
    ``ssl.SSLError`` through; both are the cause here).
    """
    if certfile is None and (keyfile is not None or password is not None):
        # aiokafka silently drops them; a key without its certificate is a mistake.
        raise KafkaConfigError("keyfile and password need certfile (the client certificate)")
    if isinstance(capath, (str, bytes, PathLike)) and not os.path.isdir(capath):
        # with capath the system CAs are not loaded: a mistyped directory would give a
        # context that trusts nothing, and every connection would fail later
        raise KafkaConfigError(f"capath {os.fsdecode(capath)!r} is not a directory")
    try:
        context = ssl.create_default_context(
            ssl.Purpose.SERVER_AUTH, cafile=cafile, capath=capath, cadata=cadata
        )
        if certfile is not None:
            context.load_cert_chain(certfile, keyfile, password)
        if crlfile is not None:
            context.load_verify_locations(crlfile)
            # The broker's (leaf) certificate; CA certificates carry no CRL here.
            context.verify_flags |= ssl.VERIFY_CRL_CHECK_LEAF
    except (OSError, ssl.SSLError, ValueError, TypeError) as exc:
        raise KafkaConfigError(f"cannot build the TLS context: {exc}") from exc
    return context
