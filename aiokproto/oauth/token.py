"""Pure logic of the OAuth client-credentials login (no I/O): Java's refresh schedule
(``sasl.login.refresh.*``), the retry backoff (``sasl.login.retry.backoff.*``), reading
a token endpoint's answer and the JWT claims the client needs (never verified here: the
broker checks the signature against the JWKS)."""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass

from aiokproto.errors import KafkaAuthenticationError, KafkaConfigError


class OAuthTokenError(KafkaAuthenticationError):
    """The token endpoint refused, failed or answered with something unusable.

    ``status`` is the HTTP status when there was an answer (401 for a wrong client
    secret), None when the endpoint could not be reached or timed out."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class RefreshConfig:
    """Java's ``sasl.login.refresh.*`` settings, with its defaults and legal ranges."""

    window_factor: float = 0.8
    window_jitter: float = 0.05
    min_period_s: float = 60.0
    buffer_s: float = 300.0

    def __post_init__(self) -> None:
        # the ranges Java's configuration accepts
        _check_range("sasl.login.refresh.window.factor", self.window_factor, 0.5, 1.0)
        _check_range("sasl.login.refresh.window.jitter", self.window_jitter, 0.0, 0.25)
        _check_range("sasl.login.refresh.min.period.seconds", self.min_period_s, 0.0, 900.0)
        _check_range("sasl.login.refresh.buffer.seconds", self.buffer_s, 0.0, 3600.0)


def _check_range(name: str, value: float, low: float, high: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise KafkaConfigError(f"{name} must be a number from {low:g} to {high:g}, not {value!r}")


def refresh_at(
    start: float, expiry: float, now: float, config: RefreshConfig, rand: float
) -> float:
    """When to fetch the next token, as Java's refreshing login computes it.

    The refresh falls at ``window_factor + window_jitter * rand`` of the token's
    lifetime (``rand`` in [0, 1)), then is moved to keep ``buffer_s`` before expiry
    and to wait at least ``min_period_s``; when those two together exceed what is left
    of the lifetime (a short-lived token), both are ignored and the fraction is taken
    of the time left. An expired token is refreshed at once.
    """
    if now >= expiry:
        return now
    fraction = config.window_factor + config.window_jitter * rand
    start = min(max(start, 0.0), now)  # an issued-at in the future is clock skew
    if now + config.min_period_s + config.buffer_s > expiry:
        return now + (expiry - now) * fraction
    proposed = start + (expiry - start) * fraction
    proposed = min(proposed, expiry - config.buffer_s)
    return max(proposed, now + config.min_period_s)


def backoff_s(attempt: int, base_ms: int, max_ms: int) -> float:
    """The wait before retry ``attempt`` (1-based): ``base_ms`` doubled per attempt,
    at most ``max_ms`` (``sasl.login.retry.backoff.ms`` / ``.max.ms``)."""
    wait_ms: int = min(base_ms * 2 ** min(attempt - 1, 30), max_ms)
    return wait_ms / 1000


@dataclass(frozen=True, slots=True)
class AccessToken:
    """A token from the endpoint: its text, when it was issued and when it expires
    (wall-clock seconds), and the claims the client could read (empty for an opaque
    token)."""

    value: str = ""
    issued_at: float = 0.0
    expiry: float = 0.0
    claims: Mapping[str, object] | None = None

    def __repr__(self) -> str:
        return f"AccessToken(<secret>, expiry={self.expiry:.0f})"


def jwt_claims(token: str) -> dict[str, object] | None:
    """The payload of a compact JWS (three dot-separated base64url parts), without
    checking the signature; None when ``token`` is not one (an opaque token)."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        payload = json.loads(b64url_decode(parts[1]))
    except (ValueError, binascii.Error):
        return None
    return payload if isinstance(payload, dict) else None


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def parse_token_response(body: bytes, now: float, url: str) -> AccessToken:
    """Read an RFC 6749 section 5.1 answer into an ``AccessToken``.

    The expiry is the JWT's ``exp`` claim when the token is a JWT (what the broker
    enforces), else ``now + expires_in``. A token that carries neither, or that is
    already expired, is an ``OAuthTokenError`` naming what was wrong.
    """
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        snippet = body[:120].decode("utf-8", errors="replace")
        raise OAuthTokenError(
            f"the token endpoint {url} answered 200 with a body that is not JSON: "
            f"{snippet!r} (is sasl.oauthbearer.token.endpoint.url the token endpoint?)",
            status=200,
        ) from None
    if not isinstance(doc, dict):
        raise OAuthTokenError(
            f"the token endpoint {url} answered with JSON {type(doc).__name__}, not an object",
            status=200,
        )
    if "access_token" not in doc and isinstance(doc.get("error"), str):
        # some identity providers refuse with 200 and an RFC 6749 section 5.2 body
        raise OAuthTokenError(
            f"the token endpoint {url} answered 200 with an error: {error_text(body)}",
            status=200,
        )
    value = doc.get("access_token")
    if not isinstance(value, str) or not value or any(c in value for c in " \x01\r\n"):
        raise OAuthTokenError(
            f"the token endpoint {url} answered without a usable access_token "
            f"(keys: {', '.join(sorted(map(str, doc))) or 'none'})",
            status=200,
        )
    token_type = doc.get("token_type", "Bearer")
    if not isinstance(token_type, str) or token_type.lower() != "bearer":
        raise OAuthTokenError(
            f"the token endpoint {url} issued a {token_type!r} token; OAUTHBEARER needs "
            "a Bearer token",
            status=200,
        )
    claims = jwt_claims(value)
    issued_at = now
    expiry: float | None = None
    if claims is not None:
        exp, iat = claims.get("exp"), claims.get("iat")
        if _is_number(exp):
            expiry = float(exp)  # type: ignore[arg-type]
        if _is_number(iat):
            issued_at = float(iat)  # type: ignore[arg-type]
    if expiry is None:
        expires_in = doc.get("expires_in")
        if isinstance(expires_in, str) and expires_in.isdigit():
            expires_in = int(expires_in)  # some servers send it quoted
        if not _is_number(expires_in) or expires_in <= 0:  # type: ignore[operator]
            raise OAuthTokenError(
                f"the token from {url} has no expiry: it is not a JWT with an 'exp' claim "
                f"and expires_in is {expires_in!r}; the client cannot know when to refresh",
                status=200,
            )
        expiry = now + float(expires_in)  # type: ignore[arg-type]
    if expiry <= now:
        raise OAuthTokenError(
            f"the token from {url} expired {now - expiry:.0f} s before it arrived "
            "(exp is in the past: check this machine's clock against the identity "
            "provider's)",
            status=200,
        )
    return AccessToken(value, issued_at, expiry, claims or {})


def _is_number(value: object) -> bool:
    # finite: an exp of NaN (JSON parsers take it) compared false with every time and
    # made each token() call fetch again
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def error_text(body: bytes) -> str:
    """The ``error`` and ``error_description`` of an RFC 6749 section 5.2 answer, or the
    start of the body when it is not one."""
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get("error"), str):
        described = doc.get("error_description")
        return f"{doc['error']}: {described}" if isinstance(described, str) else doc["error"]
    return repr(body[:200].decode("utf-8", errors="replace"))
