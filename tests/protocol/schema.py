"""Test-side view of the specs: Hypothesis strategies and an independent reference encoder.

Strategies are derived from the merged specs (what the generated classes cover). The
reference encoder walks the *source* spec of a version (4.4.0 or 3.9.1, unmerged) at run
time, so comparing its bytes with the generated ``encode`` checks the generated code and
the merge against Kafka's specs, not against itself.
"""

from __future__ import annotations

import importlib
import struct
from functools import cache
from pathlib import Path
from typing import Any
from uuid import UUID

from hypothesis import strategies as st

from aiokproto.protocol.base import Message
from aiokproto.protocol.varint import encode_uvarint
from tools.codegen.gen_messages import api_module_name, snake, struct_class_name
from tools.codegen.spec import FieldSpec, MessageSpec, load_client, load_dir, spec_key

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "tools" / "codegen" / "specs"

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
FMT = {"int8": "b", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I", "int64": "q"}


@cache
def merged() -> list[MessageSpec]:
    """The merged specs the generator emits (the ones with generated classes)."""
    return load_client(SPECS)


@cache
def sources() -> dict[str, dict[str, MessageSpec]]:
    return {
        "4.4.0": load_dir(SPECS / "4.4.0", "4.4.0"),
        "3.9.1": load_dir(SPECS / "3.9.1", "3.9.1"),
    }


def source_spec(spec: MessageSpec, version: int) -> MessageSpec:
    return sources()[spec.source[version]][spec_key(spec)]


def module_of(spec: MessageSpec) -> Any:
    return importlib.import_module(f"aiokproto.protocol.messages.{api_module_name(spec)}")


def message_class(spec: MessageSpec) -> type[Message]:
    cls: type[Message] = getattr(module_of(spec), spec.name)
    return cls


def cases(kinds: tuple[str, ...] = ("request", "response", "data", "header")) -> list[Any]:
    """(spec, version) pairs for pytest.mark.parametrize."""
    return [(s, v) for s in merged() if s.kind in kinds for v in sorted(s.versions)]


def case_id(case: Any) -> str:
    if isinstance(case, MessageSpec):
        return case.name
    return f"v{case}"


# ---------------------------------------------------------------------------- strategies


def _elem_strategy(spec: MessageSpec, f: FieldSpec, version: int, depth: int) -> Any:
    e = f.elem
    if e in INT_RANGES:
        lo, hi = INT_RANGES[e]
        return st.integers(lo, hi)
    if e == "bool":
        return st.booleans()
    if e == "float64":
        return st.floats(allow_nan=False)
    if e == "string":
        return st.text(max_size=8)
    if e in ("bytes", "records"):
        return st.binary(max_size=12)
    if e == "uuid":
        return st.uuids() | st.just(UUID(int=0))
    assert f.fields is not None
    cls = getattr(module_of(spec), struct_class_name(spec.name, e))
    return struct_strategy(spec, cls, f.fields, version, depth + 1)


def field_strategy(spec: MessageSpec, f: FieldSpec, version: int, depth: int) -> Any:
    s = _elem_strategy(spec, f, version, depth)
    if f.is_array:
        s = st.lists(s, max_size=3 if depth < 2 else 1)
    if version in f.nullable:
        s = st.none() | s
    return s


def unknown_tags(used: set[int]) -> Any:
    tags = st.dictionaries(
        st.integers(0, 300).filter(lambda t: t not in used), st.binary(max_size=4), max_size=2
    )
    return tags.map(lambda d: sorted(d.items()) or None)


def struct_strategy(
    spec: MessageSpec, cls: type, fields: list[FieldSpec], version: int, depth: int = 0
) -> Any:
    kwargs = {
        snake(f.name): field_strategy(spec, f, version, depth)
        for f in fields
        if version in f.versions
    }
    if version in spec.flexible:
        used = {f.tag for f in fields if f.tag is not None}
        kwargs["unknown_tagged_fields"] = st.none() | unknown_tags(used)
    return st.builds(cls, **kwargs)


def message_strategy(spec: MessageSpec, version: int) -> Any:
    return struct_strategy(spec, message_class(spec), spec.fields, version)


# ----------------------------------------------------------------------- reference codec


def _default(f: FieldSpec) -> Any:
    d = f.default
    if d is not None and d.lower() == "null":
        return None
    if f.type == "records":
        return None
    if f.is_array:
        return []
    if f.is_struct:
        return "struct-default"
    if f.elem == "bool":
        return (d or "false").lower() == "true"
    if f.elem == "float64":
        return float(d or 0)
    if f.elem in INT_RANGES:
        return int(d, 0) if d else 0
    if f.elem == "string":
        return d or ""
    if f.elem == "bytes":
        return b""
    if f.elem == "uuid":
        return UUID(int=0)
    raise AssertionError(f.type)


def _is_default(f: FieldSpec, value: Any) -> bool:
    d = _default(f)
    if d == "struct-default":
        return bool(value == type(value)())
    return bool(value == d) and (value is None) == (d is None)


def _len(out: bytearray, n: int, compact: bool, wide: bool) -> None:
    if compact:
        out += encode_uvarint(n + 1)
    else:
        out += struct.pack(">i" if wide else ">h", n)


def _ref_value(
    f: FieldSpec, value: Any, version: int, flexible: frozenset[int], compact: bool, out: bytearray
) -> None:
    e = f.elem
    if f.is_array:
        if value is None:
            _len(out, -1, compact, True)
            return
        _len(out, len(value), compact, True)
        for item in value:
            _ref_elem(f, e, item, version, flexible, compact, out)
        return
    if f.is_struct and version in f.nullable:
        if value is None:
            out += b"\xff"
            return
        out += b"\x01"
    _ref_elem(f, e, value, version, flexible, compact, out)


def _ref_elem(
    f: FieldSpec,
    e: str,
    value: Any,
    version: int,
    flexible: frozenset[int],
    compact: bool,
    out: bytearray,
) -> None:
    if e in FMT:
        out += struct.pack(">" + FMT[e], value)
    elif e == "bool":
        out += b"\x01" if value else b"\x00"
    elif e == "float64":
        out += struct.pack(">d", value)
    elif e == "uuid":
        out += value.bytes
    elif e == "string":
        if value is None:
            _len(out, -1, compact, False)
        else:
            b = value.encode("utf-8")
            _len(out, len(b), compact, False)
            out += b
    elif e in ("bytes", "records"):
        if value is None:
            _len(out, -1, compact, True)
        else:
            _len(out, len(value), compact, True)
            out += bytes(value)
    else:
        assert f.fields is not None
        ref_encode_fields(f.fields, flexible, version, value, out)


def ref_encode_fields(
    fields: list[FieldSpec], flexible: frozenset[int], version: int, obj: Any, out: bytearray
) -> None:
    flex = version in flexible
    tagged: list[tuple[int, bytes]] = []
    for f in fields:
        if version not in f.versions:
            continue
        value = getattr(obj, snake(f.name))
        if version in f.tagged:
            if not _is_default(f, value):
                buf = bytearray()
                _ref_value(f, value, version, flexible, True, buf)
                assert f.tag is not None
                tagged.append((f.tag, bytes(buf)))
            continue
        compact = version in (f.flexible if f.flexible is not None else flexible)
        _ref_value(f, value, version, flexible, compact, out)
    if flex:
        tagged += obj.unknown_tagged_fields or []
        tagged.sort()
        out += encode_uvarint(len(tagged))
        for tag, data in tagged:
            out += encode_uvarint(tag) + encode_uvarint(len(data)) + data


def ref_encode(spec: MessageSpec, obj: Any, version: int) -> bytes:
    """Encode ``obj`` by interpreting the version's *source* spec."""
    src = source_spec(spec, version)
    out = bytearray()
    ref_encode_fields(src.fields, src.flexible, version, obj, out)
    return bytes(out)
