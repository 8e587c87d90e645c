"""The command line's Kerberos (``--sasl-kerberos-*``) and OAuth client-credentials
(``--sasl-oauthbearer-*``) flags: turned into client options and Java properties, and
checked with ``--sasl-mechanism``, ``--security-protocol`` and the ``--config`` file,
so that a flag the login would leave unused is a usage error naming it (pure, apart
from reading the secret's file).

The OAuth flags are Java's ``sasl.oauthbearer.*`` properties given on the command
line: they override the ``--config`` file's one by one, so a shared file can hold the
endpoint and the client id while each user's secret comes from the environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from aiokproto.errors import KafkaConfigError
from aiokproto.oauth.java_config import login_options, split_oauth

#: flag -> (metavar, help); each sets the client option of the same snake_case name
KERBEROS_FLAGS: dict[str, tuple[str, str]] = {
    "--sasl-kerberos-service-name": (
        "NAME",
        "First part of the brokers' principal (kafka for kafka/host@REALM) [default: kafka].",
    ),
    "--sasl-kerberos-domain-name": (
        "HOST",
        "Host part of the brokers' principal, when not the host connected to.",
    ),
    "--sasl-kerberos-keytab": ("FILE", "Log in from this keytab (else: the ticket cache)."),
    "--sasl-kerberos-principal": ("PRINCIPAL", "Who logs in (user@REALM)."),
    "--sasl-kerberos-ccache": ("CACHE", "Ticket cache to use instead of $KRB5CCNAME."),
}

#: flag -> (Java property it stands for, metavar, help)
OAUTH_FLAGS: dict[str, tuple[str, str, str]] = {
    "--sasl-oauthbearer-token-endpoint-url": (
        "sasl.oauthbearer.token.endpoint.url",
        "URL",
        "OAuth token endpoint of the identity provider (client credentials grant).",
    ),
    "--sasl-oauthbearer-client-id": (
        "sasl.oauthbearer.client.credentials.client.id",
        "ID",
        "OAuth client id.",
    ),
    "--sasl-oauthbearer-client-secret-file": (
        "sasl.oauthbearer.client.credentials.client.secret",
        "FILE",
        "File holding the OAuth client secret; or set "
        "AIOKPROTO_SASL_OAUTHBEARER_CLIENT_SECRET (not a flag: ps shows the command line).",
    ),
    "--sasl-oauthbearer-scope": (
        "sasl.oauthbearer.scope",
        "SCOPE",
        "Scope(s) to ask for, space-separated.",
    ),
}

#: the environment variable that holds the OAuth client secret itself
SECRET_ENV = "AIOKPROTO_SASL_OAUTHBEARER_CLIENT_SECRET"
_SECRET_FLAG = "--sasl-oauthbearer-client-secret-file"
_URL_FLAG = "--sasl-oauthbearer-token-endpoint-url"
_ID_FLAG = "--sasl-oauthbearer-client-id"
#: the SASL flags of the shared options that the checks look at too
_USER_FLAGS = ("--sasl-username", "--sasl-password")
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")


class FlagError(ValueError):
    """A flag that cannot be used as given; the message names it (a usage error)."""


def env_name(flag: str) -> str:
    """The environment variable a flag can also be given as (``AIOKPROTO_...``)."""
    return "AIOKPROTO_" + flag.removeprefix("--").replace("-", "_").upper()


def param_name(flag: str) -> str:
    """Click's parameter name for a flag."""
    return flag.removeprefix("--").replace("-", "_")


@dataclass(frozen=True, slots=True)
class SaslFlags:
    """The SASL flags of one command run that were given, by flag name, and which of
    them came from their environment variable (named so in errors)."""

    given: Mapping[str, str] = field(default_factory=dict)
    from_env: frozenset[str] = frozenset()
    #: the value of ``AIOKPROTO_SASL_OAUTHBEARER_CLIENT_SECRET``
    secret: str | None = None

    @classmethod
    def of(
        cls, params: Mapping[str, Any], from_env: frozenset[str], environ: Mapping[str, str]
    ) -> SaslFlags:
        """From Click's parameters (by parameter name), ``from_env`` naming the flags whose
        value came from the environment."""
        flags = [*_USER_FLAGS, *KERBEROS_FLAGS, *OAUTH_FLAGS]
        given = {f: params[param_name(f)] for f in flags if params.get(param_name(f)) is not None}
        return cls(given, from_env & set(given), environ.get(SECRET_ENV) or None)

    def name(self, flag: str) -> str:
        """The flag as the user gave it: ``--x``, or ``AIOKPROTO_X`` from the environment."""
        return f"{env_name(flag)} (--{flag[2:]})" if flag in self.from_env else flag

    @property
    def kerberos(self) -> dict[str, str]:
        """Client options from the Kerberos flags."""
        return {param_name(f): v for f, v in self.given.items() if f in KERBEROS_FLAGS}

    def _oauth_given(self) -> bool:
        return self.secret is not None or any(f in OAUTH_FLAGS for f in self.given)

    def java_properties(self) -> dict[str, str]:
        """The OAuth flags as the Java properties they stand for, the secret read from
        its file or its environment variable."""
        out: dict[str, str] = {}
        for flag, value in self.given.items():
            if flag not in OAUTH_FLAGS:
                continue
            java = OAUTH_FLAGS[flag][0]
            out[java] = _read_secret(self.name(flag), value) if flag == _SECRET_FLAG else value
        if self.secret is not None and _SECRET_FLAG not in self.given:
            out[OAUTH_FLAGS[_SECRET_FLAG][0]] = self.secret
        url = self.given.get(_URL_FLAG)
        if url is not None:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise FlagError(f"{self.name(_URL_FLAG)} must be an http(s) URL, not {url!r}")
        return out

    def check(self, mechanism: str | None, protocol: str | None) -> SaslFlags:
        """The flags that the login ``mechanism`` and ``protocol`` (from the flags, else
        the ``--config`` file) use. A flag on the command line that it would leave
        unused, or an empty one, is a ``FlagError``; one from the environment is left
        out (the environment holds a whole shell's defaults, for other commands too)."""
        for flag, value in self.given.items():
            if not value.strip():
                raise FlagError(f"{self.name(flag)} must not be empty")
        protocol = protocol or "PLAINTEXT"
        now = f"the mechanism is {mechanism}" if mechanism else "no --sasl-mechanism given"
        unused = {f for f in KERBEROS_FLAGS if mechanism != "GSSAPI"}
        unused |= {f for f in OAUTH_FLAGS if mechanism != "OAUTHBEARER"}
        if mechanism in ("GSSAPI", "OAUTHBEARER"):
            unused.update(_USER_FLAGS)
        for flag in self.given:
            if flag not in unused or flag in self.from_env:
                continue
            if flag in _USER_FLAGS:
                how = "a Kerberos ticket or keytab" if mechanism == "GSSAPI" else "an OAuth token"
                raise FlagError(f"{flag} is for PLAIN and SCRAM; {mechanism} logs in with {how}")
            wants = "GSSAPI" if flag in KERBEROS_FLAGS else "OAUTHBEARER"
            raise FlagError(f"{flag} needs --sasl-mechanism {wants} ({now})")
        if mechanism in ("GSSAPI", "OAUTHBEARER") and protocol not in SASL_PROTOCOLS:
            raise FlagError(
                f"--sasl-mechanism {mechanism} needs --security-protocol SASL_PLAINTEXT "
                f"or SASL_SSL (the protocol is {protocol})"
            )
        used = SaslFlags(
            {f: v for f, v in self.given.items() if f not in unused},
            self.from_env - unused,
            self.secret if mechanism == "OAUTHBEARER" else None,
        )
        keytab = used.given.get("--sasl-kerberos-keytab")
        if keytab is not None and not os.path.isfile(keytab.removeprefix("FILE:")):
            raise FlagError(f"{used.name('--sasl-kerberos-keytab')}: no such file: {keytab}")
        return used

    def check_oauth(self, mechanism: str | None, props: Mapping[str, str]) -> None:
        """With OAUTHBEARER, the login that ``props`` (the ``--config`` file's properties
        with the flags' over them) describes is there, and complete when flags gave part
        of it; or a ``FlagError`` names the flag that is missing. Call on the flags
        ``check`` returned."""
        if mechanism != "OAUTHBEARER":
            return
        oauth = split_oauth(props)[1]
        if not oauth:
            raise FlagError(
                f"--sasl-mechanism OAUTHBEARER needs {_URL_FLAG} and {_ID_FLAG} (or the "
                "sasl.oauthbearer.* login in --config)"
            )
        if not self._oauth_given():
            return  # the file's own: map_java names what it lacks by Java name
        try:
            kwargs = login_options(oauth)
        except KafkaConfigError as exc:
            raise FlagError(str(exc)) from None
        if "token_endpoint_url" not in kwargs:
            raise FlagError(
                f"the OAuth login needs {_URL_FLAG} (or sasl.oauthbearer.token.endpoint.url "
                "in --config)"
            )
        if "client_id" not in kwargs:
            raise FlagError(
                f"the OAuth login needs {_ID_FLAG} (or "
                "sasl.oauthbearer.client.credentials.client.id in --config)"
            )
        if "client_secret" not in kwargs and "private_key_file" not in kwargs:
            raise FlagError(
                f"the OAuth login needs the client secret: set {SECRET_ENV} or pass "
                f"{_SECRET_FLAG} FILE"
            )


def _read_secret(name: str, path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            secret = f.read().strip()  # a file written by echo ends with a newline
    except OSError as exc:
        raise FlagError(f"{name}: cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise FlagError(f"{name}: {path} is not UTF-8 text") from None
    if not secret:
        raise FlagError(f"{name}: {path} is empty")
    return secret
