"""Java ``client.properties`` files and their names mapped to aiokproto's options
(``sasl.jaas.config``, PEM stores); unknown names are refused by name (pure).

A Java user's file works as it is: ``bootstrap.servers``, ``security.protocol``,
``sasl.jaas.config`` (PLAIN, SCRAM and OAuthBearer login modules), the OAuth
client-credentials login (``sasl.oauthbearer.*``, ``sasl.login.*``), PEM trust and key
stores, and every client, producer and consumer option whose snake_case name aiokproto has. Any
other name is refused by name: a silently ignored security setting is worse than none.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiokproto.config import CLIENT_OPTIONS
from aiokproto.consumer.consumer_config import CONSUMER_OPTIONS, group_option_names
from aiokproto.errors import KafkaConfigError
from aiokproto.net.kerberos import is_krb5_login_module, krb5_jaas_options
from aiokproto.oauth.java_config import JAVA_NAMES as OAUTH_JAVA_NAMES
from aiokproto.oauth.java_config import from_java_config, split_oauth
from aiokproto.producer.options import PRODUCER_OPTIONS


class PropertiesError(ValueError):
    """A properties file that cannot be used; the message names the line or property."""


def parse_properties(text: str) -> dict[str, str]:
    """``key=value`` / ``key: value`` / ``key value`` lines; ``#`` and ``!`` comments,
    backslash line continuations and the usual escapes, as java.util.Properties reads."""
    out: dict[str, str] = {}
    logical: list[str] = []
    for raw in text.splitlines():
        line = raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        # an odd number of trailing backslashes continues the line
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2:
            logical.append(line[:-1])
            continue
        logical.append(line)
        key, value = _split_entry("".join(logical))
        logical = []
        out[key] = value
    if logical:
        key, value = _split_entry("".join(logical))
        out[key] = value
    return out


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2 : i + 6]):
                out.append(chr(int(text[i + 2 : i + 6], 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _split_entry(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=: \t\f":
            break
        i += 1
    key = line[:i]
    rest = line[i:].lstrip(" \t\f")
    if rest[:1] in ("=", ":") and (i >= len(line) or line[i] in " \t\f=:"):
        rest = rest[1:].lstrip(" \t\f")
    return _unescape(key), _unescape(rest)


# -- Java names to ours -------------------------------------------------------------

#: Java names whose value needs more than a snake_case rename (handled in ``map_java``).
_SPECIAL = frozenset(
    {
        "sasl.jaas.config",
        "ssl.truststore.location",
        "ssl.truststore.type",
        "ssl.keystore.location",
        "ssl.keystore.type",
        "ssl.key.password",
        "ssl.keystore.password",
        "ssl.endpoint.identification.algorithm",
        "group.id",
    }
)

#: Java names that configure Java classes the command line has no use for: its keys and
#: values are bytes. Accepted (a file written for Java tools carries them) and ignored.
_IGNORED = frozenset(
    {"key.serializer", "value.serializer", "key.deserializer", "value.deserializer"}
)

_INT_SUFFIXES = ("_ms", "_bytes", "_size", "_records", "_memory", "_connection")
_INT_NAMES = frozenset({"retries", "max_response_size", "compression_level", "metrics_num_samples"})
_BOOL_NAMES = frozenset(
    {
        "enable_idempotence",
        "enable_auto_commit",
        "check_crcs",
        "allow_auto_create_topics",
        "exclude_internal_topics",
        "ssl_check_hostname",
        "enable_metrics_push",
    }
)
#: options whose value is a Python object (a callable, a context): not settable by text
_OBJECT_NAMES = frozenset(
    {
        "ssl_context",
        "sasl_oauth_token_provider",
        "partitioner",
        "key_serializer",
        "value_serializer",
        "key_deserializer",
        "value_deserializer",
        "partition_assignment_strategy",
    }
)

_JAAS = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


@dataclass(slots=True)
class FileOptions:
    """A properties file turned into aiokproto options, by the client that takes them."""

    client: dict[str, Any] = field(default_factory=dict)
    producer: dict[str, Any] = field(default_factory=dict)
    consumer: dict[str, Any] = field(default_factory=dict)


def _typed(name: str, java: str, value: str) -> Any:
    if name in _BOOL_NAMES:
        low = value.strip().lower()
        if low not in ("true", "false"):
            raise PropertiesError(f"{java}: expected true or false, not {value!r}")
        return low == "true"
    if name in _INT_NAMES or name.endswith(_INT_SUFFIXES):
        try:
            return int(value.strip())
        except ValueError:
            raise PropertiesError(f"{java}: expected a whole number, not {value!r}") from None
    return value.strip()


def _jaas(value: str) -> tuple[str, str]:
    """Username and password of a PLAIN or SCRAM login module line."""
    module = value.split(None, 1)[0] if value.strip() else ""
    if not module.endswith(("PlainLoginModule", "ScramLoginModule")):
        raise PropertiesError(
            f"sasl.jaas.config: only PlainLoginModule and ScramLoginModule are supported, "
            f"not {module or 'an empty value'!r}"
        )
    fields_ = {k: v.replace('\\"', '"') for k, v in _JAAS.findall(value)}
    if "username" not in fields_ or "password" not in fields_:
        raise PropertiesError('sasl.jaas.config needs username="..." and password="..."')
    return fields_["username"], fields_["password"]


def map_java(props: Mapping[str, str]) -> FileOptions:
    """Java client property names and values into aiokproto options.

    Raises ``PropertiesError`` naming every property aiokproto does not know.
    """
    out = FileOptions()
    props, oauth = split_oauth(props)  # the OAuth login (KIP-768), read as a whole
    if oauth:
        try:
            out.client["sasl_oauth_token_provider"] = from_java_config(oauth)
        except KafkaConfigError as exc:
            raise PropertiesError(str(exc)) from None
    group_names = group_option_names()
    unknown: list[str] = []
    for java, value in props.items():
        if java in _IGNORED:
            continue
        if java in _SPECIAL:
            continue  # below, where related properties are read together
        name = java.replace(".", "_").replace("-", "_")
        if name in _OBJECT_NAMES or java != java.lower():
            unknown.append(java)
        elif name in CLIENT_OPTIONS:
            out.client[name] = _typed(name, java, value)
        elif name in PRODUCER_OPTIONS:
            out.producer[name] = _typed(name, java, value)
        elif name in CONSUMER_OPTIONS or name in group_names:
            out.consumer[name] = _typed(name, java, value)
        else:
            unknown.append(java)
    if unknown:
        raise PropertiesError(f"unknown property: {', '.join(sorted(unknown))}")
    if "group.id" in props:
        out.consumer["group_id"] = props["group.id"].strip()
    if "sasl.jaas.config" in props and is_krb5_login_module(props["sasl.jaas.config"]):
        try:
            service = props.get("sasl.kerberos.service.name")
            out.client.update(krb5_jaas_options(props["sasl.jaas.config"], service))
        except ValueError as exc:
            raise PropertiesError(f"sasl.jaas.config: {exc}") from None
    elif "sasl.jaas.config" in props:
        user, password = _jaas(props["sasl.jaas.config"])
        out.client["sasl_plain_username"] = user
        out.client["sasl_plain_password"] = password
    for kind, target in (("truststore", "ssl_cafile"), ("keystore", "ssl_certfile")):
        location = props.get(f"ssl.{kind}.location")
        if location is None:
            continue
        store_type = props.get(f"ssl.{kind}.type", "JKS").strip().upper()
        if store_type != "PEM":
            raise PropertiesError(
                f"ssl.{kind}.location: only PEM files are supported (ssl.{kind}.type=PEM); "
                f"convert the {store_type} store with keytool/openssl"
            )
        out.client[target] = location.strip()
        if kind == "keystore":
            out.client["ssl_keyfile"] = location.strip()  # a PEM key store holds both
    key_password = props.get("ssl.key.password") or props.get("ssl.keystore.password")
    if key_password is not None:
        out.client["ssl_password"] = key_password
    algorithm = props.get("ssl.endpoint.identification.algorithm")
    if algorithm is not None:
        out.client["ssl_check_hostname"] = algorithm.strip().lower() == "https"
    return out


def read_properties(path: str) -> dict[str, str]:
    """A properties file's entries; ``PropertiesError`` if it cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise PropertiesError(f"cannot read config file {path!r}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise PropertiesError(f"config file {path!r} is not UTF-8 text") from None
    return parse_properties(text)


def load_properties(path: str) -> FileOptions:
    """Read and map a properties file; ``PropertiesError`` says what is wrong with it."""
    props = read_properties(path)
    try:
        return map_java(props)
    except PropertiesError as exc:
        raise PropertiesError(f"{path}: {exc}") from None


def known_java_names() -> Iterable[str]:
    """Every Java name ``map_java`` accepts (for help texts and tests)."""
    own = CLIENT_OPTIONS | PRODUCER_OPTIONS | CONSUMER_OPTIONS | group_option_names()
    plain = {n.replace("_", ".") for n in own if n not in _OBJECT_NAMES}
    return sorted(plain | _SPECIAL | _IGNORED | OAUTH_JAVA_NAMES)
