"""``kafka.*`` Spark options -> aiokproto client keyword options: ``kafka.<java.name>``
to snake_case, typed, Java-only forms translated, unknown or refused options rejected.

Spark's Kafka connector passes ``kafka.<java.config.name>`` to the Java client. We map
the dotted Java names to aiokproto's snake_case options, convert the string values
to the option's type, and reject what aiokproto does not know with an error that
names the option (a typo must not be ignored silently). A few Java-only forms are
translated: ``sasl.jaas.config`` (username/password of the PLAIN and SCRAM login
modules), PEM trust/key stores and ``ssl.endpoint.identification.algorithm``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any, Literal

from aiokproto.config import ClientConfig, split_options
from aiokproto.errors import KafkaConfigError
from aiokproto.net.kerberos import is_krb5_login_module, krb5_jaas_options
from aiokproto.oauth.java_config import from_java_config, split_oauth

Role = Literal["consumer", "producer"]
Converter = Callable[[str, str], Any]  # (option name, text) -> value


def _int(name: str, text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise KafkaConfigError(f"option {name} must be an integer, not {text!r}") from None


def _bool(name: str, text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "false"):
        return value == "true"
    raise KafkaConfigError(f"option {name} must be true or false, not {text!r}")


def _str(name: str, text: str) -> str:
    return text


def _upper(name: str, text: str) -> str:
    return text.strip().upper()


def _acks(name: str, text: str) -> int | str:
    value = text.strip().lower()
    if value == "all":
        return "all"
    return _int(name, value)


def _isolation(name: str, text: str) -> str:
    value = text.strip().lower()
    if value not in ("read_committed", "read_uncommitted"):
        raise KafkaConfigError(
            f"option {name} must be read_committed or read_uncommitted, not {text!r}"
        )
    return value


_BY_ANNOTATION: dict[str, Converter] = {"int": _int, "bool": _bool, "str": _str, "str | None": _str}
# The shared options that can be given as text (an SSLContext or a token provider cannot).
SHARED: dict[str, Converter] = {
    f.name: _BY_ANNOTATION[str(f.type)]
    for f in fields(ClientConfig)
    if str(f.type) in _BY_ANNOTATION and f.name != "bootstrap_servers"
}
SHARED["security_protocol"] = _upper
SHARED["sasl_mechanism"] = _upper

# Each role's own options that make sense under Spark (the source never uses a group).
OWN: dict[Role, dict[str, Converter]] = {
    "consumer": {
        "fetch_min_bytes": _int,
        "fetch_max_bytes": _int,
        "fetch_max_wait_ms": _int,
        "max_partition_fetch_bytes": _int,
        "fetch_buffer_max_bytes": _int,
        "isolation_level": _isolation,
        "check_crcs": _bool,
        "client_rack": _str,
    },
    "producer": {
        "acks": _acks,
        "linger_ms": _int,
        "batch_size": _int,
        "compression_type": _str,
        "compression_level": _int,
        "enable_idempotence": _bool,
        "max_request_size": _int,
        "buffer_memory": _int,
        "delivery_timeout_ms": _int,
        "max_block_ms": _int,
        "retries": _int,
    },
}

# Java options Spark's connector itself refuses, with the reason users get there too.
REFUSED: dict[Role, dict[str, str]] = {
    "consumer": {
        "group.id": "the aiokproto source reads without a consumer group; "
        "offsets live in the Spark checkpoint",
        "auto.offset.reset": "use the startingOffsets option instead",
        "key.deserializer": "keys are always binary; cast or transform the DataFrame",
        "value.deserializer": "values are always binary; cast or transform the DataFrame",
        "enable.auto.commit": "the source never commits offsets to Kafka",
        "interceptor.classes": "interceptors are a Java client feature",
    },
    "producer": {
        "key.serializer": "keys are written as binary; cast the key column to binary or string",
        "value.serializer": "values are written as binary; cast the value column",
        "interceptor.classes": "interceptors are a Java client feature",
        "transactional.id": "every task needs its own transactional id: give the sink "
        "option transactional.id.prefix (each task uses <prefix>-<partition id>)",
    },
}

# key="value" | key='value' | key=value, values may contain backslash escapes
_JAAS_PAIR = re.compile(
    r"""(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)'|(\S+?))(?=\s|;|$)"""
)
_JAAS_MODULES = ("PlainLoginModule", "ScramLoginModule")


def parse_jaas_config(text: str) -> tuple[str, str]:
    """``... PlainLoginModule required username="u" password="p";`` -> ("u", "p")."""
    if not any(module in text for module in _JAAS_MODULES):
        raise KafkaConfigError(
            "kafka.sasl.jaas.config: only the PlainLoginModule and ScramLoginModule "
            "username/password forms and the OAuthBearerLoginModule with clientId and "
            "clientSecret (or kafka.sasl.oauthbearer.* options) are understood"
        )
    values: dict[str, str] = {}
    for match in _JAAS_PAIR.finditer(text):
        raw = next(g for g in match.groups()[1:] if g is not None)
        values[match.group(1)] = re.sub(r"\\(.)", r"\1", raw)
    if "username" not in values or "password" not in values:
        raise KafkaConfigError('kafka.sasl.jaas.config needs username="..." and password="..."')
    return values["username"], values["password"]


def _translate_java(
    java: Mapping[str, str],
) -> tuple[dict[str, str], dict[str, Any]]:
    """Handle the Java-only forms; return (the rest, options already converted)."""
    rest, oauth = split_oauth(java)
    out: dict[str, Any] = {}
    if oauth:  # KIP-768's client-credentials login: a token provider of our own
        out["sasl_oauth_token_provider"] = from_java_config(oauth, prefix="kafka.")
    if "sasl.jaas.config" in rest and is_krb5_login_module(rest["sasl.jaas.config"]):
        try:
            jaas = rest.pop("sasl.jaas.config")
            out.update(krb5_jaas_options(jaas, rest.get("sasl.kerberos.service.name")))
        except ValueError as exc:
            raise KafkaConfigError(f"kafka.sasl.jaas.config: {exc}") from None
    elif "sasl.jaas.config" in rest:
        out["sasl_plain_username"], out["sasl_plain_password"] = parse_jaas_config(
            rest.pop("sasl.jaas.config")
        )
    for store, target in (("truststore", "ssl_cafile"), ("keystore", "ssl_certfile")):
        store_type = rest.pop(f"ssl.{store}.type", None)
        location = rest.pop(f"ssl.{store}.location", None)
        if location is None:
            continue
        if (store_type or "").strip().upper() != "PEM":
            raise KafkaConfigError(
                f"kafka.ssl.{store}.location: aiokproto reads PEM files only; set "
                f"kafka.ssl.{store}.type=PEM (convert JKS/PKCS12 with keytool/openssl), or use "
                f"kafka.{target.replace('_', '.')}"
            )
        out[target] = location
    if "ssl.key.password" in rest:
        out["ssl_password"] = rest.pop("ssl.key.password")
    if "ssl.endpoint.identification.algorithm" in rest:
        algorithm = rest.pop("ssl.endpoint.identification.algorithm").strip().lower()
        if algorithm not in ("", "https"):
            raise KafkaConfigError(
                "kafka.ssl.endpoint.identification.algorithm must be https or empty, "
                f"not {algorithm!r}"
            )
        out["ssl_check_hostname"] = algorithm == "https"
    return rest, out


def client_options(options: Mapping[str, str], role: Role) -> dict[str, Any]:
    """The aiokproto keyword options for ``role`` from Spark options (keys lower-case).

    Only ``kafka.``-prefixed keys are looked at; ``kafka.bootstrap.servers`` is
    required. The result is validated as a ``ClientConfig`` before it is returned.
    """
    java = {k[len("kafka.") :]: v for k, v in options.items() if k.startswith("kafka.")}
    for name, reason in REFUSED[role].items():
        if name in java:
            raise KafkaConfigError(f"option kafka.{name} is not supported: {reason}")
    if not java.get("bootstrap.servers", "").strip():
        raise KafkaConfigError("option kafka.bootstrap.servers is required (host:port,...)")
    rest, out = _translate_java(java)
    out["bootstrap_servers"] = rest.pop("bootstrap.servers")
    own = OWN[role]
    unknown: list[str] = []
    for java_name, text in rest.items():
        name = java_name.replace(".", "_").replace("-", "_")
        convert = SHARED.get(name) or own.get(name)
        if convert is None:
            unknown.append(f"kafka.{java_name}")
            continue
        out[name] = convert(f"kafka.{java_name}", text)
    if unknown:
        raise KafkaConfigError(
            f"unknown Kafka option(s) for the aiokproto {role}: {', '.join(sorted(unknown))}"
        )
    split_options(out, own, f"aiokproto Spark {role}")  # validates types and security
    return out


def shared_only(options: Mapping[str, Any]) -> dict[str, Any]:
    """The subset of converted options every client (Admin included) takes."""
    # the converted Java-only forms (the OAuth login's provider) are client-wide too
    own = ("bootstrap_servers", "sasl_oauth_token_provider")
    return {k: v for k, v in options.items() if k in SHARED or k in own}
