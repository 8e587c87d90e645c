"""Security settings (``SecurityConfig``): which protocol, TLS context, SASL credentials
and the mechanism factory."""

from __future__ import annotations

import inspect
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from aiokproto.errors import KafkaAuthenticationError, KafkaConfigError, KafkaError
from aiokproto.net.sasl import (
    MECHANISMS,
    OAuthBearerMechanism,
    PlainMechanism,
    SaslMechanism,
    ScramMechanism,
    TokenProvider,
)

if TYPE_CHECKING:
    from aiokproto.net.kerberos import KerberosSettings

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True, slots=True)
class SecurityConfig:
    """How to secure connections. Secrets never appear in ``repr``."""

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

    def __post_init__(self) -> None:
        provider = self.sasl_oauth_token_provider
        if (
            provider is not None
            and not callable(getattr(provider, "token", None))
            and not callable(provider)
        ):
            raise KafkaConfigError(
                "sasl_oauth_token_provider must be an async function returning the "
                "token, or an object with an async token() method (aiokafka's "
                f"AbstractTokenProvider), not {type(provider).__name__}"
            )
        if self.ssl_context is not None and not isinstance(self.ssl_context, ssl.SSLContext):
            raise KafkaConfigError(
                "ssl_context must be an ssl.SSLContext (see aiokproto.helpers."
                f"create_ssl_context), not {type(self.ssl_context).__name__}"
            )
        if not isinstance(self.ssl_check_hostname, bool):
            raise KafkaConfigError(
                f"ssl_check_hostname must be a bool, not {self.ssl_check_hostname!r}"
            )
        if self.security_protocol not in SECURITY_PROTOCOLS:
            raise KafkaConfigError(
                f"security_protocol must be one of {', '.join(SECURITY_PROTOCOLS)}, "
                f"not {self.security_protocol!r}"
            )
        if self.sasl_mechanism == "GSSAPI" and not self.uses_sasl:
            # a choice PLAIN's default cannot express: without SASL the client would
            # connect unauthenticated, the Kerberos options silently unused
            raise KafkaConfigError(
                'sasl_mechanism="GSSAPI" needs security_protocol SASL_PLAINTEXT or '
                f'SASL_SSL, not "{self.security_protocol}"'
            )
        if self.uses_sasl:
            if self.sasl_mechanism not in MECHANISMS:
                raise KafkaConfigError(
                    f"sasl_mechanism must be one of {', '.join(MECHANISMS)}, "
                    f"not {self.sasl_mechanism!r}"
                )
            if self.sasl_mechanism == "OAUTHBEARER":
                if self.sasl_oauth_token_provider is None:
                    raise KafkaConfigError("OAUTHBEARER needs sasl_oauth_token_provider")
            elif self.sasl_mechanism == "GSSAPI":
                from aiokproto.net.kerberos import load_gssapi

                # fail at construction: bad options, no gssapi (the install line)
                self.kerberos.check_library(load_gssapi())
            elif self.sasl_plain_username is None or self.sasl_plain_password is None:
                raise KafkaConfigError(
                    f"{self.sasl_mechanism} needs sasl_plain_username and sasl_plain_password"
                )

    @property
    def kerberos(self) -> KerberosSettings:
        # Kerberos (and its thread pool, hashlib) is imported by GSSAPI users only
        from aiokproto.net.kerberos import KerberosSettings

        return KerberosSettings(
            service_name=self.sasl_kerberos_service_name,
            domain_name=self.sasl_kerberos_domain_name,
            keytab=self.sasl_kerberos_keytab,
            principal=self.sasl_kerberos_principal,
            ccache=self.sasl_kerberos_ccache,
        )

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def build_ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context for connections, or None for plaintext protocols."""
        if not self.uses_tls:
            return None
        if self.ssl_context is not None:
            return self.ssl_context
        try:
            ctx = ssl.create_default_context(cafile=self.ssl_cafile)
            ctx.check_hostname = self.ssl_check_hostname
            if self.ssl_certfile:
                ctx.load_cert_chain(self.ssl_certfile, self.ssl_keyfile, self.ssl_password)
        except (OSError, ssl.SSLError) as exc:
            files = ", ".join(
                f"{name}={getattr(self, name)!r}"
                for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile")
                if getattr(self, name) is not None
            )
            source = f" from {files}" if files else ""
            raise KafkaConfigError(f"cannot build the TLS context{source}: {exc}") from exc
        return ctx

    def login_trouble(self) -> str | None:
        """What the OAuth token provider's last failed attempt said, while it retries
        (aiokproto.oauth's providers keep it as ``last_failure``; others may too)."""
        if self.sasl_mechanism != "OAUTHBEARER":
            return None
        failure = getattr(self.sasl_oauth_token_provider, "last_failure", None)
        return str(failure) if isinstance(failure, BaseException) else None

    async def new_mechanism(self, host: str = "") -> SaslMechanism:
        """A fresh mechanism for one authentication exchange with ``host``."""
        name = self.sasl_mechanism
        if name == "GSSAPI":
            from aiokproto.net.kerberos import start_exchange

            return await start_exchange(self.kerberos, host)
        if name == "OAUTHBEARER":
            assert self.sasl_oauth_token_provider is not None
            return await _oauth_mechanism(self.sasl_oauth_token_provider)
        assert self.sasl_plain_username is not None and self.sasl_plain_password is not None
        if name == "PLAIN":
            return PlainMechanism(self.sasl_plain_username, self.sasl_plain_password)
        return ScramMechanism(name, self.sasl_plain_username, self.sasl_plain_password)


async def _oauth_mechanism(provider: TokenProvider) -> OAuthBearerMechanism:
    """Ask the provider for a token (and, aiokafka-style, for extensions).

    An exception from the provider is a ``KafkaAuthenticationError`` with it as
    ``__cause__`` (a ``KafkaError`` it raises itself goes through as it is).
    """
    extensions: object = None
    try:
        token_method = getattr(provider, "token", None)
        if callable(token_method):
            # An object with token() (aiokafka's AbstractTokenProvider), checked first:
            # such an object may also be callable for reasons of its own.
            token: object = await _maybe_await(token_method())
            more = getattr(provider, "extensions", None)
            if callable(more):
                extensions = await _maybe_await(more())
        else:
            assert callable(provider)
            token = await _maybe_await(provider())  # a plain function works too
    except KafkaError:
        raise
    except Exception as exc:
        raise KafkaAuthenticationError(
            f"OAUTHBEARER: sasl_oauth_token_provider raised {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(token, str) or not token:
        raise KafkaAuthenticationError(
            f"OAUTHBEARER: sasl_oauth_token_provider returned {type(token).__name__}, "
            "not a non-empty str token"
        )
    describe = getattr(provider, "describe", None)  # aiokproto.oauth's providers have it
    hint = describe() if callable(describe) else ""
    return OAuthBearerMechanism(
        token, _extensions(extensions), hint if isinstance(hint, str) else ""
    )


async def _maybe_await(value: object) -> object:
    return await value if inspect.isawaitable(value) else value


def _extensions(value: object) -> dict[str, str]:
    """SASL extensions checked as RFC 7628 section 3.1 defines keys and values."""
    if not value:
        return {}
    if not isinstance(value, Mapping):
        raise KafkaAuthenticationError(
            f"OAUTHBEARER: extensions() returned {type(value).__name__}, not a dict"
        )
    out: dict[str, str] = {}
    for key, val in value.items():
        if not isinstance(key, str) or not key.isascii() or not key.isalpha() or key == "auth":
            raise KafkaAuthenticationError(
                f"OAUTHBEARER: extension name {key!r} must be ASCII letters and not 'auth'"
            )
        if not isinstance(val, str) or "\x01" in val:
            raise KafkaAuthenticationError(
                f"OAUTHBEARER: extension {key!r} must be a str without \\x01"
            )
        out[key] = val
    return out
