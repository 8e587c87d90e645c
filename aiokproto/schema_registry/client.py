"""``SchemaRegistryClient``: the Confluent schema registry REST API on httpx, async.

Caches (id -> schema, (subject, schema) -> id, subject -> latest with a TTL) are shared
by every task on the client, and a miss makes one request however many tasks wait for
it (single-flight: the first task's request is a future the others await). Several
URLs fail over in turn; 429 and 5xx answers and connection failures are retried with
exponential back-off, then raise ``RegistryUnreachableError`` naming each URL.
"""

from __future__ import annotations

import asyncio
import json
import random
import ssl
import time
from collections.abc import Awaitable, Callable, Hashable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TypeVar
from urllib.parse import quote, urlsplit, urlunsplit

import httpx

from aiokproto.error_families import KafkaConfigError
from aiokproto.schema_registry.errors import (
    IncompatibleSchemaError,
    InvalidSchemaError,
    RegistryUnreachableError,
    SchemaRegistryError,
    UnknownSchemaError,
)

T = TypeVar("T")

# the largest answer read (schemas are kilobytes; a body past this is a runaway)
_MAX_ANSWER = 16 * 1024 * 1024

_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
_KNOWN_KEYS = frozenset(
    {
        "url",
        "basic.auth.user.info",
        "basic.auth.credentials.source",
        "bearer.auth.token",
        "bearer.auth.credentials.source",
        "ssl.ca.location",
        "ssl.certificate.location",
        "ssl.key.location",
        "ssl.key.password",
        "timeout",
        "max.retries",
        "retries.wait.ms",
        "retries.max.wait.ms",
        "cache.latest.ttl.sec",
    }
)


_SOURCES = {
    "basic.auth.credentials.source": frozenset({"URL", "USER_INFO"}),
    "bearer.auth.credentials.source": frozenset({"STATIC_TOKEN"}),
}


@dataclass(frozen=True)
class SchemaReference:
    """A named reference to another subject's version (Avro named type, proto import)."""

    name: str
    subject: str
    version: int


@dataclass(frozen=True)
class Schema:
    """A schema's text and type (``"AVRO"``, ``"PROTOBUF"`` or ``"JSON"``)."""

    schema_str: str
    schema_type: str = "AVRO"
    references: tuple[SchemaReference, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"schema": self.schema_str}
        if self.schema_type != "AVRO":
            body["schemaType"] = self.schema_type
        if self.references:
            body["references"] = [
                {"name": r.name, "subject": r.subject, "version": r.version}
                for r in self.references
            ]
        return body

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> Schema:
        refs = tuple(
            SchemaReference(r["name"], r["subject"], int(r["version"]))
            for r in body.get("references") or ()
        )
        text, kind = body["schema"], body.get("schemaType") or "AVRO"
        if not isinstance(text, str) or not isinstance(kind, str):
            raise TypeError(f"schema {text!r} of type {kind!r}: not strings")
        return cls(text, kind, refs)


@dataclass(frozen=True)
class RegisteredSchema:
    """A schema as registered under a subject: its global id and version there."""

    schema_id: int
    schema: Schema
    subject: str
    version: int


class _SingleFlight:
    """One in-flight call per key; every caller of a key in flight awaits the same one.

    The call runs in its own task and each caller awaits it shielded: a cancelled
    caller (the first one included) cancels neither the call nor the other callers.
    """

    def __init__(self) -> None:
        self._flights: dict[Hashable, asyncio.Future[Any]] = {}

    async def run(self, key: Hashable, make: Callable[[], Awaitable[T]]) -> T:
        flight = self._flights.get(key)
        if flight is None:
            flight = asyncio.ensure_future(make())
            self._flights[key] = flight
            flight.add_done_callback(lambda done: self._landed(key, done))
        result: T = await asyncio.shield(flight)
        return result

    def _landed(self, key: Hashable, done: asyncio.Future[Any]) -> None:
        if self._flights.get(key) is done:
            del self._flights[key]
        if not done.cancelled():
            done.exception()  # retrieved: no warning when every caller went away


def _urls(conf: Mapping[str, Any]) -> tuple[list[str], tuple[str, str] | None]:
    raw = conf.get("url")
    if not raw:
        raise KafkaConfigError("SchemaRegistryClient needs 'url' (one URL or a comma list)")
    items = raw.split(",") if isinstance(raw, str) else list(raw)
    urls: list[str] = []
    auth: tuple[str, str] | None = None
    for item in items:
        parts = urlsplit(str(item).strip())
        # the user info may hold a password: never in an error message
        host = parts.netloc.rpartition("@")[2]
        shown = urlunsplit(parts._replace(netloc=host)) if "@" in parts.netloc else str(item)
        try:
            parts.port  # noqa: B018  # raises on a port that is not a number in range
        except ValueError:
            raise KafkaConfigError(f"schema registry url {shown!r} has a bad port") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise KafkaConfigError(f"schema registry url {shown!r} is not an http(s) URL")
        if parts.username is not None:
            auth = (parts.username, parts.password or "")
            parts = parts._replace(netloc=host)  # keeps an IPv6 host's brackets
        urls.append(urlunsplit(parts).rstrip("/"))
    return urls, auth


def _number(conf: Mapping[str, Any], key: str, default: float) -> float:
    value = conf.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise KafkaConfigError(f"schema registry {key!r} must be a number >= 0, not {value!r}")
    return float(value)


class SchemaRegistryClient:
    """An async client of a Confluent-compatible schema registry.

    ``conf`` takes confluent-kafka's keys: ``url`` (several, comma-separated, fail
    over in order), ``basic.auth.user.info`` (``"user:password"``, or user info in the
    URL), ``bearer.auth.token``, ``ssl.ca.location``, ``ssl.certificate.location``,
    ``ssl.key.location``, ``ssl.key.password``, ``timeout`` (seconds for a request and
    its whole answer, default 10),
    ``max.retries`` (default 3), ``retries.wait.ms`` (100), ``retries.max.wait.ms``
    (5000), ``cache.latest.ttl.sec`` (how long a subject's latest version is
    cached; default -1: until ``delete_subject``/``delete_version``; 0: never).
    ``transport`` replaces httpx's (tests count requests with it).

    Use it as ``async with SchemaRegistryClient(conf) as sr:``.
    """

    def __init__(
        self, conf: Mapping[str, Any], *, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        unknown = sorted(set(conf) - _KNOWN_KEYS)
        if unknown:
            raise KafkaConfigError(
                f"unknown schema registry option(s) {unknown}; known: {sorted(_KNOWN_KEYS)}"
            )
        # the credential sources this client has; another (SASL_INHERIT, OAUTHBEARER)
        # was accepted and ignored before: requests went out without credentials
        for key, known in _SOURCES.items():
            source = conf.get(key)
            if source is not None and str(source).upper() not in known:
                raise KafkaConfigError(
                    f"schema registry {key!r} {source!r} is not supported: "
                    f"{' or '.join(sorted(known))}"
                )
        self.urls, url_auth = _urls(conf)
        self._preferred = 0  # the URL that answered last goes first next time
        headers = {"Accept": _CONTENT_TYPE, "Content-Type": _CONTENT_TYPE}
        auth: httpx.Auth | tuple[str, str] | None = url_auth
        user_info = conf.get("basic.auth.user.info")
        if user_info is not None:
            user, sep, password = str(user_info).partition(":")
            if not sep:
                raise KafkaConfigError("'basic.auth.user.info' must be 'user:password'")
            auth = (user, password)
        token = conf.get("bearer.auth.token")
        if token is not None:
            if auth is not None:
                raise KafkaConfigError("give basic auth or a bearer token, not both")
            headers["Authorization"] = f"Bearer {token}"
        self._timeout = _number(conf, "timeout", 10.0)
        self._max_retries = int(_number(conf, "max.retries", 3))
        self._wait_s = _number(conf, "retries.wait.ms", 100) / 1000
        self._max_wait_s = _number(conf, "retries.max.wait.ms", 5000) / 1000
        ttl = conf.get("cache.latest.ttl.sec", -1)
        self._latest_ttl = None if ttl == -1 else _number(conf, "cache.latest.ttl.sec", 0)
        self._http = httpx.AsyncClient(
            headers=headers,
            auth=auth,
            verify=_ssl_context(conf),
            timeout=self._timeout,
            transport=transport,
        )
        self._by_id: dict[int, Schema] = {}
        self._ids: dict[tuple[str, Schema, bool], int] = {}
        self._registered: dict[tuple[str, Schema, bool], RegisteredSchema] = {}
        self._latest: dict[str, tuple[float, RegisteredSchema]] = {}
        self._flights = _SingleFlight()
        self._closed = False
        self._exchanges: set[asyncio.Future[httpx.Response]] = set()  # close() cancels

    async def __aenter__(self) -> SchemaRegistryClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connections; calls waiting on them, and any later call, raise
        ``SchemaRegistryError``."""
        self._closed = True
        for exchange in list(self._exchanges):
            # a request still connecting or waiting for a pooled connection is not
            # interrupted by aclose(): its caller waited for the whole timeout
            exchange.cancel()
        await self._http.aclose()

    async def _exchange(self, method: str, url: str, content: str | None) -> httpx.Response:
        """One request and its whole answer within ``timeout`` (httpx's own timeouts
        are per read: a registry dripping its body byte by byte held a call forever),
        and at most ``_MAX_ANSWER`` bytes of it (a runaway body is not read into memory)."""
        async with asyncio.timeout(self._timeout):
            request = self._http.build_request(method, url, content=content)
            resp = await self._http.send(request, stream=True)
            try:
                body = bytearray()
                async for chunk in resp.aiter_bytes():
                    body += chunk
                    if len(body) > _MAX_ANSWER:
                        raise SchemaRegistryError(
                            f"{method} {url}: the answer is larger than {_MAX_ANSWER} bytes",
                            resp.status_code,
                        )
            finally:
                await resp.aclose()
        # the body as read (decoded): a plain response of it, for _answer
        return httpx.Response(
            resp.status_code,
            content=bytes(body),
            headers={"Content-Type": resp.headers.get("Content-Type", "application/json")},
        )

    # -- the request loop ------------------------------------------------------------

    async def _request(self, method: str, path: str, body: Any = None) -> Any:
        """One API call: fail over across URLs, retry 429/5xx/connection errors."""
        content = None if body is None else json.dumps(body)
        failures: list[str] = []
        n = len(self.urls)
        for attempt in range(self._max_retries + 1):
            if attempt:
                delay = min(self._max_wait_s, self._wait_s * 2 ** (attempt - 1))
                await asyncio.sleep(delay * (0.5 + random.random() / 2))
            for i in range(n):
                index = (self._preferred + i) % n
                url = self.urls[index]
                # closed: httpx raises a bare RuntimeError, and fails a request in
                # flight as a ReadError (it would be retried): say what happened
                if self._closed:
                    raise _closed(method, path)
                exchange = asyncio.ensure_future(self._exchange(method, url + path, content))
                self._exchanges.add(exchange)
                try:
                    resp = await exchange
                except asyncio.CancelledError:
                    caller = asyncio.current_task()
                    if self._closed and not (caller is not None and caller.cancelling()):
                        raise _closed(method, path) from None  # close() cancelled it
                    raise
                except (httpx.TransportError, TimeoutError) as exc:
                    if self._closed:
                        raise _closed(method, path) from None
                    failures.append(
                        f"{url}: no complete answer within {self._timeout:g} s"
                        if isinstance(exc, TimeoutError)
                        else f"{url}: {type(exc).__name__}: {exc}"
                    )
                    continue
                finally:
                    self._exchanges.discard(exchange)
                if resp.status_code == 429 or resp.status_code >= 500:
                    failures.append(f"{url}: HTTP {resp.status_code}")
                    continue
                self._preferred = index
                return _answer(resp, method, path)
        tried = tuple(self.urls)
        raise RegistryUnreachableError(
            f"schema registry unreachable after {self._max_retries + 1} round(s) over "
            f"{', '.join(tried)}; last: {failures[-1] if failures else '?'}",
            tried,
        )

    async def _call(self, method: str, path: str, parse: Callable[[Any], T], body: Any = None) -> T:
        """``_request`` with its answer read by ``parse``: a body of the wrong shape (a
        proxy's HTML page, a 200 without the fields) is a ``SchemaRegistryError``."""
        answer = await self._request(method, path, body)
        try:
            return parse(answer)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise SchemaRegistryError(
                f"{method} {path}: the registry's answer is not the API's "
                f"({type(exc).__name__}: {exc}): {str(answer)[:200]}"
            ) from None

    # -- schemas by id ---------------------------------------------------------------

    async def get_schema(self, schema_id: int) -> Schema:
        """The schema with global id ``schema_id`` (cached for good: ids are immutable)."""
        schema = self._by_id.get(schema_id)
        if schema is not None:
            return schema
        return await self._flights.run(("id", schema_id), lambda: self._fetch_id(schema_id))

    async def _fetch_id(self, schema_id: int) -> Schema:
        schema = await self._call("GET", f"/schemas/ids/{int(schema_id)}", Schema.from_json)
        self._by_id[schema_id] = schema
        return schema

    # -- subjects --------------------------------------------------------------------

    async def register_schema(
        self, subject_name: str, schema: Schema, normalize_schemas: bool = False
    ) -> int:
        """Register ``schema`` under the subject (or find it there); its global id."""
        key = (subject_name, schema, normalize_schemas)
        schema_id = self._ids.get(key)
        if schema_id is not None:
            return schema_id
        return await self._flights.run(("register", *key), lambda: self._register(*key))

    async def _register(self, subject: str, schema: Schema, normalize: bool) -> int:
        query = "?normalize=true" if normalize else ""
        path = f"/subjects/{_q(subject)}/versions{query}"
        try:
            schema_id = await self._call("POST", path, _schema_id, schema.to_json())
        except IncompatibleSchemaError as refused:
            # Two writers registering one new subject at once (Spark tasks, service
            # replicas): Apicurio answers the loser 409 "already exists". If the
            # schema is there now, that is its id; if not, it really is incompatible.
            try:
                return (await self._lookup(subject, schema, normalize)).schema_id
            except UnknownSchemaError:
                raise refused from None
        self._ids[(subject, schema, normalize)] = schema_id
        self._by_id.setdefault(schema_id, schema)
        return schema_id

    async def lookup_schema(
        self, subject_name: str, schema: Schema, normalize_schemas: bool = False
    ) -> RegisteredSchema:
        """The version of ``schema`` under the subject (``UnknownSchemaError`` if none)."""
        key = (subject_name, schema, normalize_schemas)
        found = self._registered.get(key)
        if found is not None:
            return found
        return await self._flights.run(("lookup", *key), lambda: self._lookup(*key))

    async def _lookup(self, subject: str, schema: Schema, normalize: bool) -> RegisteredSchema:
        query = "?normalize=true" if normalize else ""
        found = await self._call(
            "POST",
            f"/subjects/{_q(subject)}{query}",
            lambda body: _registered(body, subject, schema),
            schema.to_json(),
        )
        self._registered[(subject, schema, normalize)] = found
        self._ids[(subject, schema, normalize)] = found.schema_id
        self._by_id.setdefault(found.schema_id, schema)
        return found

    async def get_latest_version(self, subject_name: str) -> RegisteredSchema:
        """The subject's latest version (cached for ``cache.latest.ttl.sec`` if set)."""
        hit = self._latest.get(subject_name)
        if hit is not None and (
            self._latest_ttl is None or time.monotonic() - hit[0] < self._latest_ttl
        ):
            return hit[1]
        return await self._flights.run(
            ("latest", subject_name), lambda: self._fetch_latest(subject_name)
        )

    async def _fetch_latest(self, subject: str) -> RegisteredSchema:
        found = await self.get_version(subject, "latest")
        self._latest[subject] = (time.monotonic(), found)
        return found

    async def get_version(self, subject_name: str, version: int | str) -> RegisteredSchema:
        """One version of a subject (``"latest"`` for the newest)."""
        found = await self._call(
            "GET",
            f"/subjects/{_q(subject_name)}/versions/{version}",
            lambda body: _registered(body, subject_name, None),
        )
        self._by_id.setdefault(found.schema_id, found.schema)
        return found

    async def get_versions(self, subject_name: str) -> list[int]:
        return await self._call("GET", f"/subjects/{_q(subject_name)}/versions", _ints)

    async def get_subjects(self) -> list[str]:
        return await self._call("GET", "/subjects", _strs)

    async def delete_subject(self, subject_name: str, permanent: bool = False) -> list[int]:
        """Delete a subject (soft, or hard with ``permanent``); the versions deleted."""
        path = f"/subjects/{_q(subject_name)}"
        versions = await self._call("DELETE", path, _ints)
        if permanent:
            await self._request("DELETE", path + "?permanent=true")
        self._forget_subject(subject_name)
        return versions

    async def delete_version(self, subject_name: str, version: int, permanent: bool = False) -> int:
        path = f"/subjects/{_q(subject_name)}/versions/{int(version)}"
        deleted = await self._call("DELETE", path, _int)
        if permanent:
            await self._request("DELETE", path + "?permanent=true")
        self._forget_subject(subject_name)
        return deleted

    def _forget_subject(self, subject: str) -> None:
        self._latest.pop(subject, None)
        for cache in (self._ids, self._registered):
            for key in [k for k in cache if k[0] == subject]:
                del cache[key]

    async def get_referenced_by(self, subject_name: str, version: int | str) -> list[int]:
        """The ids of schemas that reference this version."""
        path = f"/subjects/{_q(subject_name)}/versions/{version}/referencedby"
        return await self._call("GET", path, _ints)

    # -- compatibility, config, modes ------------------------------------------------

    async def test_compatibility(
        self, subject_name: str, schema: Schema, version: int | str = "latest"
    ) -> bool:
        path = f"/compatibility/subjects/{_q(subject_name)}/versions/{version}"
        return await self._call(
            "POST", path, lambda body: _typed(body["is_compatible"], bool), schema.to_json()
        )

    async def set_compatibility(self, subject_name: str | None = None, level: str = "") -> str:
        """Set a subject's (or the global) compatibility level, e.g. ``"BACKWARD"``."""
        if not level:
            raise KafkaConfigError("set_compatibility needs level= (e.g. 'BACKWARD')")
        return await self._call(
            "PUT",
            _config_path(subject_name),
            lambda body: str(_dict(body).get("compatibility", level)),
            {"compatibility": level},
        )

    async def get_compatibility(self, subject_name: str | None = None) -> str:
        return await self._call("GET", _config_path(subject_name), _level)

    async def set_config(
        self, subject_name: str | None = None, config: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        return await self._call("PUT", _config_path(subject_name), _dict, dict(config or {}))

    async def get_config(self, subject_name: str | None = None) -> dict[str, Any]:
        return await self._call("GET", _config_path(subject_name), _dict)

    async def set_mode(self, mode: str, subject_name: str | None = None) -> str:
        path = "/mode" if subject_name is None else f"/mode/{_q(subject_name)}"
        return await self._call(
            "PUT", path, lambda body: str(_dict(body).get("mode", mode)), {"mode": mode}
        )

    async def get_mode(self, subject_name: str | None = None) -> str:
        path = "/mode" if subject_name is None else f"/mode/{_q(subject_name)}"
        return await self._call("GET", path, lambda body: _typed(body["mode"], str))


# readers of the registry's answers: a wrong shape raises KeyError/TypeError/ValueError,
# which _call turns into a SchemaRegistryError


def _typed(value: Any, kind: type[T]) -> T:
    if not isinstance(value, kind):
        raise TypeError(f"{value!r} is not a {kind.__name__}")
    return value


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{value!r} is not an integer")
    return value


def _ints(body: Any) -> list[int]:
    return [_int(v) for v in _typed(body, list)]


def _strs(body: Any) -> list[str]:
    return [_typed(v, str) for v in _typed(body, list)]


def _dict(body: Any) -> dict[str, Any]:
    return dict(_typed(body, dict))


def _schema_id(body: Any) -> int:
    return _int(body["id"])


def _level(body: Any) -> str:
    body = _typed(body, dict)
    return _typed(body.get("compatibilityLevel") or body["compatibility"], str)


def _closed(method: str, path: str) -> SchemaRegistryError:
    return SchemaRegistryError(f"{method} {path}: the SchemaRegistryClient is closed")


def _q(subject: str) -> str:
    return quote(subject, safe="")


def _config_path(subject: str | None) -> str:
    return "/config" if subject is None else f"/config/{_q(subject)}"


def _registered(body: Mapping[str, Any], subject: str, schema: Schema | None) -> RegisteredSchema:
    if schema is None or "schema" in body:
        schema = Schema.from_json(body)
    return RegisteredSchema(
        _int(body["id"]), schema, str(body.get("subject", subject)), _int(body["version"])
    )


def _answer(resp: httpx.Response, method: str, path: str) -> Any:
    try:
        body = resp.json() if resp.content else None
    except ValueError:
        if resp.status_code < 300:  # e.g. a proxy's or a login page's HTML
            raise SchemaRegistryError(
                f"{method} {path}: HTTP {resp.status_code} with a body that is not JSON: "
                f"{resp.text[:200]!r}",
                resp.status_code,
            ) from None
        body = None
    if resp.status_code < 300:
        return body
    code = body.get("error_code") if isinstance(body, dict) else None
    message = body.get("message") if isinstance(body, dict) else None
    text = f"{method} {path}: HTTP {resp.status_code}" + (f" {code}" if code else "")
    text += f": {message or resp.text[:200]}"
    code = code if isinstance(code, int) else None
    status = resp.status_code
    if status == 404 and code is not None and 40400 <= code < 40500:
        # a 404 without a 404xx code is a path the server does not serve (e.g. /mode)
        raise UnknownSchemaError(text, status, code)
    if status == 409:
        raise IncompatibleSchemaError(text, status, code)
    if status == 422:
        raise InvalidSchemaError(text, status, code)
    raise SchemaRegistryError(text, status, code)


def _ssl_context(conf: Mapping[str, Any]) -> ssl.SSLContext | bool:
    ca = conf.get("ssl.ca.location")
    cert = conf.get("ssl.certificate.location")
    key = conf.get("ssl.key.location")
    if ca is None and cert is None:
        return True  # the system's trust store, hostname checked
    ctx = ssl.create_default_context(cafile=ca)
    if cert is not None:
        ctx.load_cert_chain(cert, key, conf.get("ssl.key.password"))
    return ctx
