"""A local OpenID Connect provider for the OAuth tests: Spring Authorization Server
(Spring Boot 3.5.7), built once by Maven into the user cache dir and run on a free
127.0.0.1 port; and the Kafka broker settings that validate its tokens (KIP-768).

Why Spring Authorization Server: it is a real OAuth 2.0 server on Maven Central that
runs on Java 17 from a properties file alone (clients, secrets, token lifetimes): it
refuses a wrong client secret with 401, signs JWT access tokens (RS256, ``aud`` the
client id) and publishes the JWKS. navikt's mock-oauth2-server starts faster (~4 s
against ~10 s here) but accepts any client secret, so the wrong-secret case could not
be tested against it. First build ~1 minute (~26 MB of jars).

Clients with an ``assertion_algorithm`` authenticate with a private-key JWT (RFC 7523,
``private_key_jwt``) instead of a secret: the harness makes their key pair, and serves
their public key set on a small HTTP endpoint of its own (Spring AS fetches a client's
``jwk-set-uri`` over HTTP only; it is read at the first assertion, not at start).
"""

from __future__ import annotations

import base64
import http.server
import json
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Literal, Self

from aiokproto.testing import java_server, processes
from aiokproto.testing.broker_config import SASL_PLAINTEXT, SecurityOptions
from aiokproto.testing.cluster import LocalKafka
from aiokproto.testing.errors import KafkaHarnessError
from aiokproto.testing.jars import _digest, default_cache_dir, tool_on_path
from aiokproto.testing.java_server import START_TIMEOUT_S, JavaServer, build_once, run_maven
from aiokproto.testing.node import FAST_START_JVM_OPTIONS
from aiokproto.testing.ports import free_ports

_NAME = "oidc-server-sas-3.5.7"
JwksSource = Literal["file", "http"]
_MAIN = "aiokproto.testing.OidcServer"
_BUILD_TIMEOUT_S = 900.0


@dataclass(frozen=True)
class OidcClient:
    """A registered client: its tokens carry ``aud`` = ``client_id`` and live
    ``token_ttl_s`` seconds. With ``assertion_algorithm`` (RS256 or ES256) it
    authenticates with a private-key JWT signed by its key, not with ``secret``."""

    client_id: str
    secret: str
    token_ttl_s: int = 300
    assertion_algorithm: str | None = None


#: the clients every test server has: the broker expects the first two's audience
DEFAULT_CLIENTS: tuple[OidcClient, ...] = (
    OidcClient("kafka-client", "kafka-client-secret"),
    OidcClient("kafka-short", "kafka-short-secret", token_ttl_s=6),
    OidcClient("other-service", "other-service-secret"),
    OidcClient("kafka-jwt", "", assertion_algorithm="RS256"),
    OidcClient("kafka-jwt-es", "", assertion_algorithm="ES256"),
)
KAFKA_AUDIENCES = ("kafka-client", "kafka-short", "kafka-jwt", "kafka-jwt-es")


def _project_file(name: str) -> str:
    path = resources.files("aiokproto.testing").joinpath("poms", "oidc-server", name)
    return path.read_text(encoding="utf-8")


def build_dir(cache_dir: Path | None = None) -> Path:
    return (cache_dir or default_cache_dir()) / _NAME


def _digest_now() -> str:
    return _digest(_project_file("pom.xml"), (_project_file("OidcServer.java"),))


def _classes(work: Path) -> Path:
    return work / "target" / "classes" / "aiokproto" / "testing" / "OidcServer.class"


def is_built(cache_dir: Path | None = None) -> bool:
    work = build_dir(cache_dir)
    return java_server.is_built(work, _digest_now(), _classes(work))


def build(cache_dir: Path | None = None) -> str:
    """Build the server once into ``<cache>/oidc-server-...``; return its classpath.

    Needs Maven and a JDK 17+ the first time; safe across processes (a file lock).
    """
    cache = cache_dir or default_cache_dir()
    work = build_dir(cache)
    what = "the OIDC test server (Spring Authorization Server)"
    build_once(
        cache, work, _digest_now(), _classes(work), what, lambda mvn: _build(mvn, cache, work)
    )
    return f"{work / 'target' / 'classes'}:{work / 'libs' / '*'}"


def _build(mvn: str, cache: Path, work: Path) -> None:
    if work.exists():
        shutil.rmtree(work)
    source = work / "src" / "main" / "java" / "aiokproto" / "testing"
    source.mkdir(parents=True)
    (work / "pom.xml").write_text(_project_file("pom.xml"), encoding="utf-8")
    (source / "OidcServer.java").write_text(_project_file("OidcServer.java"), encoding="utf-8")
    cmd = [mvn, "-q", "-B", "-f", str(work / "pom.xml"), "compile"]
    cmd += ["dependency:copy-dependencies", f"-DoutputDirectory={work / 'libs'}"]
    cmd += ["-DincludeScope=runtime", f"-Dmaven.repo.local={cache / 'm2'}"]
    run_maven(cmd, "the OIDC test server", _BUILD_TIMEOUT_S)


def _b64(number: int, size: int | None = None) -> str:
    """A JWK number: big-endian in ``size`` bytes (else as few as it needs), base64url
    without padding (RFC 7518 section 6)."""
    raw = number.to_bytes(size or (number.bit_length() + 7) // 8, "big")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def signing_key(directory: Path, kid: str = "aiokproto-test") -> tuple[Path, Path]:
    """A fresh RSA key as a private JWK (for the server) and its public key set (for the
    broker's ``file:`` JWKS): (private, public) paths under ``directory``."""
    try:
        from cryptography.hazmat.primitives.asymmetric import rsa
    except ImportError:
        raise KafkaHarnessError(
            "the OIDC test server needs the 'cryptography' package (pip install cryptography)"
        ) from None

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_numbers()
    public = private.public_numbers
    jwk = {"kty": "RSA", "kid": kid, "alg": "RS256", "use": "sig"}
    jwk |= {"n": _b64(public.n), "e": _b64(public.e)}
    public_jwk = dict(jwk)
    jwk |= {"d": _b64(private.d), "p": _b64(private.p), "q": _b64(private.q)}
    jwk |= {"dp": _b64(private.dmp1), "dq": _b64(private.dmq1), "qi": _b64(private.iqmp)}
    directory.mkdir(parents=True, exist_ok=True)
    private_path, public_path = directory / "signing-jwk.json", directory / "jwks.json"
    private_path.write_text(json.dumps(jwk), encoding="utf-8")
    private_path.chmod(0o600)
    public_path.write_text(json.dumps({"keys": [public_jwk]}), encoding="utf-8")
    return private_path, public_path


def assertion_key(directory: Path, client_id: str, algorithm: str) -> tuple[Path, Path]:
    """A fresh key for a client's assertions (RSA 2048 for RS256, P-256 for ES256): its
    PEM private key (for the client) and public JWK set (for the server), as paths."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    jwk: dict[str, str] = {"kid": client_id, "alg": algorithm, "use": "sig"}
    key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey
    if algorithm == "RS256":
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        numbers = key.public_key().public_numbers()
        jwk |= {"kty": "RSA", "n": _b64(numbers.n), "e": _b64(numbers.e)}
    elif algorithm == "ES256":
        key = ec.generate_private_key(ec.SECP256R1())
        point = key.public_key().public_numbers()
        jwk |= {"kty": "EC", "crv": "P-256", "x": _b64(point.x, 32), "y": _b64(point.y, 32)}
    else:
        raise KafkaHarnessError(f"no assertion key for {algorithm!r}: RS256 or ES256")
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    directory.mkdir(parents=True, exist_ok=True)
    private_path = directory / f"{client_id}-key.pem"
    public_path = directory / f"{client_id}-jwks.json"
    private_path.write_bytes(pem)
    private_path.chmod(0o600)
    public_path.write_text(json.dumps({"keys": [jwk]}), encoding="utf-8")
    return private_path, public_path


def server_properties(
    port: int,
    clients: Sequence[OidcClient],
    jwk_file: Path | None = None,
    client_jwks_url: str = "",
) -> str:
    """Spring Boot settings: the issuer, the signing key and one registration per client;
    a private-key JWT client's key set is at ``<client_jwks_url>/<client id>``."""
    issuer = f"http://127.0.0.1:{port}"
    lines = [
        f"aiokproto.jwk-file={jwk_file}",
        "server.address=127.0.0.1",
        f"server.port={port}",
        "spring.main.banner-mode=off",
        "spring.jmx.enabled=false",
        "logging.level.root=WARN",
        f"spring.security.oauth2.authorizationserver.issuer={issuer}",
    ]
    for client in clients:
        prefix = f"spring.security.oauth2.authorizationserver.client.{client.client_id}"
        lines.append(f"{prefix}.registration.client-id={client.client_id}")
        if client.assertion_algorithm is None:
            lines += [
                f"{prefix}.registration.client-secret={{noop}}{client.secret}",
                f"{prefix}.registration.client-authentication-methods="
                "client_secret_basic,client_secret_post",
            ]
        else:
            lines += [
                f"{prefix}.registration.client-authentication-methods=private_key_jwt",
                f"{prefix}.jwk-set-uri={client_jwks_url}/{client.client_id}",
                f"{prefix}.token-endpoint-authentication-signing-algorithm="
                f"{client.assertion_algorithm}",
            ]
        lines += [
            f"{prefix}.registration.authorization-grant-types=client_credentials",
            f"{prefix}.registration.scopes=kafka",
            f"{prefix}.token.access-token-time-to-live={client.token_ttl_s}s",
        ]
    return "\n".join(lines) + "\n"


class LocalOidcServer(JavaServer):
    """One Spring Authorization Server on 127.0.0.1 (``token_url``, ``jwks_url``,
    ``issuer``); ``clients`` are registered at start."""

    what = "the OIDC server"

    def __init__(
        self,
        clients: Sequence[OidcClient] = DEFAULT_CLIENTS,
        cache_dir: Path | None = None,
        port: int | None = None,
    ) -> None:
        self.clients = tuple(clients)
        self._cache_dir = cache_dir
        self.port = port or free_ports(1)[0]
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.token_url = f"{self.issuer}/oauth2/token"
        self.jwks_url = f"{self.issuer}/oauth2/jwks"
        self.ready_url = self.jwks_url
        self._proc: subprocess.Popen[bytes] | None = None
        # this server's files (its key, settings and log) live while it does
        self._dir = Path(tempfile.mkdtemp(prefix="aiokproto-oidc-"))
        self._log = self._dir / "server.log"
        # the signing key exists before the server starts: a broker can load the key
        # set from ``jwks_file`` meanwhile (Kafka 4.4 stops at start when its JWKS
        # endpoint does not answer yet, and this server takes ~10 s to come up)
        self._jwk_file, self.jwks_file = signing_key(self._dir)
        # the private-key JWT clients' keys: {client id: (PEM private key, public JWKS)}
        self._assertion_keys = {
            c.client_id: assertion_key(self._dir, c.client_id, c.assertion_algorithm)
            for c in self.clients
            if c.assertion_algorithm is not None
        }
        self._key_server: http.server.ThreadingHTTPServer | None = None

    def client(self, client_id: str) -> OidcClient:
        return next(c for c in self.clients if c.client_id == client_id)

    def private_key_file(self, client_id: str) -> Path:
        """The PEM key a private-key JWT client signs its assertions with."""
        return self._assertion_keys[client_id][0]

    def _serve_client_keys(self) -> str:
        """Serve each private-key JWT client's public key set at ``<url>/<client id>``
        from a daemon thread; return the base URL."""
        if self._key_server is None:
            sets = {f"/{cid}": keys[1] for cid, keys in self._assertion_keys.items()}

            class Handler(http.server.BaseHTTPRequestHandler):
                def do_GET(self) -> None:
                    path = sets.get(self.path)
                    body = path.read_bytes() if path is not None else b"{}"
                    self.send_response(200 if path is not None else 404)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)

                def log_message(self, format: str, *args: object) -> None:
                    pass  # quiet: the tests' output is not the place

            self._key_server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
            self._key_server.daemon_threads = True
            threading.Thread(
                target=self._key_server.serve_forever, name="aiokproto-oidc-keys", daemon=True
            ).start()
        return f"http://127.0.0.1:{self._key_server.server_address[1]}"

    def spawn(self) -> None:
        """Start the process without waiting for it (``wait_ready`` waits)."""
        if self.running:
            return
        classpath = build(self._cache_dir)
        java = tool_on_path("java")
        if java is None:
            raise KafkaHarnessError("'java' (17 or newer) is not on PATH: the OIDC server needs it")
        self._dir.mkdir(parents=True, exist_ok=True)
        config = self._dir / "application.properties"
        config.write_text(
            server_properties(self.port, self.clients, self._jwk_file, self._serve_client_keys()),
            encoding="utf-8",
        )
        cmd = [
            java,
            # small and quick to start: it issues a few tokens
            "-Xmx160m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Dspring.main.lazy-initialization=true",
            "-cp",
            classpath,
            _MAIN,
            f"--spring.config.location=file:{config}",
        ]
        self._log.write_bytes(b"")
        self._proc = processes.spawn(cmd, self._dir, self._log)

    def start(self, timeout_s: float = START_TIMEOUT_S) -> Self:
        self.spawn()
        self.wait_ready(timeout_s)
        return self

    def stop(self) -> None:
        """Stop the process and remove its files (the key with them: not restartable)."""
        super().stop()
        keys, self._key_server = self._key_server, None
        if keys is not None:
            keys.shutdown()
            keys.server_close()
        shutil.rmtree(self._dir, ignore_errors=True)


#: the broker's listener name for OIDC-validated OAUTHBEARER (SASL_PLAINTEXT)
LISTENER = "sasl_plaintext"
#: how long a broker session may last before it must re-authenticate (KIP-368); with
#: OAUTHBEARER the broker also ends it at the token's expiry
MAX_REAUTH_MS = 600_000


def jwks_url(server: LocalOidcServer, jwks: JwksSource) -> str:
    return server.jwks_file.as_uri() if jwks == "file" else server.jwks_url


def broker_overrides(
    server: LocalOidcServer,
    audiences: Sequence[str] = KAFKA_AUDIENCES,
    jwks: JwksSource = "file",
) -> dict[str, str]:
    """Settings for a broker whose SASL_PLAINTEXT listener takes OAUTHBEARER tokens from
    ``server``, validated against its key set, issuer and ``audiences`` (KIP-768).

    ``jwks="file"`` reads the server's key set from its file, so the broker may start
    before the server answers; ``"http"`` fetches it from the server's JWKS endpoint,
    which must answer when the broker starts (Kafka 4.4 stops otherwise).
    """
    prefix = f"listener.name.{LISTENER}.oauthbearer"
    return {
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        f"{prefix}.sasl.jaas.config": (
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
        ),
        f"{prefix}.sasl.server.callback.handler.class": (
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
        ),
        f"{prefix}.connections.max.reauth.ms": str(MAX_REAUTH_MS),
        "sasl.oauthbearer.jwks.endpoint.url": jwks_url(server, jwks),
        "sasl.oauthbearer.expected.audience": ",".join(audiences),
        "sasl.oauthbearer.expected.issuer": server.issuer,
    }


def broker_jvm_options(server: LocalOidcServer, jwks: JwksSource = "file") -> list[str]:
    """Kafka 4.x reads only the URLs this system property allows."""
    allowed = f"{jwks_url(server, jwks)},{server.token_url}"
    return [f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={allowed}"]


def oauth_kafka(server: LocalOidcServer, version: str, jwks: JwksSource = "file") -> LocalKafka:
    """A (not yet started) single node with PLAINTEXT and an OIDC-validated OAUTHBEARER
    SASL_PLAINTEXT listener for ``server``'s tokens."""
    return LocalKafka(
        version=version,
        security=SecurityOptions(
            protocols=(SASL_PLAINTEXT,), mechanisms=("OAUTHBEARER",), users=()
        ),
        overrides=broker_overrides(server, jwks=jwks),
        jvm_options=[*FAST_START_JVM_OPTIONS, *broker_jvm_options(server, jwks)],
    )


class OAuthSetup:
    """The OIDC server and its broker, started together in a background thread
    (``begin``), so a pytest session can start them while other tests run; ``wait``
    returns once both answer (raising what failed), ``stop`` ends both."""

    def __init__(self, version: str) -> None:
        self.server = LocalOidcServer()
        self.kafka = oauth_kafka(self.server, version)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._start, name="aiokproto-oauth", daemon=True)

    def _start(self) -> None:
        try:
            self.server.spawn()  # the broker does not need it yet: its JWKS is a file
            self.kafka.start()
            self.server.wait_ready()
        except BaseException as exc:  # handed to wait()
            self._error = exc

    def begin(self) -> OAuthSetup:
        if self._thread.ident is None:
            self._thread.start()
        return self

    def wait(self) -> None:
        self.begin()
        self._thread.join()
        if self._error is not None:
            raise KafkaHarnessError(f"the OAuth test servers did not start: {self._error}")

    def stop(self) -> None:
        self._thread.join()
        try:
            self.kafka.stop()
        finally:
            self.server.stop()


def oidc_possible(cache_dir: Path | None = None) -> str | None:
    """None if the OIDC server can run here (built, or buildable); else why not."""
    tools = ("java",) if is_built(cache_dir) else ("mvn", "java")
    for tool in tools:
        if tool_on_path(tool) is None:
            return f"no '{tool}' on PATH: the OIDC test server cannot be built or run"
    return None
