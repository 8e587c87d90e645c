"""Client-side SCRAM credential derivation (RFC 5802 ``Hi``, as KIP-554 requires)."""

from __future__ import annotations

import os

from aiokproto.admin.types import ScramMechanism

SALT_BYTES = 32


def new_salt() -> bytes:
    return os.urandom(SALT_BYTES)


def salted_password(
    mechanism: ScramMechanism, password: str | bytes, salt: bytes, iterations: int
) -> bytes:
    """``Hi(password, salt, iterations)``: PBKDF2-HMAC with the mechanism's hash.

    The output length is the hash size, as RFC 5802 defines Hi.
    """
    import hashlib  # OpenSSL's, ~2 ms: loaded by the Admin's SCRAM calls only

    secret = password.encode("utf-8") if isinstance(password, str) else password
    return hashlib.pbkdf2_hmac(mechanism.hash_name, secret, salt, iterations)
