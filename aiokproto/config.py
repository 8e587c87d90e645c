"""Configuration shared by Producer, Consumer and Admin: ``ClientConfig``, bootstrap
parsing, ``split_options`` (aiokafka's option names and ``None`` values translated,
ignored ones warned about once, did-you-mean for unknown names).

Names are Java's client configs in snake_case. Unknown or ill-typed options fail
at construction with ``KafkaConfigError``, never later on a background task.

Code written for aiokafka passes its own option names and values; ``split_options``
translates them (``AIOKAFKA_RENAMED``, ``NONE_MEANS_DEFAULT``, ``NONE_MEANS``) or
ignores them with a warning (``AIOKAFKA_IGNORED``), so such code runs unchanged.
"""

from __future__ import annotations

import ssl
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from aiokproto.errors import KafkaConfigError
from aiokproto.net.connection_config import ConnectionConfig
from aiokproto.net.sasl import TokenProvider
from aiokproto.net.security import SecurityConfig


def parse_bootstrap_servers(value: str | Iterable[str]) -> tuple[tuple[str, int], ...]:
    """``"h1:9092,h2:9093"``, ``["h1:9092"]`` or ``"[::1]:9092"`` into (host, port) pairs."""
    if isinstance(value, str):
        items: list[object] = list(value.split(","))
    elif isinstance(value, Iterable) and not isinstance(value, (bytes, bytearray)):
        items = list(value)
    else:  # None, an int, bytes (iterating them gives ints): a caller's type error
        raise KafkaConfigError(
            "bootstrap_servers must be a str ('host:port,...') or a list of str, "
            f"not {type(value).__name__}"
        )
    out: list[tuple[str, int]] = []
    for raw in items:
        if not isinstance(raw, str):
            raise KafkaConfigError(f"bootstrap_servers: {raw!r} is not a str")
        item = raw.strip()
        if not item:
            continue
        scheme, sep, rest = item.partition("://")
        if sep:  # a listener (PLAINTEXT://h:9092) or a URL: it would not resolve
            raise KafkaConfigError(
                f"bootstrap server {item!r}: give host:port ({rest.rstrip('/')!r}), without "
                f"{scheme + sep!r}; the protocol is the security_protocol option"
            )
        host, sep, port_text = item.rpartition(":")
        if not sep:
            host, port_text = item, "9092"
        host = host.strip("[]")
        try:
            port = int(port_text)
        except ValueError:
            raise KafkaConfigError(f"bootstrap server {item!r}: port must be a number") from None
        if not host or not 0 < port < 65536:
            raise KafkaConfigError(f"bootstrap server {item!r} is not host:port")
        out.append((host, port))
    if not out:
        raise KafkaConfigError("bootstrap_servers is empty; give at least one host:port")
    return tuple(out)


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """Options every aiokproto client takes."""

    bootstrap_servers: tuple[tuple[str, int], ...]
    client_id: str = "aiokproto"
    request_timeout_ms: int = 30_000
    default_api_timeout_ms: int = 60_000
    # start(): how long to retry while no bootstrap server could be reached at all
    # (refused, unresolvable, no answer); raise it for a service that starts before
    # its brokers. Once one was reached, default_api_timeout_ms bounds start().
    bootstrap_timeout_ms: int = 5_000
    socket_connection_setup_timeout_ms: int = 10_000
    connections_max_idle_ms: int = 540_000
    max_in_flight_requests_per_connection: int = 5
    metadata_max_age_ms: int = 300_000
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1_000
    reconnect_backoff_ms: int = 50
    reconnect_backoff_max_ms: int = 1_000
    allow_auto_create_topics: bool = True
    max_response_size: int = 256 * 1024 * 1024
    security_protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_password: str | None = field(default=None, repr=False)
    ssl_check_hostname: bool = True
    sasl_mechanism: str = "PLAIN"
    sasl_plain_username: str | None = None
    sasl_plain_password: str | None = field(default=None, repr=False)
    sasl_oauth_token_provider: TokenProvider | None = field(default=None, repr=False)
    sasl_kerberos_service_name: str = "kafka"
    sasl_kerberos_domain_name: str | None = None
    sasl_kerberos_keytab: str | None = None
    sasl_kerberos_principal: str | None = None
    sasl_kerberos_ccache: str | None = None
    # client.metrics(): Java's metrics.sample.window.ms and metrics.num.samples
    metrics_sample_window_ms: int = 30_000
    metrics_num_samples: int = 2
    # KIP-714: push metrics to brokers that have a client-metrics subscription
    enable_metrics_push: bool = True

    def __post_init__(self) -> None:
        for name in (
            "default_api_timeout_ms",
            "bootstrap_timeout_ms",
            "metadata_max_age_ms",
            "retry_backoff_ms",
            "retry_backoff_max_ms",
            "reconnect_backoff_ms",
            "reconnect_backoff_max_ms",
            "metrics_sample_window_ms",
            "metrics_num_samples",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise KafkaConfigError(f"{name} must be a positive int, not {value!r}")
        if not isinstance(self.allow_auto_create_topics, bool):
            # "no" is truthy: anything but a bool would silently mean True
            raise KafkaConfigError(
                f"allow_auto_create_topics must be a bool, not {self.allow_auto_create_topics!r}"
            )
        if not isinstance(self.enable_metrics_push, bool):
            raise KafkaConfigError(
                f"enable_metrics_push must be a bool, not {self.enable_metrics_push!r}"
            )
        self.connection  # noqa: B018 - validates the connection and security options

    @property
    def security(self) -> SecurityConfig:
        return SecurityConfig(
            security_protocol=self.security_protocol,
            ssl_context=self.ssl_context,
            ssl_cafile=self.ssl_cafile,
            ssl_certfile=self.ssl_certfile,
            ssl_keyfile=self.ssl_keyfile,
            ssl_password=self.ssl_password,
            ssl_check_hostname=self.ssl_check_hostname,
            sasl_mechanism=self.sasl_mechanism,
            sasl_plain_username=self.sasl_plain_username,
            sasl_plain_password=self.sasl_plain_password,
            sasl_oauth_token_provider=self.sasl_oauth_token_provider,
            sasl_kerberos_service_name=self.sasl_kerberos_service_name,
            sasl_kerberos_domain_name=self.sasl_kerberos_domain_name,
            sasl_kerberos_keytab=self.sasl_kerberos_keytab,
            sasl_kerberos_principal=self.sasl_kerberos_principal,
            sasl_kerberos_ccache=self.sasl_kerberos_ccache,
        )

    @property
    def connection(self) -> ConnectionConfig:
        return ConnectionConfig(
            client_id=self.client_id,
            request_timeout_ms=self.request_timeout_ms,
            socket_connection_setup_timeout_ms=self.socket_connection_setup_timeout_ms,
            max_in_flight_requests_per_connection=self.max_in_flight_requests_per_connection,
            connections_max_idle_ms=self.connections_max_idle_ms,
            max_response_size=self.max_response_size,
            security=self.security,
        )


CLIENT_OPTIONS = frozenset(f.name for f in fields(ClientConfig))

#: aiokafka's names of options that are ours under another name. A name is
#: translated only for a client that has the target option.
AIOKAFKA_RENAMED: Mapping[str, str] = {
    "max_batch_size": "batch_size",
}

#: Options aiokafka lets be None for "its default"; None means ours.
NONE_MEANS_DEFAULT = frozenset({"client_id", "compression_type", "max_poll_records"})

#: Options whose None aiokafka documents with a meaning of its own, as our value.
NONE_MEANS: Mapping[str, int] = {
    # aiokafka: None disables the idle check; Java's int max is 24.8 days.
    "connections_max_idle_ms": 2**31 - 1,
}

#: aiokafka options with no effect here: name -> (an option a client must have for
#: the name to apply to it, or None for every client; why it is ignored). A value
#: other than None is ignored with a warning, once per option and process.
AIOKAFKA_IGNORED: Mapping[str, tuple[str | None, str]] = {
    "api_version": (None, "API versions are negotiated with each broker"),
    "loop": (None, "clients run on the event loop that is running when they start"),
    "consumer_timeout_ms": (
        "fetch_max_wait_ms",
        "the fetcher reacts to new data and assignment changes at once, not on a timer",
    ),
}

_warned: set[str] = set()  # AIOKAFKA_IGNORED names already warned about


def _translate(options: Mapping[str, Any], known: frozenset[str], owner: str) -> dict[str, Any]:
    """``options`` with aiokafka's names and values turned into ours."""
    out: dict[str, Any] = {}
    for name, value in options.items():
        ignored = AIOKAFKA_IGNORED.get(name)
        if ignored is not None and (ignored[0] is None or ignored[0] in known):
            if value is not None and name not in _warned:
                _warned.add(name)
                warnings.warn(f"{owner}: {name}={value!r} is ignored: {ignored[1]}", stacklevel=4)
            continue
        target = AIOKAFKA_RENAMED.get(name)
        if target is not None and target in known:
            if target in options:
                raise KafkaConfigError(
                    f"{owner} got both {name} (aiokafka's name) and {target}; pass {target}"
                )
            name = target
        if value is None and name in known:  # an unknown name stays unknown
            if name in NONE_MEANS_DEFAULT:
                continue
            value = NONE_MEANS.get(name, value)
        out[name] = value
    return out


def _unknown(owner: str, unknown: Iterable[str], known: frozenset[str]) -> KafkaConfigError:
    """The error for unknown option names, with the closest valid name for each typo."""
    import difflib  # ~1 ms that only a misspelled option needs

    candidates = sorted(known | {a for a, t in AIOKAFKA_RENAMED.items() if t in known})
    parts = []
    for name in sorted(unknown):
        close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.75)
        parts.append(f"{name} (did you mean {close[0]}?)" if close else name)
    return KafkaConfigError(f"{owner} got unknown option(s): {', '.join(parts)}")


def split_options(
    options: Mapping[str, Any], own: Iterable[str], owner: str
) -> tuple[ClientConfig, dict[str, Any]]:
    """Split keyword options into the shared ``ClientConfig`` and the owner's own ones.

    aiokafka's names and values are translated first (see the module docstring). An
    option neither shared nor in ``own`` raises ``KafkaConfigError`` naming it, with
    the closest valid name when one is close.
    """
    own_names = frozenset(own)
    known = CLIENT_OPTIONS | own_names
    options = _translate(options, known, owner)
    unknown = set(options) - known
    if unknown:
        raise _unknown(owner, unknown, known)
    shared = {k: v for k, v in options.items() if k in CLIENT_OPTIONS}
    if "bootstrap_servers" not in shared:
        raise KafkaConfigError(f"{owner} needs bootstrap_servers")
    shared["bootstrap_servers"] = parse_bootstrap_servers(shared["bootstrap_servers"])
    try:
        config = ClientConfig(**shared)
    except TypeError as exc:
        raise KafkaConfigError(f"{owner}: {exc}") from None
    return config, {k: v for k, v in options.items() if k in own_names}
