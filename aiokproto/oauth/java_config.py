"""Java's client settings for the OAuth login (KIP-768: ``sasl.oauthbearer.*``,
``sasl.login.*``, an ``OAuthBearerLoginModule`` in ``sasl.jaas.config``) read into an
``OAuthClientCredentials``: the CLI's ``--config`` file and the Spark source's
``kafka.`` options both go through here (pure, apart from building the provider)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Any

from aiokproto.errors import KafkaConfigError

#: Java name -> OAuthClientCredentials keyword, and how its text is read
_NAMES: dict[str, tuple[str, str]] = {
    "sasl.oauthbearer.token.endpoint.url": ("token_endpoint_url", "str"),
    "sasl.oauthbearer.client.credentials.client.id": ("client_id", "str"),
    "sasl.oauthbearer.client.credentials.client.secret": ("client_secret", "str"),
    "sasl.oauthbearer.scope": ("scope", "str"),
    "sasl.oauthbearer.assertion.private.key.file": ("private_key_file", "str"),
    "sasl.oauthbearer.assertion.private.key.passphrase": ("private_key_passphrase", "str"),
    "sasl.oauthbearer.assertion.algorithm": ("assertion_algorithm", "str"),
    "sasl.oauthbearer.assertion.claim.aud": ("assertion_audience", "str"),
    "sasl.oauthbearer.assertion.claim.exp.seconds": ("assertion_lifetime_s", "int"),
    "sasl.oauthbearer.header.urlencode": ("header_urlencode", "bool"),
    "sasl.login.connect.timeout.ms": ("connect_timeout_ms", "int"),
    "sasl.login.read.timeout.ms": ("read_timeout_ms", "int"),
    "sasl.login.retry.backoff.ms": ("retry_backoff_ms", "int"),
    "sasl.login.retry.backoff.max.ms": ("retry_backoff_max_ms", "int"),
    "sasl.login.refresh.window.factor": ("refresh_window_factor", "float"),
    "sasl.login.refresh.window.jitter": ("refresh_window_jitter", "float"),
    "sasl.login.refresh.min.period.seconds": ("refresh_min_period_s", "float"),
    "sasl.login.refresh.buffer.seconds": ("refresh_buffer_s", "float"),
}
#: Java's login handler class: naming it is how Java turns the OIDC login on
_HANDLER_NAME = "sasl.login.callback.handler.class"
_HANDLER_CLASS = "OAuthBearerLoginCallbackHandler"
_LOGIN_MODULE = "OAuthBearerLoginModule"
#: Kafka 4.1+ picks the grant by class (KIP-1139): these two are the client credentials one
_RETRIEVER_NAME = "sasl.oauthbearer.jwt.retriever.class"
_RETRIEVER_CLASSES = ("ClientCredentialsJwtRetriever", "DefaultJwtRetriever")
_PREFIX = "sasl.oauthbearer."
JAVA_NAMES = frozenset({*_NAMES, _HANDLER_NAME, _RETRIEVER_NAME})
"""Every Java name this module reads (besides an OAuth ``sasl.jaas.config``)."""

# key="value" | key='value' | key=value inside a JAAS line
_JAAS_PAIR = re.compile(r"""(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)'|([^\s;]+))""")
# the JAAS options of Java's OAuthBearerLoginModule that predate the 4.x property names
_JAAS_OPTIONS = {"clientId": "client_id", "clientSecret": "client_secret", "scope": "scope"}


def is_oauth_jaas(value: str) -> bool:
    """Whether a ``sasl.jaas.config`` value is an ``OAuthBearerLoginModule`` line."""
    words = value.split(None, 1)
    return bool(words) and words[0].endswith(_LOGIN_MODULE)


def split_oauth(props: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(the other properties, the OAuth login's), by Java name."""
    rest: dict[str, str] = {}
    oauth: dict[str, str] = {}
    for name, value in props.items():
        if (
            name in JAVA_NAMES
            or name.startswith(_PREFIX)  # a misspelt one is named by provider_options
            or (name == "sasl.jaas.config" and is_oauth_jaas(value))
        ):
            oauth[name] = value
        else:
            rest[name] = value
    return rest, oauth


def _jaas_options(value: str) -> dict[str, str]:
    options: dict[str, str] = {}
    for match in _JAAS_PAIR.finditer(value.split(None, 1)[1] if " " in value.strip() else ""):
        raw = next(g for g in match.groups()[1:] if g is not None)
        options[match.group(1)] = re.sub(r"\\(.)", r"\1", raw)
    return options


def provider_options(props: Mapping[str, str], prefix: str = "") -> dict[str, Any]:
    """``OAuthClientCredentials`` keywords from the OAuth properties (``split_oauth``'s
    second half); ``prefix`` is put before names in errors (``kafka.`` for Spark).
    Empty when none is set."""
    kwargs = login_options(props, prefix)
    if not props:
        return kwargs
    if "token_endpoint_url" not in kwargs:
        raise KafkaConfigError(
            f"the OAuth login needs {prefix}sasl.oauthbearer.token.endpoint.url (given: "
            f"{', '.join(prefix + k for k in sorted(props))})"
        )
    if "client_id" not in kwargs:
        raise KafkaConfigError(
            f"the OAuth login needs {prefix}sasl.oauthbearer.client.credentials.client.id "
            'or clientId="..." in an OAuthBearerLoginModule sasl.jaas.config'
        )
    return kwargs


def login_options(props: Mapping[str, str], prefix: str = "") -> dict[str, Any]:
    """The ``OAuthClientCredentials`` keywords the OAuth properties set, checked one by
    one but not for completeness (the CLI names its own flags for what is missing)."""
    if not props:
        return {}
    strange = sorted(set(props) - JAVA_NAMES - {"sasl.jaas.config"})
    if strange:  # before "needs ...url": a misspelt url is the likely cause of that
        named = [(name, _did_you_mean(name)) for name in strange]
        raise KafkaConfigError(
            "unknown OAuth client setting(s): "
            + ", ".join(prefix + name + hint for name, hint in named)
            + ("" if all(hint for _, hint in named) else " (a broker's setting, or unsupported)")
        )
    kwargs: dict[str, Any] = {}
    extensions: dict[str, str] = {}
    jaas = props.get("sasl.jaas.config")
    if jaas is not None:
        for key, text in _jaas_options(jaas).items():
            if key in _JAAS_OPTIONS:
                kwargs[_JAAS_OPTIONS[key]] = text
            elif key.startswith("extension_"):
                extensions[key[len("extension_") :]] = text
            elif key != "unsecuredLoginStringClaim_sub":
                raise KafkaConfigError(
                    f"{prefix}sasl.jaas.config: OAuthBearerLoginModule option {key!r} is not "
                    f"supported (clientId, clientSecret, scope and extension_<name> are)"
                )
    handler = props.get(_HANDLER_NAME)
    if handler is not None and not handler.strip().endswith(_HANDLER_CLASS):
        raise KafkaConfigError(
            f"{prefix}{_HANDLER_NAME}: only Java's {_HANDLER_CLASS} (the OIDC client "
            f"credentials login) has an aiokproto equivalent, not {handler.strip()!r}"
        )
    retriever = props.get(_RETRIEVER_NAME)
    if retriever is not None and not retriever.strip().endswith(_RETRIEVER_CLASSES):
        raise KafkaConfigError(
            f"{prefix}{_RETRIEVER_NAME}: only the client credentials grant "
            f"({' or '.join(_RETRIEVER_CLASSES)}) has an aiokproto equivalent, not "
            f"{retriever.strip()!r}"
        )
    for java, text in props.items():
        if java not in _NAMES:
            continue
        keyword, kind = _NAMES[java]
        kwargs[keyword] = _read(f"{prefix}{java}", text, kind)
    if extensions:
        kwargs["extensions"] = extensions
    return kwargs


def _did_you_mean(name: str) -> str:
    close = difflib.get_close_matches(name, sorted(_NAMES), n=1, cutoff=0.8)
    return f" (did you mean {close[0]}?)" if close else ""


def _read(name: str, text: str, kind: str) -> object:
    text = text.strip()
    if kind == "bool":
        if text.lower() not in ("true", "false"):
            raise KafkaConfigError(f"{name}: expected true or false, not {text!r}")
        return text.lower() == "true"
    try:
        if kind == "int":
            return int(text)
        if kind == "float":
            return float(text)
    except ValueError:
        raise KafkaConfigError(f"{name}: expected a number, not {text!r}") from None
    return text


def from_java_config(props: Mapping[str, str], prefix: str = "") -> Any:
    """An ``OAuthClientCredentials`` from Java-named properties (others are ignored),
    or None when none of the OAuth login's is set."""
    _, oauth = split_oauth(props)
    kwargs = provider_options(oauth, prefix)
    if not kwargs:
        return None
    from aiokproto.oauth.provider import OAuthClientCredentials

    return OAuthClientCredentials(**kwargs)
