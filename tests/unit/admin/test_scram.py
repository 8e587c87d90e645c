"""Client-side SCRAM credential derivation against RFC 7677's example."""

from __future__ import annotations

import base64
import hashlib
import hmac

from aiokproto.admin import ScramMechanism
from aiokproto.admin.scram import salted_password


def test_salted_password_matches_rfc_7677_example() -> None:
    # RFC 7677 section 3: user "user", password "pencil"; check the client proof.
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    salted = salted_password(ScramMechanism.SCRAM_SHA_256, "pencil", salt, 4096)
    auth = (
        b"n=user,r=rOprNGfwEbeRWgbNEkqO,"
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,"
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    )
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    signature = hmac.digest(hashlib.sha256(client_key).digest(), auth, "sha256")
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    assert base64.b64encode(proof) == b"dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    assert len(salted_password(ScramMechanism.SCRAM_SHA_512, b"pw", b"s", 4096)) == 64
