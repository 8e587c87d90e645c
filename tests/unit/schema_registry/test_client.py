"""SchemaRegistryClient without a server (httpx.MockTransport): fail-over, retries and
back-off on 429/5xx, the typed errors, auth headers, and single-flight caches."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from typing import Any

import pytest

httpx = pytest.importorskip("httpx")

from aiokproto.errors import KafkaConfigError  # noqa: E402
from aiokproto.schema_registry import (  # noqa: E402
    IncompatibleSchemaError,
    InvalidSchemaError,
    RegistryUnreachableError,
    Schema,
    SchemaRegistryClient,
    SchemaRegistryError,
    UnknownSchemaError,
)

FAST = {"retries.wait.ms": 1, "retries.max.wait.ms": 2}


def client(handler: Callable[[Any], Any], url: str = "http://a:1", **conf: Any) -> Any:
    return SchemaRegistryClient(
        {"url": url, **FAST, **conf}, transport=httpx.MockTransport(handler)
    )


def answer(status: int, body: Any) -> Any:
    return httpx.Response(status, content=json.dumps(body).encode())


async def test_fails_over_to_the_next_url_and_prefers_it_afterwards() -> None:
    hosts: list[str] = []

    def handler(request: Any) -> Any:
        hosts.append(request.url.host)
        if request.url.host == "down":
            raise httpx.ConnectError("refused")
        return answer(200, ["s"])

    async with client(handler, url="http://down:1,http://up:2") as sr:
        assert await sr.get_subjects() == ["s"]
        assert await sr.get_subjects() == ["s"]
    assert hosts == ["down", "up", "up"]


async def test_retries_429_and_5xx_then_succeeds() -> None:
    statuses = iter([429, 503, 200])

    def handler(request: Any) -> Any:
        status = next(statuses)
        return answer(status, ["s"] if status == 200 else {"error_code": status})

    async with client(handler, **{"max.retries": 2}) as sr:
        assert await sr.get_subjects() == ["s"]


async def test_unreachable_names_every_url_after_the_retries() -> None:
    calls = 0

    def handler(request: Any) -> Any:
        nonlocal calls
        calls += 1
        raise httpx.ConnectError("refused")

    async with client(handler, url="http://a:1,http://b:2", **{"max.retries": 2}) as sr:
        with pytest.raises(RegistryUnreachableError) as info:
            await sr.get_subjects()
    assert info.value.urls == ("http://a:1", "http://b:2")
    assert "http://a:1" in str(info.value) and "http://b:2" in str(info.value)
    assert calls == 6  # 3 rounds over 2 URLs


@pytest.mark.parametrize(
    ("status", "code", "error"),
    [
        (404, 40403, UnknownSchemaError),
        (404, 40401, UnknownSchemaError),
        (404, None, SchemaRegistryError),  # a path the server does not serve
        (409, 409, IncompatibleSchemaError),
        (422, 42201, InvalidSchemaError),
        (401, 40101, SchemaRegistryError),
    ],
)
async def test_errors_are_typed(status: int, code: int | None, error: type[Exception]) -> None:
    body = {"message": "nope"} if code is None else {"error_code": code, "message": "nope"}
    async with client(lambda r: answer(status, body)) as sr:
        with pytest.raises(error) as info:
            await sr.get_schema(7)
    assert type(info.value) is error
    assert info.value.status == status and info.value.error_code == code  # type: ignore[attr-defined]
    assert "/schemas/ids/7" in str(info.value)


async def test_concurrent_misses_make_one_request_each() -> None:
    seen: list[str] = []

    async def handler(request: Any) -> Any:
        seen.append(f"{request.method} {request.url.path}")
        await asyncio.sleep(0.01)
        if request.method == "POST":
            return answer(200, {"id": 3})
        return answer(200, {"schema": '"string"'})

    async with client(handler) as sr:
        schema = Schema('"string"')
        ids = await asyncio.gather(*[sr.register_schema("t-value", schema) for _ in range(500)])
        got = await asyncio.gather(*[sr.get_schema(9) for _ in range(500)])
        assert set(ids) == {3} and set(got) == {schema}
        # cached: no more requests
        assert await sr.register_schema("t-value", schema) == 3
        assert await sr.get_schema(3) == schema  # learnt from the registration
    assert seen == ["POST /subjects/t-value/versions", "GET /schemas/ids/9"]


async def test_a_failed_miss_fails_its_waiters_and_the_next_call_asks_again() -> None:
    calls = 0

    async def handler(request: Any) -> Any:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.01)  # the other tasks wait for this one
        return answer(404, {"error_code": 40403}) if calls == 1 else answer(200, {"schema": "{}"})

    async with client(handler) as sr:
        results = await asyncio.gather(
            *[sr.get_schema(1) for _ in range(10)], return_exceptions=True
        )
        assert all(isinstance(r, UnknownSchemaError) for r in results)
        assert (await sr.get_schema(1)).schema_str == "{}"
    assert calls == 2


async def test_a_cancelled_waiter_does_not_cancel_the_others() -> None:
    release = asyncio.Event()

    async def handler(request: Any) -> Any:
        await release.wait()
        return answer(200, {"schema": "{}"})

    async with client(handler) as sr:
        first = asyncio.create_task(sr.get_schema(1))
        second = asyncio.create_task(sr.get_schema(1))
        await asyncio.sleep(0.01)
        second.cancel()
        release.set()
        assert (await first).schema_str == "{}"
        with pytest.raises(asyncio.CancelledError):
            await second


async def test_a_cancelled_first_caller_does_not_cancel_the_others() -> None:
    release = asyncio.Event()
    calls = 0

    async def handler(request: Any) -> Any:
        nonlocal calls
        calls += 1
        await release.wait()
        return answer(200, {"schema": "{}"})

    async with client(handler) as sr:
        first = asyncio.create_task(sr.get_schema(1))
        await asyncio.sleep(0.01)
        second = asyncio.create_task(sr.get_schema(1))
        await asyncio.sleep(0.01)
        first.cancel()
        await asyncio.sleep(0.01)
        release.set()
        assert (await second).schema_str == "{}"
        assert first.cancelled()
        assert (await sr.get_schema(1)).schema_str == "{}"  # cached by the request
    assert calls == 1


async def test_latest_version_is_cached_for_its_ttl() -> None:
    calls = 0

    def handler(request: Any) -> Any:
        nonlocal calls
        calls += 1
        return answer(200, {"id": calls, "version": calls, "schema": "{}", "subject": "s"})

    async with client(handler, **{"cache.latest.ttl.sec": 0}) as sr:
        assert (await sr.get_latest_version("s")).version == 1
        assert (await sr.get_latest_version("s")).version == 2  # ttl 0: asked again
    calls = 0
    async with client(handler) as sr:  # default: cached until the subject is deleted
        assert (await sr.get_latest_version("s")).version == 1
        assert (await sr.get_latest_version("s")).version == 1


async def test_basic_auth_bearer_and_url_user_info() -> None:
    seen: list[str | None] = []

    def handler(request: Any) -> Any:
        seen.append(request.headers.get("authorization"))
        return answer(200, [])

    async with client(handler, **{"basic.auth.user.info": "u:p"}) as sr:
        await sr.get_subjects()
    async with client(handler, url="http://me:pw@a:1") as sr:
        await sr.get_subjects()
    async with client(handler, **{"bearer.auth.token": "tok"}) as sr:
        await sr.get_subjects()
    assert seen == ["Basic dTpw", "Basic bWU6cHc=", "Bearer tok"]


async def test_references_and_schema_type_go_on_the_wire() -> None:
    bodies: list[Any] = []

    def handler(request: Any) -> Any:
        bodies.append(json.loads(request.content))
        return answer(200, {"id": 1})

    from aiokproto.schema_registry import SchemaReference

    ref = SchemaReference("shop.Item", "item-value", 2)
    async with client(handler) as sr:
        await sr.register_schema("s", Schema("{}", "JSON", (ref,)), normalize_schemas=True)
    assert bodies == [
        {
            "schema": "{}",
            "schemaType": "JSON",
            "references": [{"name": "shop.Item", "subject": "item-value", "version": 2}],
        }
    ]


GARBAGE = {
    "html": lambda: httpx.Response(200, content=b"<html>login</html>"),
    "empty": lambda: httpx.Response(200),
    "no fields": lambda: httpx.Response(200, json={"foo": 1}),
    "a list": lambda: httpx.Response(200, json=["x", None]),
    "a string id": lambda: httpx.Response(200, json={"id": "abc", "schema": 5}),
}
AVRO = Schema('"string"')
CALLS = {
    "get_schema": lambda sr: sr.get_schema(1),
    "register_schema": lambda sr: sr.register_schema("s", AVRO),
    "lookup_schema": lambda sr: sr.lookup_schema("s", AVRO),
    "get_latest_version": lambda sr: sr.get_latest_version("s"),
    "get_versions": lambda sr: sr.get_versions("s"),
    "get_subjects": lambda sr: sr.get_subjects(),
    "delete_version": lambda sr: sr.delete_version("s", 1),
    "test_compatibility": lambda sr: sr.test_compatibility("s", AVRO),
    "get_compatibility": lambda sr: sr.get_compatibility(),
    "get_mode": lambda sr: sr.get_mode(),
}


@pytest.mark.parametrize("answer", list(GARBAGE))
@pytest.mark.parametrize("call", list(CALLS))
async def test_a_2xx_answer_of_the_wrong_shape_is_typed(answer: str, call: str) -> None:
    # a proxy's HTML page or a 200 without the fields raised AttributeError/KeyError/
    # TypeError from deep inside before (or returned "None" for a level)
    async with client(lambda request: GARBAGE[answer]()) as sr:
        with pytest.raises(SchemaRegistryError, match=r"not JSON|not the API's"):
            await CALLS[call](sr)


async def test_calls_on_a_closed_client_and_in_flight_at_close_are_typed() -> None:
    # a server that accepts and never answers: close() fails the waiting calls at
    # once with "closed" (not a ReadError retried into a bare RuntimeError)
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    sr = SchemaRegistryClient({"url": f"http://127.0.0.1:{port}", "timeout": 20, **FAST})
    waiting = [asyncio.ensure_future(sr.get_schema(1)), asyncio.ensure_future(sr.get_subjects())]
    await asyncio.sleep(0.3)  # both sent, waiting for an answer
    await sr.close()
    async with asyncio.timeout(5):
        failed = await asyncio.gather(*waiting, return_exceptions=True)
    for exc in failed:
        assert isinstance(exc, SchemaRegistryError) and "closed" in str(exc), exc
    with pytest.raises(SchemaRegistryError, match="closed"):
        await sr.get_subjects()
    server.close()
    await server.wait_closed()


@pytest.mark.parametrize(
    "conf",
    [
        {},
        {"url": "ftp://x"},
        {"url": "http://a:1", "bogus": 1},
        {"url": "http://a:1", "basic.auth.user.info": "nocolon"},
        {"url": "http://a:1", "basic.auth.user.info": "u:p", "bearer.auth.token": "t"},
        {"url": "http://a:1", "max.retries": -1},
        # accepted and ignored before: the requests went out without credentials
        {"url": "http://a:1", "basic.auth.credentials.source": "SASL_INHERIT"},
        {"url": "http://a:1", "bearer.auth.credentials.source": "OAUTHBEARER"},
    ],
)
def test_bad_config_is_refused(conf: dict[str, Any]) -> None:
    with pytest.raises(KafkaConfigError):
        SchemaRegistryClient(conf)


async def test_tls_with_a_client_certificate(tmp_path: Any) -> None:
    """A local HTTPS server that requires a client certificate: the client's TLS
    options verify it and present one; without the CA it cannot connect (typed)."""
    import ssl

    pytest.importorskip("cryptography")
    from aiokproto.testing.certs import generate_tls_files

    tls = generate_tls_files(tmp_path)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(tls.ca_file))
    server_ctx.load_cert_chain(str(tls.server_keystore))
    server_ctx.verify_mode = ssl.CERT_REQUIRED

    async def answer_subjects(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            body = b'["tls-ok"]'
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body)
            )
            await writer.drain()
        except (ssl.SSLError, ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(answer_subjects, "127.0.0.1", 0, ssl=server_ctx)
    port = server.sockets[0].getsockname()[1]
    url = f"https://localhost:{port}"
    try:
        conf = {
            "url": url,
            **FAST,
            "ssl.ca.location": str(tls.ca_file),
            "ssl.certificate.location": str(tls.client_cert),
            "ssl.key.location": str(tls.client_key),
        }
        async with SchemaRegistryClient(conf) as sr:
            assert await sr.get_subjects() == ["tls-ok"]
        # the system trust store does not know the test CA
        async with SchemaRegistryClient({"url": url, **FAST, "max.retries": 0}) as sr:
            with pytest.raises(RegistryUnreachableError, match=r"CERTIFICATE_VERIFY_FAILED|SSL"):
                await sr.get_subjects()
    finally:
        server.close()
        await server.wait_closed()


@pytest.mark.parametrize(
    "url", ["htp://user:s3cret@h:1", "http://user:s3cret@h:99999", "http://user:s3cret@h:x"]
)
def test_a_bad_url_error_does_not_show_its_password(url: str) -> None:
    # the message quoted the URL as given, password and all (and a bad port raised a
    # bare ValueError)
    with pytest.raises(KafkaConfigError) as info:
        SchemaRegistryClient({"url": url})
    assert "s3cret" not in str(info.value) and "user" not in str(info.value)


async def test_user_info_in_an_ipv6_url() -> None:
    # the brackets went with the user info: http://::1:8081 before
    seen: list[Any] = []

    def handler(request: Any) -> Any:
        seen.append(request)
        return answer(200, ["s"])

    async with client(handler, url="http://u:p@[::1]:8081/base") as sr:
        assert sr.urls == ["http://[::1]:8081/base"]
        await sr.get_subjects()
    assert str(seen[0].url) == "http://[::1]:8081/base/subjects"
    assert seen[0].headers["Authorization"].startswith("Basic ")


async def test_a_registry_dripping_its_answer_fails_within_the_timeout() -> None:
    # httpx's timeout is per read: a body sent a byte at a time held the call forever
    async def drip(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n[")
        with contextlib.suppress(ConnectionError):
            for _ in range(100):
                await asyncio.sleep(0.1)
                writer.write(b" ")
                await writer.drain()
        writer.close()

    server = await asyncio.start_server(drip, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    conf = {"url": f"http://127.0.0.1:{port}", "timeout": 0.5, "max.retries": 1, **FAST}
    async with SchemaRegistryClient(conf) as sr:
        loop = asyncio.get_running_loop()
        start = loop.time()
        with pytest.raises(RegistryUnreachableError, match=r"no complete answer within 0\.5 s"):
            async with asyncio.timeout(5):
                await sr.get_subjects()
        assert loop.time() - start < 2  # two attempts of 0.5 s
    server.close()
    await server.wait_closed()


async def test_a_runaway_answer_is_not_read_into_memory() -> None:
    sent = 0

    async def endless() -> Any:  # 64 MiB here (an endless one took all memory before)
        nonlocal sent
        for _ in range(64):
            sent += 1 << 20
            yield b" " * (1 << 20)

    async with client(lambda request: httpx.Response(200, content=endless())) as sr:
        with pytest.raises(SchemaRegistryError, match="larger than"):
            async with asyncio.timeout(10):
                await sr.get_subjects()
    assert sent <= 17 << 20


async def test_close_releases_calls_whose_request_is_not_answered_yet() -> None:
    # a request still in the transport (connecting, or a pooled connection awaited) is
    # not interrupted by httpx's aclose(): its callers waited for the whole timeout
    async def never(request: Any) -> Any:
        await asyncio.sleep(60)

    sr = client(never, timeout=30)
    waiting = [asyncio.ensure_future(sr.get_schema(1)), asyncio.ensure_future(sr.get_subjects())]
    await asyncio.sleep(0.1)
    await sr.close()
    async with asyncio.timeout(5):
        failed = await asyncio.gather(*waiting, return_exceptions=True)
    for exc in failed:
        assert isinstance(exc, SchemaRegistryError) and "closed" in str(exc), exc


async def test_a_cancelled_caller_is_cancelled_not_closed() -> None:
    async def never(request: Any) -> Any:
        await asyncio.sleep(60)

    async with client(never, timeout=30) as sr:
        call = asyncio.ensure_future(sr.get_subjects())
        await asyncio.sleep(0.1)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call


@pytest.mark.parametrize("there", [True, False])
async def test_a_409_on_register_is_looked_up_before_it_is_raised(there: bool) -> None:
    seen: list[str] = []

    def handler(request: Any) -> Any:
        seen.append(f"{request.method} {request.url.path}")
        if request.url.path.endswith("/versions"):  # another writer created it first
            return answer(409, {"error_code": 409, "message": "already exists"})
        if there:
            return answer(200, {"id": 4, "version": 1, "subject": "t-value", "schema": '"string"'})
        return answer(404, {"error_code": 40403, "message": "Schema not found"})

    async with client(handler) as sr:
        if there:
            assert await sr.register_schema("t-value", Schema('"string"')) == 4
            assert await sr.register_schema("t-value", Schema('"string"')) == 4  # cached
        else:
            with pytest.raises(IncompatibleSchemaError, match="already exists"):
                await sr.register_schema("t-value", Schema('"string"'))
    assert seen == ["POST /subjects/t-value/versions", "POST /subjects/t-value"]
