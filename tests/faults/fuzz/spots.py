"""Where the fields of an encoded response are: a walk of the JSON spec over the bytes.

Structure-aware mutations (huge array counts, length lies, endless varints, extreme
integers, error codes, record batches) need to know where a count, a length or an
integer sits. This walker is written from the specs, independently of the generated
decoders it helps to attack; it only has to handle well-formed (recorded) bodies.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from aiokproto.protocol.varint import decode_uvarint
from tools.codegen.spec import FieldSpec, MessageSpec, field_flexible, load_merged

_SPECS = Path(__file__).resolve().parents[3] / "tools" / "codegen" / "specs"
_WIDTH = {"bool": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8}
_FIXED = {**_WIDTH, "float64": 8, "uuid": 16}


@dataclass(frozen=True, slots=True)
class Spot:
    """One field's encoding inside a body.

    kind: ``int`` (a fixed-width integer; ``name`` is the spec's field name), ``count``
    (array length), ``element`` (one array element; ``owner`` is the ``at`` of its
    count), ``length`` (string/bytes length), ``string`` (a string's bytes, right after
    its length), ``uuid``, ``records`` (a record-batch blob, ``at``/``size`` are its
    data), ``tags`` (tagged-field count) or ``tag_size``. ``size`` is the bytes the
    encoding takes; ``varint`` says it is an unsigned varint; ``value`` is the raw
    encoded value of integers, counts and lengths.
    """

    kind: str
    at: int
    size: int
    name: str
    varint: bool = False
    value: int = 0
    owner: int = -1


class _Walk:
    def __init__(self, body: bytes) -> None:
        self.buf = body
        self.pos = 0
        self.spots: list[Spot] = []

    def uvarint(self, kind: str, name: str) -> int:
        at = self.pos
        value, self.pos = decode_uvarint(self.buf, at)
        self.spots.append(Spot(kind, at, self.pos - at, name, True, value))
        return value

    def fixed_len(self, kind: str, name: str, fmt: str) -> int:
        at = self.pos
        (value,) = struct.unpack_from(fmt, self.buf, at)
        self.pos += struct.calcsize(fmt)
        self.spots.append(Spot(kind, at, self.pos - at, name, False, value))
        return int(value)

    def length(self, kind: str, name: str, compact: bool, wide: bool) -> int:
        """A length/count; -1 means null."""
        if compact:
            return self.uvarint(kind, name) - 1
        return self.fixed_len(kind, name, ">i" if wide else ">h")

    def fields(self, fields: list[FieldSpec], flexible: frozenset[int], version: int) -> None:
        tagged: dict[int, FieldSpec] = {}
        for f in fields:
            if version not in f.versions:
                continue
            if version in f.tagged:
                assert f.tag is not None
                tagged[f.tag] = f
                continue
            self.field(f, flexible, version, field_flexible(f, flexible, version))
        if version in flexible:
            count = self.uvarint("tags", "_tagged")
            for _ in range(count):
                tag, self.pos = decode_uvarint(self.buf, self.pos)
                size = self.uvarint("tag_size", f"_tag{tag}")
                end = self.pos + size
                known = tagged.get(tag)
                if known is not None:
                    self.field(known, flexible, version, True)
                self.pos = end

    def field(self, f: FieldSpec, flexible: frozenset[int], version: int, compact: bool) -> None:
        if f.is_array:
            owner = self.pos
            n = self.length("count", f.name, compact, True)
            for _ in range(max(n, 0)):
                start = self.pos
                self.element(f, flexible, version, compact)
                self.spots.append(Spot("element", start, self.pos - start, f.name, owner=owner))
            return
        if f.is_struct and version in f.nullable:
            present = self.buf[self.pos] < 0x80
            self.pos += 1
            if not present:
                return
        self.element(f, flexible, version, compact)

    def element(self, f: FieldSpec, flexible: frozenset[int], version: int, compact: bool) -> None:
        e = f.elem
        if e in _WIDTH:
            fmt = {1: ">b", 2: ">h", 4: ">i", 8: ">q"}[_WIDTH[e]]
            self.fixed_len("int", f.name, fmt)
        elif e == "uuid":
            self.spots.append(Spot("uuid", self.pos, 16, f.name))
            self.pos += 16
        elif e in _FIXED:
            self.pos += _FIXED[e]
        elif e == "string":
            n = self.length("length", f.name, compact, False)
            if n >= 0:
                self.spots.append(Spot("string", self.pos, n, f.name))
            self.pos += max(n, 0)
        elif e in ("bytes", "records"):
            n = self.length("length", f.name, compact, True)
            if e == "records" and n > 0:
                self.spots.append(Spot("records", self.pos, n, f.name))
            self.pos += max(n, 0)
        else:
            assert f.fields is not None
            self.fields(f.fields, flexible, version)


@cache
def _responses() -> dict[int, MessageSpec]:
    return {
        s.api_key: s
        for s in load_merged(_SPECS)
        if s.kind == "response" and s.api_key is not None
    }


def spots(api_key: int, version: int, body: bytes) -> list[Spot]:
    """Every field position in a well-formed response body (ValueError if the walk
    does not end exactly at the end of ``body``)."""
    spec = _responses()[api_key]
    walk = _Walk(body)
    walk.fields(spec.fields, spec.flexible, version)
    if walk.pos != len(body):
        raise ValueError(f"api {api_key} v{version}: walked {walk.pos} of {len(body)} bytes")
    return walk.spots
