"""Security settings: which protocol, TLS context, SASL credentials."""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field

from aiokproto.errors import KafkaConfigError
from aiokproto.net.sasl import (
    MECHANISMS,
    OAuthBearerMechanism,
    PlainMechanism,
    SaslMechanism,
    ScramMechanism,
    TokenProvider,
)

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

    def __post_init__(self) -> None:
        if self.security_protocol not in SECURITY_PROTOCOLS:
            raise KafkaConfigError(
                f"security_protocol must be one of {', '.join(SECURITY_PROTOCOLS)}, "
                f"not {self.security_protocol!r}"
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
            elif self.sasl_plain_username is None or self.sasl_plain_password is None:
                raise KafkaConfigError(
                    f"{self.sasl_mechanism} needs sasl_plain_username and sasl_plain_password"
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
            raise KafkaConfigError(f"cannot build the TLS context: {exc}") from exc
        return ctx

    async def new_mechanism(self) -> SaslMechanism:
        """A fresh mechanism for one authentication exchange."""
        name = self.sasl_mechanism
        if name == "OAUTHBEARER":
            assert self.sasl_oauth_token_provider is not None
            return OAuthBearerMechanism(await self.sasl_oauth_token_provider())
        assert self.sasl_plain_username is not None and self.sasl_plain_password is not None
        if name == "PLAIN":
            return PlainMechanism(self.sasl_plain_username, self.sasl_plain_password)
        return ScramMechanism(name, self.sasl_plain_username, self.sasl_plain_password)
