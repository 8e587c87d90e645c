"""SASL mechanisms as pure client-side state machines (no I/O): PLAIN, SCRAM-SHA-256/512
(RFC 5802), OAUTHBEARER (GSSAPI is in ``aiokproto.net.kerberos``).

A mechanism produces the bytes to send and checks what the broker answers; the
connection carries them in SaslAuthenticate requests. SCRAM follows RFC 5802 and
verifies the server signature, so a server that does not know the password cannot
pass itself off as the broker.
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable
from typing import Protocol

from aiokproto.errors import KafkaAuthenticationError


class TokenSource(Protocol):
    """aiokafka's ``AbstractTokenProvider`` shape: ``async def token()`` returns the
    token; an optional ``extensions()`` returns SASL extensions (KIP-342)."""

    def token(self) -> Awaitable[str]: ...


TokenProvider = Callable[[], Awaitable[str]] | TokenSource
"""What OAUTHBEARER takes: an async callable returning a fresh bearer token, or an
object with an async ``token()`` method (aiokafka's token providers)."""

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI")


class SaslMechanism(Protocol):
    name: str

    def first_message(self) -> bytes:
        """The client's first message."""
        ...

    def respond(self, challenge: bytes) -> bytes | None:
        """The answer to a broker challenge, or None when authentication is complete."""
        ...


class PlainMechanism:
    """RFC 4616: one message, authorization id empty."""

    name = "PLAIN"

    def __init__(self, username: str, password: str) -> None:
        self._message = b"\0" + username.encode() + b"\0" + password.encode()

    def __repr__(self) -> str:
        return "PlainMechanism(<secret>)"

    def first_message(self) -> bytes:
        return self._message

    def respond(self, challenge: bytes) -> bytes | None:
        return None


def _scram_escape(username: str) -> str:
    return username.replace("=", "=3D").replace(",", "=2C")


def _parse_attributes(message: bytes, mechanism: str) -> dict[str, str]:
    try:
        text = message.decode()
        return {item[0]: item[2:] for item in text.split(",") if len(item) >= 2 and item[1] == "="}
    except UnicodeDecodeError:
        raise KafkaAuthenticationError(f"{mechanism}: the broker sent non-UTF-8 bytes") from None


class ScramMechanism:
    """RFC 5802 SCRAM with SHA-256 or SHA-512, no channel binding."""

    def __init__(self, name: str, username: str, password: str, nonce: str | None = None) -> None:
        if name not in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            raise ValueError(f"unknown SCRAM mechanism {name!r}")
        # hashlib (OpenSSL's), hmac and secrets load with the first SCRAM exchange, not
        # with every client's import
        import hashlib
        import secrets

        self.name = name
        self._hash = hashlib.sha256 if name == "SCRAM-SHA-256" else hashlib.sha512
        self._hash_name = "sha256" if name == "SCRAM-SHA-256" else "sha512"
        self._password = password.encode()
        self._nonce = nonce or secrets.token_urlsafe(24)
        self._client_first_bare = f"n={_scram_escape(username)},r={self._nonce}"
        self._server_signature: bytes | None = None

    def __repr__(self) -> str:
        return f"ScramMechanism({self.name}, <secret>)"

    def first_message(self) -> bytes:
        return ("n,," + self._client_first_bare).encode()

    def respond(self, challenge: bytes) -> bytes | None:
        if self._server_signature is None:
            return self._client_final(challenge)
        self._verify_server_final(challenge)
        return None

    def _client_final(self, server_first: bytes) -> bytes:
        import hashlib
        import hmac

        attrs = _parse_attributes(server_first, self.name)
        if "e" in attrs:
            raise KafkaAuthenticationError(f"{self.name}: broker refused: {attrs['e']}")
        try:
            nonce, salt, iterations = attrs["r"], base64.b64decode(attrs["s"]), int(attrs["i"])
        except (KeyError, ValueError) as exc:
            raise KafkaAuthenticationError(
                f"{self.name}: malformed server-first message ({exc})"
            ) from None
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise KafkaAuthenticationError(f"{self.name}: the broker's nonce does not extend ours")
        if not 1 <= iterations <= 1_000_000:
            raise KafkaAuthenticationError(f"{self.name}: implausible iteration count {iterations}")
        salted = hashlib.pbkdf2_hmac(self._hash_name, self._password, salt, iterations)
        client_key = hmac.digest(salted, b"Client Key", self._hash_name)
        stored_key = self._hash(client_key).digest()
        final_bare = f"c=biws,r={nonce}"
        auth_message = ",".join(
            (self._client_first_bare, server_first.decode(), final_bare)
        ).encode()
        client_signature = hmac.digest(stored_key, auth_message, self._hash_name)
        proof = bytes(a ^ b for a, b in zip(client_key, client_signature, strict=True))
        server_key = hmac.digest(salted, b"Server Key", self._hash_name)
        self._server_signature = hmac.digest(server_key, auth_message, self._hash_name)
        return f"{final_bare},p={base64.b64encode(proof).decode()}".encode()

    def _verify_server_final(self, server_final: bytes) -> None:
        import hmac

        attrs = _parse_attributes(server_final, self.name)
        if "e" in attrs:
            raise KafkaAuthenticationError(f"{self.name}: broker refused: {attrs['e']}")
        expected = self._server_signature or b""
        try:
            got = base64.b64decode(attrs.get("v", ""))
        except ValueError:
            got = b""
        if not hmac.compare_digest(got, expected):
            raise KafkaAuthenticationError(
                f"{self.name}: the broker's server signature is wrong; it does not know "
                "the credential, so the connection is not trusted"
            )


class OAuthBearerMechanism:
    """RFC 7628 client: sends the token; an error challenge is acknowledged, then raised."""

    name = "OAUTHBEARER"

    def __init__(
        self, token: str, extensions: dict[str, str] | None = None, hint: str = ""
    ) -> None:
        self._token = token
        self._extensions = extensions or {}
        self._failed: bytes | None = None
        # what the provider knows about the token (its audience, issuer), added to a
        # refusal so that it names what to fix
        self.hint = hint

    def __repr__(self) -> str:
        return "OAuthBearerMechanism(<secret>)"

    def first_message(self) -> bytes:
        ext = "".join(f"{k}={v}\x01" for k, v in sorted(self._extensions.items()))
        return f"n,,\x01auth=Bearer {self._token}\x01{ext}\x01".encode()

    def respond(self, challenge: bytes) -> bytes | None:
        if self._failed is not None:
            raise KafkaAuthenticationError(
                f"OAUTHBEARER: broker rejected the token: {self._failed.decode(errors='replace')}"
                + (f"; {self.hint}" if self.hint else "")
            )
        if challenge:
            # RFC 7628 3.2.2: the client must answer an error with a lone %x01.
            self._failed = challenge
            return b"\x01"
        return None
