"""Kafka's JSON message specs as a small object model, and the 4.4.0 + 3.9.1 merge.

Every version range in a spec ("0+", "3-7", "5", "none") is turned into an explicit
``frozenset`` of versions, clipped to the message's valid versions, so the merge and the
code generator only ever work with plain sets.

Merge rule (see ``merge``): the newest spec is the truth for every version it lists;
versions only the older spec lists (Kafka 4.0 dropped them, KIP-896) are taken from the
older spec. Fields are matched by name; a field's version sets are the union of what
each source says for the versions it owns; the field order is a merge of both orders
in which each source's order survives as a subsequence, so every version lays out its
fields exactly as its source spec does. ``layout`` computes that per-version wire
layout; the tests check it against the sources for every message and version.

What is generated (see ``client_messages``): the APIs a client sends, i.e. those the
newest spec lists for the ``broker`` listener less the broker-to-broker ones named in
``INTER_BROKER``, both their request and response, plus the headers and the data specs
in ``CLIENT_DATA``. ``load_merged`` keeps every spec (the merge is tested on all).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

PRIMITIVES = frozenset(
    {
        "bool",
        "int8",
        "int16",
        "uint16",
        "int32",
        "uint32",
        "int64",
        "float64",
        "string",
        "bytes",
        "uuid",
        "records",
    }
)

# The two spec sets merged (``tools/codegen/specs/<version>``, each the
# ``common/message/*.json`` of that release's kafka-clients jar, verbatim): the newest
# release, and the last 3.x for the versions Kafka 4.0 removed (KIP-896).
NEWEST = "4.4.0"
OLDEST = "3.9.1"

_COMMENT = re.compile(r"^\s*//.*$", re.M)


def load_json(path: Path) -> dict[str, object]:
    """A spec file: JSON with whole-line ``//`` comments."""
    data = json.loads(_COMMENT.sub("", path.read_text(encoding="utf-8")))
    assert isinstance(data, dict)
    return data


def parse_versions(text: str | None, valid: frozenset[int]) -> frozenset[int]:
    """``"0+"``, ``"3-7"``, ``"5"`` or ``"none"``, clipped to ``valid``."""
    if text is None or text == "none":
        return frozenset()
    top = max(valid, default=-1)
    if text.endswith("+"):
        lo, hi = int(text[:-1]), max(top, int(text[:-1]))
    elif "-" in text:
        a, b = text.split("-")
        lo, hi = int(a), int(b)
    else:
        lo = hi = int(text)
    return frozenset(v for v in range(lo, hi + 1) if v in valid)


@dataclass
class FieldSpec:
    name: str
    type: str  # as in the spec: "int32", "[]string", "[]Topic", "Cursor"
    versions: frozenset[int]
    nullable: frozenset[int] = frozenset()
    tagged: frozenset[int] = frozenset()
    tag: int | None = None
    default: str | None = None
    ignorable: bool = False
    # field-level "flexibleVersions" override (RequestHeader.ClientId: "none")
    flexible: frozenset[int] | None = None
    about: str = ""
    fields: list[FieldSpec] | None = None  # struct fields for struct / []struct types

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def elem(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return self.elem not in PRIMITIVES


@dataclass
class MessageSpec:
    name: str
    kind: str  # request | response | data | header
    api_key: int | None
    versions: frozenset[int]
    flexible: frozenset[int]
    fields: list[FieldSpec]
    # which source spec (NEWEST / OLDEST) describes each version
    source: dict[int, str] = field(default_factory=dict)
    # first version marked unstable ("latestVersionUnstable"), if any
    unstable_from: int | None = None
    # responses with ThrottleTimeMs: first version whose broker answers at once and
    # leaves the throttling to the client (KIP-219); None when there is no such field
    client_throttle_from: int | None = None
    # the newest spec's "listeners": which broker listeners serve the API (requests
    # and responses; empty for data/header specs and ZooKeeper-era APIs)
    listeners: frozenset[str] = frozenset()


def _parse_fields(
    raw: list[dict[str, object]],
    valid: frozenset[int],
    common: dict[str, list[dict[str, object]]],
    seen: dict[str, list[dict[str, object]]],
) -> list[FieldSpec]:
    out = []
    for f in raw:
        ftype = str(f["type"])
        elem = ftype[2:] if ftype.startswith("[]") else ftype
        sub: list[FieldSpec] | None = None
        if elem not in PRIMITIVES:
            body = f.get("fields")
            if body is None:
                body = common.get(elem) or seen.get(elem)
                if body is None:
                    raise ValueError(f"unknown struct type {elem!r}")
            else:
                seen[elem] = body  # type: ignore[assignment]
            sub = _parse_fields(body, valid, common, seen)  # type: ignore[arg-type]
        out.append(
            FieldSpec(
                name=str(f["name"]),
                type=ftype,
                versions=parse_versions(str(f["versions"]), valid),
                nullable=parse_versions(f.get("nullableVersions"), valid),  # type: ignore[arg-type]
                tagged=parse_versions(f.get("taggedVersions"), valid),  # type: ignore[arg-type]
                tag=int(f["tag"]) if "tag" in f else None,  # type: ignore[call-overload]
                default=None if "default" not in f else str(f["default"]),
                ignorable=bool(f.get("ignorable", False)),
                flexible=(
                    parse_versions(f["flexibleVersions"], valid)  # type: ignore[arg-type]
                    if "flexibleVersions" in f
                    else None
                ),
                about=str(f.get("about", "")),
                fields=sub,
            )
        )
    return out


# Most specs say in a comment where KIP-219 starts for their response; Produce does not
# (it is v6, per KIP-219). Responses that say nothing are throttled by the broker, which
# mutes the connection itself, so the client must not wait a second time.
_KIP219 = re.compile(r"Starting in version (\d+), on quota violation,? brokers send out")
_KIP219_UNSTATED = {"ProduceResponse": 6}


def _client_throttle_from(name: str, text: str, fields: list[FieldSpec]) -> int | None:
    if not any(f.name == "ThrottleTimeMs" for f in fields):
        return None
    found = _KIP219.search(text)
    return int(found.group(1)) if found else _KIP219_UNSTATED.get(name)


def parse_spec(path: Path, source: str) -> MessageSpec:
    raw = load_json(path)
    valid = parse_versions(str(raw["validVersions"]), frozenset(range(0, 1000)))
    common = {str(c["name"]): c["fields"] for c in raw.get("commonStructs", [])}  # type: ignore[attr-defined]
    fields = _parse_fields(raw.get("fields", []), valid, common, {})  # type: ignore[arg-type]
    unstable = max(valid) if raw.get("latestVersionUnstable") and valid else None
    return MessageSpec(
        name=str(raw["name"]),
        kind=str(raw["type"]),
        api_key=int(raw["apiKey"]) if "apiKey" in raw else None,  # type: ignore[call-overload]
        versions=valid,
        flexible=parse_versions(raw.get("flexibleVersions"), valid),  # type: ignore[arg-type]
        fields=fields,
        source={v: source for v in valid},
        unstable_from=unstable,
        client_throttle_from=_client_throttle_from(
            str(raw["name"]), path.read_text(encoding="utf-8"), fields
        ),
        listeners=frozenset(str(x) for x in raw.get("listeners", [])),  # type: ignore[attr-defined]
    )


def load_dir(directory: Path, source: str) -> dict[str, MessageSpec]:
    """Every spec in ``directory`` keyed by ``(kind, api key or name)``."""
    out = {}
    for path in sorted(directory.glob("*.json")):
        spec = parse_spec(path, source)
        out[spec_key(spec)] = spec
    return out


def spec_key(spec: MessageSpec) -> str:
    if spec.api_key is not None:
        return f"{spec.kind}:{spec.api_key}"
    return f"{spec.kind}:{spec.name}"


# ---------------------------------------------------------------------------- merge


def _restrict(fields: list[FieldSpec], keep: frozenset[int]) -> list[FieldSpec]:
    out = []
    for f in fields:
        vs = f.versions & keep
        if not vs:
            continue
        out.append(
            replace(
                f,
                versions=vs,
                nullable=f.nullable & keep,
                tagged=f.tagged & keep,
                flexible=None if f.flexible is None else f.flexible & keep,
                fields=None if f.fields is None else _restrict(f.fields, keep),
            )
        )
    return out


def _merge_order(a: list[str], b: list[str]) -> list[str]:
    """Shortest common supersequence-ish merge keeping both orders (LCS based)."""
    n, m = len(a), len(b)
    lcs = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            lcs[i][j] = lcs[i + 1][j + 1] + 1 if a[i] == b[j] else max(lcs[i + 1][j], lcs[i][j + 1])
    out, i, j = [], 0, 0
    while i < n and j < m:
        if a[i] == b[j]:
            out.append(a[i])
            i += 1
            j += 1
        elif lcs[i + 1][j] >= lcs[i][j + 1]:
            out.append(a[i])
            i += 1
        else:
            out.append(b[j])
            j += 1
    out.extend(a[i:])
    out.extend(b[j:])
    return out


def _merge_fields(new: list[FieldSpec], old: list[FieldSpec], where: str) -> list[FieldSpec]:
    by_new = {f.name: f for f in new}
    by_old = {f.name: f for f in old}
    order = _merge_order([f.name for f in new], [f.name for f in old])
    # each name once: a name in both lists must be matched by the LCS
    if len(order) != len(set(order)):
        raise ValueError(f"{where}: field order of the two specs cannot be merged")
    out: list[FieldSpec] = []
    for name in order:
        a, b = by_new.get(name), by_old.get(name)
        if a is None or b is None:
            only = a or b
            assert only is not None
            out.append(only)
            continue
        if a.elem in PRIMITIVES or b.elem in PRIMITIVES:
            if a.type != b.type:
                raise ValueError(f"{where}.{name}: type {a.type} vs {b.type}")
        elif a.is_array != b.is_array:
            raise ValueError(f"{where}.{name}: array vs struct")
        if a.tag != b.tag and a.tagged and b.tagged:
            raise ValueError(f"{where}.{name}: tag {a.tag} vs {b.tag}")
        flex = None
        if a.flexible is not None or b.flexible is not None:
            flex = (a.flexible or frozenset()) | (b.flexible or frozenset())
        out.append(
            replace(
                a,
                versions=a.versions | b.versions,
                nullable=a.nullable | b.nullable,
                tagged=a.tagged | b.tagged,
                tag=a.tag if a.tag is not None else b.tag,
                flexible=flex,
                fields=(
                    None
                    if a.fields is None
                    else _merge_fields(a.fields, b.fields or [], f"{where}.{name}")
                ),
            )
        )
    return out


def merge(new: MessageSpec | None, old: MessageSpec | None) -> MessageSpec:
    """One message covering the versions of both specs (``new`` wins where both list one)."""
    if new is None or not new.versions:
        assert old is not None
        if new is not None:
            return replace(old, name=new.name, listeners=new.listeners)
        return old
    if old is None:
        return new
    old_only = old.versions - new.versions
    if not old_only:
        return new
    a = _restrict(new.fields, new.versions)
    b = _restrict(old.fields, old_only)
    versions = new.versions | old_only
    if versions != frozenset(range(min(versions), max(versions) + 1)):
        raise ValueError(f"{new.name}: merged versions are not contiguous")
    return MessageSpec(
        name=new.name,
        kind=new.kind,
        api_key=new.api_key,
        versions=versions,
        flexible=(new.flexible & new.versions) | (old.flexible & old_only),
        fields=_merge_fields(a, b, new.name),
        source={**{v: old.source[v] for v in old_only}, **new.source},
        unstable_from=new.unstable_from,
        client_throttle_from=new.client_throttle_from,
        listeners=new.listeners,
    )


def load_merged(spec_root: Path) -> list[MessageSpec]:
    """All messages of ``specs/<NEWEST>`` merged with ``specs/<OLDEST>``, sorted by name."""
    new = load_dir(spec_root / NEWEST, NEWEST)
    old = load_dir(spec_root / OLDEST, OLDEST)
    out = [merge(new.get(k), old.get(k)) for k in sorted(set(new) | set(old))]
    return sorted(
        out, key=lambda m: (m.api_key if m.api_key is not None else 10_000, m.kind, m.name)
    )


# ---------------------------------------------------------------- what is generated

# The listener clients connect to. An API the newest spec does not serve there is a
# KRaft controller RPC ("controller" only: Vote, BrokerRegistration...) or a
# ZooKeeper-era inter-broker API with no listener left (LeaderAndIsr, StopReplica,
# UpdateMetadata, ControlledShutdown): no client sends those.
CLIENT_LISTENER = "broker"

# APIs the broker listener serves to other brokers only: the transaction coordinator
# writes markers to partition leaders, share-partition leaders keep their state with
# the share coordinator (Kafka's ApiKeys marks them clusterAction). The specs cannot
# tell them from client APIs, so they are named here.
INTER_BROKER = frozenset(
    {
        "WriteTxnMarkers",
        "InitializeShareGroupState",
        "ReadShareGroupState",
        "WriteShareGroupState",
        "DeleteShareGroupState",
        "ReadShareGroupStateSummary",
    }
)

# Data specs a client encodes: the classic group protocol's member metadata. The other
# data specs are KRaft log records (VotersRecord, SnapshotHeaderRecord...), Envelope's
# principal and the transaction control records, which records/control.py reads itself.
CLIENT_DATA = frozenset({"ConsumerProtocolAssignment", "ConsumerProtocolSubscription"})


def client_sends(request: MessageSpec) -> bool:
    """Whether a client sends this API (``request`` is the API's request spec)."""
    api = request.name.removesuffix("Request")
    return CLIENT_LISTENER in request.listeners and api not in INTER_BROKER


def client_messages(specs: list[MessageSpec]) -> list[MessageSpec]:
    """The messages of ``specs`` the generator emits, in their order: both halves of
    each API a client sends (a response spec names no listeners: its request's
    decide), the headers, and the data specs in ``CLIENT_DATA``."""
    apis = {s.api_key for s in specs if s.kind == "request" and client_sends(s)}
    return [
        s
        for s in specs
        if s.kind == "header"
        or (s.kind == "data" and s.name in CLIENT_DATA)
        or (s.kind in ("request", "response") and s.api_key in apis)
    ]


def load_client(spec_root: Path) -> list[MessageSpec]:
    """``client_messages`` of ``load_merged(spec_root)``: what the generator emits."""
    return client_messages(load_merged(spec_root))


# --------------------------------------------------------------------------- layout

Layout = tuple[object, ...]


def field_flexible(f: FieldSpec, flexible: frozenset[int], version: int) -> bool:
    if f.flexible is not None:
        return version in f.flexible
    return version in flexible


def layout(spec: MessageSpec, version: int) -> Layout:
    """The wire layout of ``spec`` at ``version``: what the bytes look like, nothing else.

    A tuple of (name, type, nullable, compact) for regular fields in order, nested
    layouts for structs, then the sorted (tag, name, ...) tagged fields when flexible.
    """
    return _layout(spec.fields, spec.flexible, version)


def _layout(fields: list[FieldSpec], flexible: frozenset[int], version: int) -> Layout:
    flex = version in flexible
    regular: list[object] = []
    tagged: list[object] = []
    for f in fields:
        if version not in f.versions:
            continue
        sub = _layout(f.fields, flexible, version) if f.fields is not None else None
        entry = (
            f.name,
            f.type if not f.is_struct else ("[]" if f.is_array else "") + "struct",
            version in f.nullable,
            field_flexible(f, flexible, version),
            sub,
        )
        if version in f.tagged:
            tagged.append((f.tag, *entry))
        else:
            regular.append(entry)
    tagged.sort(key=lambda t: t[0])  # type: ignore[index]
    return (tuple(regular), tuple(tagged) if flex else None)
