"""``OAuthClientCredentials`` without a broker: the request it sends (Basic auth, a
signed client assertion), caching and refresh, retries, and the hostile cases (an
endpoint that hangs, answers garbage or errors, callers cancelled mid-fetch) against
httpx's mock transport or a bare 127.0.0.1 socket server."""

from __future__ import annotations

import asyncio
import base64
import email.utils
import json
import pickle
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest

httpx = pytest.importorskip("httpx")

from aiokproto.errors import KafkaConfigError  # noqa: E402
from aiokproto.net.security import SecurityConfig  # noqa: E402
from aiokproto.oauth import OAuthClientCredentials, OAuthTokenError  # noqa: E402
from aiokproto.oauth.token import b64url_decode, jwt_claims  # noqa: E402

URL = "http://127.0.0.1:9/oauth2/token"


def jwt(claims: dict[str, object]) -> str:
    def part(doc: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(doc).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'RS256'})}.{part(claims)}.c2ln"


class Endpoint:
    """A mock token endpoint: records requests, answers with ``reply(n)``."""

    def __init__(self, reply: Callable[[int], httpx.Response] | None = None) -> None:
        self.requests: list[httpx.Request] = []
        self.reply = reply or (lambda n: self.token(lifetime=3600))

    def token(self, lifetime: float = 3600, **extra: object) -> httpx.Response:
        now = int(time.time())
        claims = {"sub": "svc", "aud": "kafka", "iat": now, "exp": now + lifetime, **extra}
        return httpx.Response(200, json={"access_token": jwt(claims), "token_type": "Bearer"})

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.reply(len(self.requests))

    def transport(self) -> Any:
        return httpx.MockTransport(self.handle)

    def form(self, n: int = 0) -> dict[str, str]:
        return {k: v[0] for k, v in parse_qs(self.requests[n].content.decode()).items()}


def make(endpoint: Endpoint, secret: str | None = "s3cret", **kw: Any) -> OAuthClientCredentials:
    return OAuthClientCredentials(URL, "svc", secret, transport=endpoint.transport(), **kw)


async def test_the_request_is_a_client_credentials_grant_with_basic_auth() -> None:
    endpoint = Endpoint()
    tokens = make(endpoint, scope="kafka", audience="api://kafka")
    value = await tokens.token()
    assert jwt_claims(value) is not None
    request = endpoint.requests[0]
    assert request.method == "POST" and str(request.url) == URL
    assert request.headers["authorization"] == "Basic " + base64.b64encode(b"svc:s3cret").decode()
    assert request.headers["content-type"] == "application/x-www-form-urlencoded"
    assert endpoint.form() == {
        "grant_type": "client_credentials",
        "scope": "kafka",
        "audience": "api://kafka",
    }
    assert "s3cret" not in repr(tokens)


async def test_header_urlencode_encodes_the_basic_credentials() -> None:
    endpoint = Endpoint()
    tokens = OAuthClientCredentials(
        URL, "svc id", "a+b%c:d", header_urlencode=True, transport=endpoint.transport()
    )
    await tokens.token()
    sent = base64.b64decode(endpoint.requests[0].headers["authorization"].split()[1])
    assert sent == b"svc+id:a%2Bb%25c%3Ad"


async def test_the_token_is_cached_until_its_refresh_time() -> None:
    endpoint = Endpoint()
    now = [1000.0]
    tokens = make(endpoint, clock=lambda: now[0])
    endpoint.reply = lambda n: httpx.Response(
        200, json={"access_token": f"opaque-{n}", "expires_in": 3600}
    )
    assert await tokens.token() == "opaque-1"
    assert 1000 + 2880 <= tokens.refresh_at <= 1000 + 3060
    now[0] = tokens.refresh_at - 1
    assert await tokens.token() == "opaque-1"
    now[0] = tokens.refresh_at
    assert await tokens.token() == "opaque-2"
    assert tokens.fetches == 2
    tokens.invalidate()
    assert await tokens.token() == "opaque-3"


async def test_concurrent_callers_share_one_fetch() -> None:
    gate = asyncio.Event()
    endpoint = Endpoint()

    async def slow(request: httpx.Request) -> httpx.Response:
        endpoint.requests.append(request)
        await gate.wait()
        return endpoint.token()

    tokens = OAuthClientCredentials(URL, "svc", "s", transport=httpx.MockTransport(slow))
    callers = [asyncio.create_task(tokens.token()) for _ in range(20)]
    await asyncio.sleep(0.05)
    gate.set()
    values = await asyncio.gather(*callers)
    assert len(set(values)) == 1 and len(endpoint.requests) == 1


async def test_a_failed_refresh_keeps_the_valid_token() -> None:
    now = [0.0]
    endpoint = Endpoint()
    endpoint.reply = lambda n: (
        httpx.Response(200, json={"access_token": "first", "expires_in": 100})
        if n == 1
        else httpx.Response(401, json={"error": "invalid_client"})
    )
    tokens = make(endpoint, clock=lambda: now[0])
    assert await tokens.token() == "first"
    now[0] = 90.0  # past the refresh point, before expiry
    assert await tokens.token() == "first"
    assert len(endpoint.requests) == 2
    now[0] = 94.0  # the next try waits half the time left (at most the retry budget)
    assert await tokens.token() == "first"
    assert len(endpoint.requests) == 2
    now[0] = 101.0  # expired: the failure surfaces
    with pytest.raises(OAuthTokenError, match="HTTP 401"):
        await tokens.token()


@pytest.mark.parametrize(
    ("status", "body", "match"),
    [
        (401, {"error": "invalid_client"}, r"HTTP 401 \(invalid_client\): check the client id"),
        (400, {"error": "invalid_scope"}, "check the scope"),
        (400, {"error": "unauthorized_client"}, "does not allow client 'svc'"),
        (404, "not here", "no such path"),
        (302, "", r"HTTP 302.*redirects to 'https://idp/login'"),
        (200, {"error": "invalid_client", "error_description": "bad secret"}, "invalid_client"),
    ],
)
async def test_refusals_are_not_retried_and_name_the_fix(
    status: int, body: object, match: str
) -> None:
    endpoint = Endpoint(
        lambda n: httpx.Response(status, json=body, headers={"location": "https://idp/login"})
    )
    with pytest.raises(OAuthTokenError, match=match) as info:
        await make(endpoint, scope="kafka").token()
    assert info.value.status == status
    assert len(endpoint.requests) == 1


async def test_server_errors_are_retried_with_backoff_then_succeed() -> None:
    endpoint = Endpoint()
    endpoint.reply = lambda n: endpoint.token() if n == 3 else httpx.Response(503, text="busy")
    started = time.monotonic()
    await make(endpoint, retry_backoff_ms=50, retry_backoff_max_ms=2000).token()
    assert len(endpoint.requests) == 3
    assert 0.15 <= time.monotonic() - started < 1.5  # waited 50 + 100 ms


async def test_the_last_failure_is_kept_while_retrying_and_cleared_by_a_token() -> None:
    # a connect deadline shorter than the retries reads it to say why (BootstrapError)
    endpoint = Endpoint()
    endpoint.reply = lambda n: endpoint.token() if n == 3 else httpx.Response(503, text="busy")
    tokens = make(endpoint, retry_backoff_ms=200, retry_backoff_max_ms=2000)
    security = SecurityConfig(sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=tokens)
    fetch = asyncio.ensure_future(tokens.token())
    await asyncio.sleep(0.1)  # the first attempt failed; the second is 200 ms away
    assert len(endpoint.requests) == 1 and not fetch.done()
    assert "HTTP 503" in str(security.login_trouble())
    assert SecurityConfig().login_trouble() is None  # PLAIN: no token provider
    await fetch
    assert tokens.last_failure is None and security.login_trouble() is None


async def test_retries_stop_at_the_backoff_maximum() -> None:
    endpoint = Endpoint(lambda n: httpx.Response(500, text="down"))
    started = time.monotonic()
    with pytest.raises(OAuthTokenError, match=r"HTTP 500.*gave up after \d+ attempts"):
        await make(endpoint, retry_backoff_ms=20, retry_backoff_max_ms=300).token()
    assert time.monotonic() - started < 1.0
    assert len(endpoint.requests) >= 3


async def test_a_retry_after_is_waited_for_or_ends_the_retries_when_too_long() -> None:
    endpoint = Endpoint()
    endpoint.reply = lambda n: (
        endpoint.token() if n == 2 else httpx.Response(429, headers={"retry-after": "1"})
    )
    started = time.monotonic()
    await make(endpoint, retry_backoff_ms=10, retry_backoff_max_ms=3000).token()
    assert len(endpoint.requests) == 2
    assert time.monotonic() - started >= 0.95  # not 10 ms later
    date = email.utils.formatdate(time.time() + 60, usegmt=True)
    endpoint = Endpoint(lambda n: httpx.Response(503, headers={"retry-after": date}))
    started = time.monotonic()
    with pytest.raises(OAuthTokenError, match=r"HTTP 503.*asked to wait (59|60) s"):
        await make(endpoint, retry_backoff_ms=10, retry_backoff_max_ms=3000).token()
    assert len(endpoint.requests) == 1 and time.monotonic() - started < 1


async def test_an_endless_answer_is_refused_past_the_body_limit() -> None:
    async def endless() -> AsyncIterator[bytes]:
        while True:
            yield b"x" * 65536

    endpoint = Endpoint(lambda n: httpx.Response(200, content=endless()))
    with pytest.raises(OAuthTokenError, match="more than 1024 KiB") as info:
        await asyncio.wait_for(make(endpoint).token(), 5)
    assert info.value.status == 200 and len(endpoint.requests) == 1


async def test_missing_or_zero_expires_in_is_refused() -> None:
    for doc in ({"access_token": "opaque"}, {"access_token": "opaque", "expires_in": 0}):
        endpoint = Endpoint(lambda n, doc=doc: httpx.Response(200, json=doc))  # type: ignore[misc]
        with pytest.raises(OAuthTokenError, match="no expiry"):
            await make(endpoint).token()


async def test_an_html_page_is_refused_as_not_json() -> None:
    endpoint = Endpoint(lambda n: httpx.Response(200, text="<html>sign in</html>"))
    with pytest.raises(OAuthTokenError, match="not JSON"):
        await make(endpoint).token()


async def test_https_needs_the_ca_and_an_untrusted_certificate_is_not_retried(
    tmp_path: Path,
) -> None:
    import ssl

    from aiokproto.testing.certs import generate_tls_files

    tls = generate_tls_files(tmp_path, hostname="127.0.0.1")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tls.server_cert, tls.server_key)
    handshakes = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal handshakes
        handshakes += 1
        try:
            await reader.readuntil(b"\r\n\r\n")
            body = json.dumps({"access_token": "tok", "expires_in": 60}).encode()
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=context)
    url = f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}/token"
    async with server:
        with pytest.raises(OAuthTokenError, match=r"CERTIFICATE_VERIFY_FAILED.*set ssl_cafile"):
            await OAuthClientCredentials(url, "svc", "s").token()
        assert handshakes <= 1  # not retried
        tokens = OAuthClientCredentials(url, "svc", "s", ssl_cafile=str(tls.ca_file))
        assert await tokens.token() == "tok"


# -- against a real socket: hangs, garbage and cancellation ------------------------------


@pytest.fixture
async def server() -> AsyncIterator[Any]:
    """A 127.0.0.1 server whose behaviour a test sets: ``hang``, ``garbage`` or a
    valid answer; it counts connections and open ones."""

    class Server:
        mode = "hang"
        connections = 0
        open = 0
        url = ""
        asked = asyncio.Event()

    state = Server()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        state.connections += 1
        state.open += 1
        state.asked.set()
        try:
            await reader.readuntil(b"\r\n\r\n")
            if state.mode == "garbage":
                writer.write(b"\x00\xffnot http at all\r\n\r\n")
                await writer.drain()
                return
            if state.mode == "drip":  # headers, then a byte now and then, never done
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
                while True:
                    writer.write(b" ")
                    await writer.drain()
                    await asyncio.sleep(0.05)
            if state.mode == "ok":
                body = json.dumps({"access_token": "tok", "expires_in": 60}).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    + f"Content-Length: {len(body)}\r\n\r\n".encode()
                    + body
                )
                await writer.drain()
                return
            await reader.read()  # hang: answer nothing until the client goes away
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            state.open -= 1
            writer.close()

    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    state.url = f"http://127.0.0.1:{srv.sockets[0].getsockname()[1]}/token"
    async with srv:
        yield state
        srv.close()


async def test_an_endpoint_that_hangs_times_out(server: Any) -> None:
    tokens = OAuthClientCredentials(
        server.url, "svc", "s", read_timeout_ms=300, retry_backoff_max_ms=100
    )
    started = time.monotonic()
    with pytest.raises(OAuthTokenError, match="did not answer in time"):
        await tokens.token()
    assert time.monotonic() - started < 2


async def test_an_endpoint_dripping_its_answer_times_out_as_a_whole(server: Any) -> None:
    # httpx's read timeout is per read: a byte every 50 ms never trips a 300 ms one
    server.mode = "drip"
    tokens = OAuthClientCredentials(
        server.url,
        "svc",
        "s",
        connect_timeout_ms=200,
        read_timeout_ms=300,
        retry_backoff_max_ms=100,
    )
    started = time.monotonic()
    with pytest.raises(OAuthTokenError, match="did not answer in time"):
        await asyncio.wait_for(tokens.token(), 10)
    assert time.monotonic() - started < 2


async def test_an_endpoint_speaking_garbage_is_an_error(server: Any) -> None:
    server.mode = "garbage"
    tokens = OAuthClientCredentials(server.url, "svc", "s", retry_backoff_max_ms=100)
    with pytest.raises(OAuthTokenError, match="cannot reach the token endpoint"):
        await tokens.token()


async def test_cancelling_the_only_caller_cancels_the_fetch(server: Any) -> None:
    tokens = OAuthClientCredentials(server.url, "svc", "s")
    caller = asyncio.create_task(tokens.token())
    await asyncio.wait_for(server.asked.wait(), 5)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    for _ in range(100):  # the fetch was cancelled: its connection closes
        if server.open == 0:
            break
        await asyncio.sleep(0.01)
    assert server.open == 0
    assert not [t for t in asyncio.all_tasks() if t.get_name() == "aiokproto-oauth-token"]
    server.mode = "ok"  # and the provider still works
    assert await tokens.token() == "tok"


async def test_one_cancelled_caller_leaves_the_fetch_to_the_others(server: Any) -> None:
    tokens = OAuthClientCredentials(server.url, "svc", "s", read_timeout_ms=500)
    first = asyncio.create_task(tokens.token())
    second = asyncio.create_task(tokens.token())
    await asyncio.wait_for(server.asked.wait(), 5)
    first.cancel()
    await asyncio.sleep(0.05)
    assert server.connections == 1 and server.open == 1  # still fetching for `second`
    server.mode = "ok"
    # its attempt runs into the read timeout; the retry gets the token
    assert await second == "tok"
    assert server.connections == 2


# -- private-key JWT assertion -----------------------------------------------------------


@pytest.mark.parametrize("algorithm", ["RS256", "ES256"])
async def test_a_private_key_jwt_assertion_is_signed_and_verifies(
    tmp_path: Path, algorithm: str
) -> None:
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
    from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

    key: Any = (
        rsa.generate_private_key(65537, 2048)
        if algorithm == "RS256"
        else ec.generate_private_key(ec.SECP256R1())
    )
    pem = tmp_path / "key.pem"
    pem.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"pw"),
        )
    )
    endpoint = Endpoint()
    tokens = make(
        endpoint,
        secret=None,
        private_key_file=pem,
        private_key_passphrase="pw",
        assertion_algorithm=algorithm,
    )
    await tokens.token()
    form = endpoint.form()
    assert "authorization" not in endpoint.requests[0].headers
    assert form["client_id"] == "svc"
    assert form["client_assertion_type"] == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    head, body, sig = form["client_assertion"].split(".")
    assert json.loads(b64url_decode(head)) == {"alg": algorithm, "typ": "JWT"}
    claims = json.loads(b64url_decode(body))
    assert claims["iss"] == claims["sub"] == "svc" and claims["aud"] == URL
    assert claims["exp"] - claims["iat"] == 300 and claims["jti"]
    signed, signature = f"{head}.{body}".encode(), b64url_decode(sig)
    public = key.public_key()
    if algorithm == "RS256":
        public.verify(signature, signed, padding.PKCS1v15(), hashes.SHA256())
    else:
        der = encode_dss_signature(
            int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big")
        )
        public.verify(der, signed, ec.ECDSA(hashes.SHA256()))
    await asyncio.sleep(0)
    tokens.invalidate()
    await tokens.token()
    assert endpoint.form(1)["client_assertion"] != form["client_assertion"]  # fresh jti


async def test_a_refused_assertion_names_the_key_setting_not_the_secret(tmp_path: Path) -> None:
    from aiokproto.testing.oidc import assertion_key

    pem, _ = assertion_key(tmp_path, "svc", "ES256")
    endpoint = Endpoint(lambda n: httpx.Response(401, json={"error": "invalid_client"}))
    tokens = make(endpoint, secret=None, private_key_file=pem, assertion_algorithm="ES256")
    with pytest.raises(OAuthTokenError) as info:
        await tokens.token()
    text = str(info.value)
    assert "client assertion key (sasl.oauthbearer.assertion.private.key.file)" in text
    assert "accept ES256 assertions" in text and "client.secret" not in text
    assert len(endpoint.requests) == 1


def test_a_key_of_the_wrong_kind_or_unreadable_is_a_config_error(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    pem = tmp_path / "ec.pem"
    pem.write_bytes(
        ec.generate_private_key(ec.SECP256R1()).private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    with pytest.raises(KafkaConfigError, match="not a key for RS256"):
        OAuthClientCredentials(URL, "svc", private_key_file=pem)
    with pytest.raises(KafkaConfigError, match="cannot load the assertion private key"):
        OAuthClientCredentials(URL, "svc", private_key_file=tmp_path / "missing.pem")


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        (("ftp://x/token", "svc", "s"), {}, "must be an http"),
        (("not a url", "svc", "s"), {}, "must be an http"),
        (("http://127.0.0.1:99999/t", "svc", "s"), {}, "must be an http"),
        (("http://127.0.0.1:x/t", "svc", "s"), {}, "must be an http"),
        (("http://[::1/t", "svc", "s"), {}, "must be an http"),
        ((URL + "\n", "svc", "s"), {}, "must be an http"),
        ((" " + URL, "svc", "s"), {}, "must be an http"),
        (("https://svc:pw@idp/t", "svc", "s"), {}, r"must not hold credentials \(user:pass"),
        ((URL, "", "s"), {}, "client id"),
        ((URL, "svc"), {}, "exactly one of client_secret"),
        ((URL, "svc", ""), {}, "client secret must be a non-empty str"),
        ((URL, "svc", b"s"), {}, "client secret must be a non-empty str"),
        ((URL, "svc", "s"), {"private_key_file": "k.pem"}, "exactly one of"),
        ((URL, "svc", "s"), {"assertion_algorithm": "HS256"}, "RS256, ES256"),
        ((URL, "svc", "s"), {"scope": ["kafka", "read"]}, "scope must be a str"),
        ((URL, "svc", "s"), {"audience": 5}, "audience must be a str"),
        ((URL, "svc", "s"), {"read_timeout_ms": 0}, "read_timeout_ms"),
        ((URL, "svc", "s"), {"retry_backoff_max_ms": True}, "retry_backoff_max_ms"),
        ((URL, "svc", "s"), {"refresh_window_factor": 2.0}, "window.factor"),
        ((URL, "svc", "s"), {"ssl_cafile": "/nonexistent/ca.pem"}, "CA file"),
        ((URL, "svc", "s"), {"ssl_cafile": 5}, "ssl_cafile must be a path"),
        ((URL, "svc", "s"), {"ssl_verify": "false"}, "ssl_verify must be True or False"),
        ((URL, "svc", "s"), {"ssl_context": "ctx"}, "ssl_context must be an ssl.SSLContext"),
    ],
)
def test_bad_settings_fail_at_construction(
    args: tuple[Any, ...], kwargs: dict[str, Any], match: str
) -> None:
    with pytest.raises(KafkaConfigError, match=match):
        OAuthClientCredentials(*args, **kwargs)


def test_without_httpx_construction_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "httpx", None)
    with pytest.raises(KafkaConfigError, match=r"pip install 'aiokproto\[oauth\]'"):
        OAuthClientCredentials(URL, "svc", "s")


def test_it_pickles_as_its_settings_for_spark_executors() -> None:
    tokens = OAuthClientCredentials(URL, "svc", "s", scope="kafka", refresh_buffer_s=10)
    copy = pickle.loads(pickle.dumps(tokens))
    assert (copy.token_endpoint_url, copy.client_id, copy.scope) == (URL, "svc", "kafka")
    assert copy.refresh.buffer_s == 10 and copy.current is None


async def test_security_config_takes_it_and_the_broker_refusal_names_the_audience() -> None:
    endpoint = Endpoint(lambda n: endpoint.token(aud="other", iss="https://idp"))
    tokens = make(endpoint, extensions={"logicalCluster": "lkc-1"})
    security = SecurityConfig(
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=tokens,
    )
    mechanism = await security.new_mechanism()
    assert b"logicalCluster=lkc-1\x01" in mechanism.first_message()
    hint = getattr(mechanism, "hint", "")
    assert "aud='other'" in hint and "iss='https://idp'" in hint
    assert "sasl.oauthbearer.expected.audience" in hint


async def test_a_caller_arriving_as_the_last_one_is_cancelled_gets_a_fresh_fetch() -> None:
    # the last caller's cancellation cancels the fetch; a caller coming in before that
    # fetch has wound down must start its own, not join the dying one (it got
    # CancelledError, as if it had been cancelled itself)
    calls = [0]

    async def answer(request: httpx.Request) -> httpx.Response:
        calls[0] += 1
        if calls[0] == 1:
            await asyncio.Event().wait()  # the first fetch hangs until cancelled
        return httpx.Response(200, json={"access_token": f"t{calls[0]}", "expires_in": 60})

    tokens = OAuthClientCredentials(URL, "svc", "s", transport=httpx.MockTransport(answer))
    first = asyncio.create_task(tokens.token())
    await asyncio.sleep(0.01)
    first.cancel()
    second = asyncio.create_task(tokens.token())
    with pytest.raises(asyncio.CancelledError):
        await first
    assert await asyncio.wait_for(second, 2) == "t2"
    assert tokens.fetches == 1


async def test_an_undecodable_body_is_a_token_error_and_keeps_the_valid_token() -> None:
    now = [0.0]
    endpoint = Endpoint()
    endpoint.reply = lambda n: (
        httpx.Response(200, json={"access_token": "first", "expires_in": 100})
        if n == 1
        else httpx.Response(200, headers={"content-encoding": "gzip"}, content=b"not gzip")
    )
    tokens = make(endpoint, clock=lambda: now[0])
    assert await tokens.token() == "first"
    now[0] = 90.0  # past the refresh point: the refresh fails, the valid token stays
    assert await tokens.token() == "first"
    tokens.invalidate()
    with pytest.raises(OAuthTokenError, match=r"cannot be decoded as its Content-Encoding"):
        await tokens.token()
    assert len(endpoint.requests) == 3  # not retried: the same body would come back
