"""``OAuthClientCredentials``: an OAUTHBEARER token provider for an OAuth 2.0 / OIDC
token endpoint (client credentials grant, KIP-768's login), on httpx.

It authenticates with a client secret (HTTP Basic, ``client_secret_basic``) or a
private-key JWT assertion (RFC 7523 section 2.2, ``private_key_jwt``), caches the
token and fetches a new one once Java's refresh point has passed (``token.refresh_at``);
with KIP-368 re-authentication the broker asks for it before the old one expires. No
task outlives a caller: a fetch runs while someone awaits it (callers share one fetch)
and is cancelled when every caller is, so closing a client mid-refresh leaves nothing
behind.
"""

from __future__ import annotations

import asyncio
import base64
import email.utils
import json
import logging
import random
import ssl
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import SplitResult, quote_plus, urlsplit

from aiokproto.errors import KafkaConfigError
from aiokproto.oauth.token import (
    AccessToken,
    OAuthTokenError,
    RefreshConfig,
    b64url,
    backoff_s,
    error_text,
    parse_token_response,
    refresh_at,
)

if TYPE_CHECKING:
    import httpx

log = logging.getLogger("aiokproto.oauth")

INSTALL_HINT = "pip install 'aiokproto[oauth]'"
ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
ASSERTION_ALGORITHMS = ("RS256", "ES256")
MAX_BODY = 1 << 20
"""The largest token endpoint answer read (bytes)."""


def _import_httpx() -> Any:
    try:
        import httpx
    except ImportError:
        raise KafkaConfigError(
            f"the OAuth client-credentials login needs httpx: {INSTALL_HINT}"
        ) from None
    return httpx


class OAuthClientCredentials:
    """Fetches OAUTHBEARER tokens from ``token_endpoint_url`` with the client
    credentials grant. Pass it as ``sasl_oauth_token_provider``.

    Give ``client_secret`` (sent as HTTP Basic, as Java's client does), or
    ``private_key_file`` (a PEM key, RS256 or ES256) to sign a client assertion.
    ``scope`` and ``audience`` go into the request when set. ``ssl_cafile`` /
    ``ssl_verify`` / ``ssl_context`` secure an https endpoint. The refresh and retry
    settings are Java's ``sasl.login.refresh.*`` and ``sasl.login.retry.backoff.*``
    with its defaults; ``connect_timeout_ms`` and ``read_timeout_ms`` bound each
    request. Every failure is an ``OAuthTokenError`` (a ``KafkaAuthenticationError``).
    """

    def __init__(
        self,
        token_endpoint_url: str,
        client_id: str,
        client_secret: str | None = None,
        *,
        scope: str | None = None,
        audience: str | None = None,
        private_key_file: str | Path | None = None,
        private_key_passphrase: str | None = None,
        assertion_algorithm: str = "RS256",
        assertion_audience: str | None = None,
        assertion_lifetime_s: int = 300,
        extensions: Mapping[str, str] | None = None,
        header_urlencode: bool = False,
        ssl_cafile: str | None = None,
        ssl_verify: bool = True,
        ssl_context: ssl.SSLContext | None = None,
        connect_timeout_ms: int = 10_000,
        read_timeout_ms: int = 10_000,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 10_000,
        refresh_window_factor: float = 0.8,
        refresh_window_jitter: float = 0.05,
        refresh_min_period_s: float = 60.0,
        refresh_buffer_s: float = 300.0,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._httpx = _import_httpx()
        # what pickling sends (Spark ships the provider to its executors): the settings,
        # never a task or a cached token; each copy fetches its own
        self._settings = {
            k: v for k, v in locals().items() if k not in ("self", "transport", "clock")
        }
        parts = _url_parts(self._httpx, token_endpoint_url)
        if parts is not None and (parts.username is not None or parts.password is not None):
            raise KafkaConfigError(  # not echoed: errors and repr() show the URL
                "sasl.oauthbearer.token.endpoint.url must not hold credentials "
                "(user:password@): give them as client_id and client_secret"
            )
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise KafkaConfigError(
                "sasl.oauthbearer.token.endpoint.url must be an http(s) URL, not "
                f"{token_endpoint_url!r}"
            )
        if not isinstance(client_id, str) or not client_id:
            raise KafkaConfigError("the OAuth client id must be a non-empty str")
        if (client_secret is None) == (private_key_file is None):
            raise KafkaConfigError(
                "OAuth client credentials need exactly one of client_secret "
                "(sasl.oauthbearer.client.credentials.client.secret) and private_key_file "
                "(sasl.oauthbearer.assertion.private.key.file)"
            )
        if client_secret is not None and (not isinstance(client_secret, str) or not client_secret):
            # an empty clientSecret="" would be sent and refused at every fetch
            raise KafkaConfigError(
                "the OAuth client secret must be a non-empty str "
                "(sasl.oauthbearer.client.credentials.client.secret)"
            )
        for name, text in (
            ("scope", scope),
            ("audience", audience),
            ("assertion_audience", assertion_audience),
        ):
            # a list was sent as repeated form fields: OAuth wants one, space-separated
            if text is not None and not isinstance(text, str):
                raise KafkaConfigError(f"{name} must be a str, not {text!r}")
        if assertion_algorithm not in ASSERTION_ALGORITHMS:
            raise KafkaConfigError(
                f"assertion_algorithm must be one of {', '.join(ASSERTION_ALGORITHMS)}, "
                f"not {assertion_algorithm!r}"
            )
        for name, value in (
            ("connect_timeout_ms", connect_timeout_ms),
            ("read_timeout_ms", read_timeout_ms),
            ("retry_backoff_ms", retry_backoff_ms),
            ("retry_backoff_max_ms", retry_backoff_max_ms),
            ("assertion_lifetime_s", assertion_lifetime_s),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise KafkaConfigError(f"{name} must be a positive int, not {value!r}")
        self.token_endpoint_url = token_endpoint_url
        self.client_id = client_id
        self._secret = client_secret
        self.scope = scope
        self.audience = audience
        self._extensions = dict(extensions or {})
        if not isinstance(header_urlencode, bool):
            raise KafkaConfigError(
                f"header_urlencode must be True or False, not {header_urlencode!r}"
            )
        self._urlencode = header_urlencode
        self._algorithm = assertion_algorithm
        self._assertion_audience = assertion_audience or token_endpoint_url
        self._assertion_lifetime_s = assertion_lifetime_s
        self._key: Any = None
        if private_key_file is not None:
            self._key = _load_private_key(
                Path(private_key_file), private_key_passphrase, assertion_algorithm
            )
        self._verify: ssl.SSLContext | bool = _verify(ssl_context, ssl_cafile, ssl_verify)
        self._timeout = self._httpx.Timeout(
            read_timeout_ms / 1000, connect=connect_timeout_ms / 1000
        )
        self._exchange_s = (connect_timeout_ms + read_timeout_ms) / 1000
        self._retry_backoff_ms = retry_backoff_ms
        self._retry_backoff_max_ms = retry_backoff_max_ms
        self.refresh = RefreshConfig(
            refresh_window_factor, refresh_window_jitter, refresh_min_period_s, refresh_buffer_s
        )
        self._transport = transport
        self._clock = clock
        self._current: AccessToken | None = None
        self.refresh_at = 0.0
        """Wall-clock time after which ``token()`` fetches a new token."""
        self._inflight: asyncio.Task[AccessToken] | None = None
        self._waiters = 0
        self.fetches = 0
        #: the last attempt's failure while a fetch is still retrying (None once one
        #: succeeds): a deadline that ends the wait first can still say why
        self.last_failure: OAuthTokenError | None = None
        """How many tokens the endpoint has issued to this provider."""

    def __reduce__(self) -> tuple[Any, tuple[dict[str, Any]]]:
        if self._settings.get("ssl_context") is not None:
            raise TypeError("an OAuthClientCredentials with an ssl_context cannot be pickled")
        return (_rebuild, (self._settings,))

    def __repr__(self) -> str:
        how = "secret" if self._secret is not None else f"{self._algorithm} assertion"
        return f"OAuthClientCredentials({self.token_endpoint_url!r}, {self.client_id!r}, <{how}>)"

    @property
    def current(self) -> AccessToken | None:
        """The cached token (None before the first fetch)."""
        return self._current

    def extensions(self) -> dict[str, str]:
        """SASL extensions sent with the token (``sasl.oauthbearer.extensions``)."""
        return dict(self._extensions)

    def invalidate(self) -> None:
        """Forget the cached token: the next ``token()`` fetches a new one."""
        self._current = None
        self.refresh_at = 0.0

    def describe(self) -> str:
        """What the cached token says about itself, for an error the broker gave."""
        token = self._current
        claims = token.claims if token is not None else None
        if not claims:
            return f"the token from {self.token_endpoint_url} is opaque (not a JWT)"
        shown = ", ".join(
            f"{name}={claims[name]!r}" for name in ("iss", "sub", "aud", "scope") if name in claims
        )
        return (
            f"the token from {self.token_endpoint_url} has {shown}; the broker checks aud "
            "against sasl.oauthbearer.expected.audience, iss against "
            "sasl.oauthbearer.expected.issuer and the signature against "
            "sasl.oauthbearer.jwks.endpoint.url"
        )

    async def token(self) -> str:
        """The cached token, or a new one once its refresh time has passed."""
        current = self._current
        if current is not None and self._clock() < self.refresh_at:
            return current.value
        loop = asyncio.get_running_loop()
        task = self._inflight
        if task is None or task.done() or task.get_loop() is not loop:
            task = loop.create_task(self._fetch(), name="aiokproto-oauth-token")
            self._inflight = task
        self._waiters += 1
        try:
            return (await asyncio.shield(task)).value
        except OAuthTokenError as exc:
            # Java keeps the old credential while refreshing fails: so does this,
            # until it expires (the broker then asks again, sooner)
            now = self._clock()
            if current is not None and now < current.expiry and self._current is current:
                # and tries again later, not at every connection's next request
                pause = min(self._retry_backoff_max_ms / 1000, (current.expiry - now) / 2)
                self.refresh_at = max(self.refresh_at, now + pause)
                log.warning(
                    "keeping the current OAuth token (valid for %.0f s, next try in %.0f s): %s",
                    current.expiry - now,
                    pause,
                    exc,
                )
                return current.value
            raise
        finally:
            self._waiters -= 1
            if self._waiters == 0 and not task.done():
                task.cancel()  # nobody wants it any more (the client closed)
                if self._inflight is task:  # a caller coming next starts afresh
                    self._inflight = None  # (joining a cancelled fetch fails it)
            if self._inflight is task and task.done():
                self._inflight = None

    async def _fetch(self) -> AccessToken:
        httpx = self._httpx
        url = self.token_endpoint_url
        budget_s = self._retry_backoff_max_ms / 1000
        started = time.monotonic()
        attempt = 0
        async with httpx.AsyncClient(
            verify=self._verify, timeout=self._timeout, transport=self._transport
        ) as http:
            while True:
                attempt += 1
                asked_s = 0.0  # how long the endpoint asked us to wait (Retry-After)
                form, headers = self._request()
                try:
                    # httpx's read timeout is per read: an answer dripping a byte at a
                    # time would never end, so the whole exchange is bounded too
                    async with asyncio.timeout(self._exchange_s):
                        async with http.stream("POST", url, data=form, headers=headers) as response:
                            body = await _read_body(response, url)
                except (httpx.TimeoutException, TimeoutError) as exc:
                    failure = OAuthTokenError(
                        f"the token endpoint {url} did not answer in time "
                        f"({type(exc).__name__}; sasl.login.connect.timeout.ms / "
                        "sasl.login.read.timeout.ms)"
                    )
                except httpx.DecodingError as exc:  # not a TransportError; a retry sends the same
                    raise OAuthTokenError(
                        f"the token endpoint {url} answered with a body that cannot be "
                        f"decoded as its Content-Encoding header says: {exc}"
                    ) from exc
                except httpx.TransportError as exc:
                    tls = _tls_error(exc)
                    if tls is not None:  # a certificate will not change on retry
                        raise OAuthTokenError(
                            f"TLS with the token endpoint {url} failed: {tls}; to trust its "
                            "certificate set ssl_cafile to the CA that signed it"
                        ) from exc
                    failure = OAuthTokenError(
                        f"cannot reach the token endpoint {url}: {type(exc).__name__}: "
                        f"{exc or 'no detail'} (check sasl.oauthbearer.token.endpoint.url "
                        "and that the identity provider is up)"
                    )
                else:
                    if 200 <= response.status_code < 300:
                        token = parse_token_response(body, self._clock(), url)
                        self._store(token)
                        return token
                    failure = self._refusal(
                        response.status_code, body, response.headers.get("location")
                    )
                    if not _retryable(response.status_code):
                        raise failure
                    asked_s = _retry_after(response.headers.get("retry-after"), self._clock())
                self.last_failure = failure
                elapsed = time.monotonic() - started
                if elapsed >= budget_s or elapsed + asked_s > budget_s:
                    asked = f"; it asked to wait {asked_s:.0f} s" if asked_s else ""
                    raise OAuthTokenError(
                        f"{failure} (gave up after {attempt} attempts in {elapsed:.1f} s: "
                        f"sasl.login.retry.backoff.max.ms{asked})",
                        status=failure.status,
                    ) from failure
                # a rate-limited or busy endpoint's Retry-After is a floor, not hammered
                wait = min(
                    max(
                        backoff_s(attempt, self._retry_backoff_ms, self._retry_backoff_max_ms),
                        asked_s,
                    ),
                    budget_s - elapsed,
                )
                log.info(
                    "token endpoint attempt %d failed (%s); retrying in %.2f s",
                    attempt,
                    failure,
                    wait,
                )
                await asyncio.sleep(wait)

    def _store(self, token: AccessToken) -> None:
        now = self._clock()
        self._current = token
        self.last_failure = None
        self.refresh_at = refresh_at(
            token.issued_at, token.expiry, now, self.refresh, random.random()
        )
        self.fetches += 1
        log.debug(
            "OAuth token for %s valid for %.0f s, refresh in %.0f s",
            self.client_id,
            token.expiry - now,
            self.refresh_at - now,
        )

    def _request(self) -> tuple[dict[str, str], dict[str, str]]:
        form = {"grant_type": "client_credentials"}
        headers = {"Accept": "application/json", "Cache-Control": "no-cache"}
        if self.scope:
            form["scope"] = self.scope
        if self.audience:
            form["audience"] = self.audience
        if self._secret is not None:
            user, secret = self.client_id, self._secret
            if self._urlencode:  # RFC 6749 section 2.3.1; Java's is off by default
                user, secret = quote_plus(user, safe="*"), quote_plus(secret, safe="*")
            pair = f"{user}:{secret}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(pair).decode("ascii")
        else:
            form["client_id"] = self.client_id
            form["client_assertion_type"] = ASSERTION_TYPE
            form["client_assertion"] = self.assertion()
        return form, headers

    def assertion(self) -> str:
        """A fresh signed client assertion (RFC 7523 section 3: iss and sub the client
        id, aud the token endpoint, a unique jti, a short exp)."""
        if self._key is None:
            raise KafkaConfigError("this provider authenticates with a secret, not a key")
        now = int(self._clock())
        header = {"alg": self._algorithm, "typ": "JWT"}
        claims = {
            "iss": self.client_id,
            "sub": self.client_id,
            "aud": self._assertion_audience,
            "iat": now,
            "nbf": now,
            "exp": now + self._assertion_lifetime_s,
            "jti": str(uuid.uuid4()),
        }
        signing_input = (
            b64url(json.dumps(header, separators=(",", ":")).encode())
            + "."
            + b64url(json.dumps(claims, separators=(",", ":")).encode())
        )
        return signing_input + "." + b64url(_sign(self._key, self._algorithm, signing_input))

    def _refusal(self, status: int, body: bytes, location: str | None) -> OAuthTokenError:
        url, detail = self.token_endpoint_url, error_text(body)
        if status == 401 or "invalid_client" in detail:
            if self._secret is not None:
                fix = (
                    f"check the client id {self.client_id!r} and the client secret "
                    "(sasl.oauthbearer.client.credentials.client.id / .client.secret)"
                )
            else:  # the server holds the public key: a mismatch looks just the same
                fix = (
                    f"check the client id {self.client_id!r} and the client assertion key "
                    "(sasl.oauthbearer.assertion.private.key.file): the identity provider "
                    f"must hold its public key and accept {self._algorithm} assertions"
                )
        elif "invalid_scope" in detail:
            fix = f"check the scope {self.scope!r} (sasl.oauthbearer.scope)"
        elif "unauthorized_client" in detail:
            fix = (
                f"the identity provider does not allow client {self.client_id!r} the "
                "client_credentials grant"
            )
        elif status == 404:
            fix = "check sasl.oauthbearer.token.endpoint.url: no such path"
        elif 300 <= status < 400:  # a POST with credentials is not followed elsewhere
            fix = (
                f"it redirects to {location!r}: set sasl.oauthbearer.token.endpoint.url "
                "to the token endpoint itself"
            )
        else:
            fix = "the identity provider failed" if status >= 500 else "the request was refused"
        return OAuthTokenError(
            f"the token endpoint {url} answered HTTP {status} ({detail}): {fix}", status=status
        )


def _url_parts(httpx: Any, url: object) -> SplitResult | None:
    """The parts of a well-formed URL, else None: what httpx would refuse only at the
    first fetch (a bad port, spaces, control characters) is refused at construction."""
    if not isinstance(url, str) or url != url.strip() or not url.isprintable():
        return None
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises ValueError for a port out of range)
        httpx.URL(url)
    except (ValueError, httpx.InvalidURL):
        return None
    return parts


def _rebuild(settings: dict[str, Any]) -> OAuthClientCredentials:
    return OAuthClientCredentials(**settings)


def _tls_error(exc: BaseException) -> ssl.SSLError | None:
    """The TLS error behind an httpx transport error, if that is what it was."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


async def _read_body(response: httpx.Response, url: str) -> bytes:
    """The answer's body, refused past ``MAX_BODY`` (a token answer is a few KB: a
    wrong URL may serve a download, read into memory whole before)."""
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > MAX_BODY:
            raise OAuthTokenError(
                f"the token endpoint {url} answered HTTP {response.status_code} with more "
                f"than {MAX_BODY // 1024} KiB (is sasl.oauthbearer.token.endpoint.url the "
                "token endpoint?)",
                status=response.status_code,
            )
    return bytes(body)


def _retry_after(value: str | None, now: float) -> float:
    """Seconds a ``Retry-After`` header asks to wait (delay-seconds or an HTTP date),
    0 when absent or unreadable."""
    if value is None:
        return 0.0
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return 0.0
    return max(0.0, when.timestamp() - now) if when.tzinfo is not None else 0.0


def _retryable(status: int) -> bool:
    return status >= 500 or status in (408, 429)


def _verify(
    context: ssl.SSLContext | None, cafile: str | None, verify: bool
) -> ssl.SSLContext | bool:
    # checked here: httpx reads a str verify as a CA path, and would fail (or trust
    # the wrong thing) only at the first fetch
    if context is not None and not isinstance(context, ssl.SSLContext):
        raise KafkaConfigError(f"ssl_context must be an ssl.SSLContext, not {context!r}")
    if cafile is not None and not isinstance(cafile, str | Path):
        raise KafkaConfigError(f"ssl_cafile must be a path (str), not {cafile!r}")
    if not isinstance(verify, bool):
        raise KafkaConfigError(f"ssl_verify must be True or False, not {verify!r}")
    if context is not None:
        return context
    if cafile is None:
        return verify
    try:
        return ssl.create_default_context(cafile=cafile)
    except (OSError, ssl.SSLError) as exc:
        raise KafkaConfigError(f"cannot read the token endpoint CA file {cafile!r}: {exc}") from exc


def _load_private_key(path: Path, passphrase: str | None, algorithm: str) -> Any:
    try:
        from cryptography.hazmat.primitives.asymmetric import ec, rsa
        from cryptography.hazmat.primitives.serialization import load_pem_private_key
    except ImportError:
        raise KafkaConfigError(
            f"a private-key JWT assertion needs the cryptography package: {INSTALL_HINT}"
        ) from None
    try:
        key = load_pem_private_key(
            path.read_bytes(), passphrase.encode() if passphrase is not None else None
        )
    except (OSError, ValueError, TypeError) as exc:
        raise KafkaConfigError(
            f"cannot load the assertion private key {str(path)!r}: {exc}"
        ) from exc
    wanted = rsa.RSAPrivateKey if algorithm == "RS256" else ec.EllipticCurvePrivateKey
    if not isinstance(key, wanted):
        raise KafkaConfigError(
            f"{str(path)!r} holds a {type(key).__name__.lstrip('_')}, not a key for {algorithm}"
        )
    if isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name != "secp256r1":
        raise KafkaConfigError(f"ES256 needs a P-256 key, {str(path)!r} is {key.curve.name}")
    return key


def _sign(key: Any, algorithm: str, signing_input: str) -> bytes:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, padding
    from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

    data = signing_input.encode("ascii")
    if algorithm == "RS256":
        return bytes(key.sign(data, padding.PKCS1v15(), hashes.SHA256()))
    # JWS wants ES256 as the raw 32-byte r and s, not DER (RFC 7518 section 3.4)
    r, s = decode_dss_signature(key.sign(data, ec.ECDSA(hashes.SHA256())))
    return r.to_bytes(32, "big") + s.to_bytes(32, "big")
