"""Readers and writers for the Kafka protocol's primitive types.

The generated message codecs call these for everything of variable length (strings,
bytes, records, arrays, tagged fields); fixed-width fields are packed inline by the
generated code with precompiled ``struct.Struct`` objects.

Conventions:

- Readers take ``(buf, pos, ...)`` where ``buf`` is a 1-D byte ``memoryview`` and
  return ``(value, next_pos)``. Writers append to a ``bytearray``.
- ``compact`` selects the flexible-version encodings (unsigned-varint length + 1, with
  0 meaning null) instead of the classic int16/int32 lengths (-1 meaning null).
- Every length is checked against the bytes left *before* anything is allocated or
  looped over; malformed input raises ``KafkaProtocolError``. A few low-level failures
  (``struct.error`` on a short fixed-width read, ``UnicodeDecodeError``) are turned into
  ``KafkaProtocolError`` by ``Message.decode``, which wraps the whole decode.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from uuid import UUID

from aiokproto.errors import KafkaProtocolError, UnsupportedVersionError
from aiokproto.protocol.varint import (
    decode_uvarint,
    decode_varint,
    decode_varlong,
    encode_uvarint,
    encode_varint,
    encode_varlong,
)

__all__ = [
    "ZERO_UUID",
    "null_field_error",
    "null_value_error",
    "read_array_len",
    "read_bytes",
    "read_int_array",
    "read_nullable_bytes",
    "read_nullable_int_array",
    "read_nullable_string",
    "read_nullable_string_array",
    "read_nullable_uuid_array",
    "read_records",
    "read_string",
    "read_string_array",
    "read_struct_marker",
    "read_tag_count",
    "read_tag_header",
    "read_uuid",
    "read_uuid_array",
    "read_uvarint",
    "read_varint",
    "read_varlong",
    "unsupported_field_error",
    "write_array_len",
    "write_bytes",
    "write_int_array",
    "write_nullable_bytes",
    "write_nullable_int_array",
    "write_nullable_string",
    "write_nullable_string_array",
    "write_nullable_uuid_array",
    "write_records",
    "write_string",
    "write_string_array",
    "write_tagged_fields",
    "write_uuid_array",
    "write_uvarint",
    "write_varint",
    "write_varlong",
]

ZERO_UUID = UUID(int=0)

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_SIZES = {"b": 1, "h": 2, "i": 4, "q": 8}


def _need(buf: memoryview, pos: int, n: int, what: str) -> None:
    if n > len(buf) - pos:
        raise KafkaProtocolError(
            f"{what} claims {n} bytes but only {max(len(buf) - pos, 0)} remain"
        )


def read_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    if pos < len(buf):
        b = buf[pos]
        if b < 0x80:
            return b, pos + 1
    return decode_uvarint(buf, pos)


def write_uvarint(out: bytearray, value: int) -> None:
    if 0 <= value < 0x80:
        out.append(value)
    else:
        out += encode_uvarint(value)


def _read_len(buf: memoryview, pos: int, compact: bool, wide: bool) -> tuple[int, int]:
    """A length prefix; -1 means null."""
    if compact:
        if pos < len(buf) and buf[pos] < 0x80:
            return buf[pos] - 1, pos + 1
        n, pos = decode_uvarint(buf, pos)
        return n - 1, pos
    if wide:
        _need(buf, pos, 4, "length")
        return _I32.unpack_from(buf, pos)[0], pos + 4
    _need(buf, pos, 2, "length")
    return _I16.unpack_from(buf, pos)[0], pos + 2


def _write_len(out: bytearray, n: int, compact: bool, wide: bool) -> None:
    if compact:
        write_uvarint(out, n + 1)
    elif wide:
        out += _I32.pack(n)
    else:
        out += _I16.pack(n)


# ----------------------------------------------------------------------------- strings


def read_nullable_string(buf: memoryview, pos: int, compact: bool) -> tuple[str | None, int]:
    n, pos = _read_len(buf, pos, compact, False)
    if n < 0:
        if n != -1:
            raise KafkaProtocolError(f"negative string length {n}")
        return None, pos
    end = pos + n
    if end > len(buf):
        _need(buf, pos, n, "string")
    return str(buf[pos:end], "utf-8"), end


def read_string(buf: memoryview, pos: int, compact: bool) -> tuple[str, int]:
    s, pos = read_nullable_string(buf, pos, compact)
    if s is None:
        raise KafkaProtocolError("null in a non-nullable string")
    return s, pos


def write_string(out: bytearray, s: str, compact: bool) -> None:
    b = s.encode()
    if compact:
        n = len(b) + 1
        if n < 0x80:
            out.append(n)
        else:
            out += encode_uvarint(n)
    else:
        out += _I16.pack(len(b))
    out += b


def write_nullable_string(out: bytearray, s: str | None, compact: bool) -> None:
    if s is None:
        _write_len(out, -1, compact, False)
    else:
        write_string(out, s, compact)


# ------------------------------------------------------------------------------- bytes


def read_nullable_bytes(buf: memoryview, pos: int, compact: bool) -> tuple[bytes | None, int]:
    n, pos = _read_len(buf, pos, compact, True)
    if n < 0:
        if n != -1:
            raise KafkaProtocolError(f"negative bytes length {n}")
        return None, pos
    _need(buf, pos, n, "bytes")
    return bytes(buf[pos : pos + n]), pos + n


def read_bytes(buf: memoryview, pos: int, compact: bool) -> tuple[bytes, int]:
    b, pos = read_nullable_bytes(buf, pos, compact)
    if b is None:
        raise KafkaProtocolError("null in a non-nullable bytes field")
    return b, pos


def write_bytes(out: bytearray, b: bytes | bytearray | memoryview, compact: bool) -> None:
    _write_len(out, len(b), compact, True)
    out += b


def write_nullable_bytes(
    out: bytearray, b: bytes | bytearray | memoryview | None, compact: bool
) -> None:
    if b is None:
        _write_len(out, -1, compact, True)
    else:
        _write_len(out, len(b), compact, True)
        out += b


def read_records(buf: memoryview, pos: int, compact: bool) -> tuple[memoryview | None, int]:
    """A records blob: a zero-copy slice of ``buf`` (the records codec parses it)."""
    n, pos = _read_len(buf, pos, compact, True)
    if n < 0:
        if n != -1:
            raise KafkaProtocolError(f"negative records length {n}")
        return None, pos
    _need(buf, pos, n, "records")
    return buf[pos : pos + n], pos + n


def write_records(out: bytearray, b: bytes | bytearray | memoryview | None, compact: bool) -> None:
    if b is None:
        _write_len(out, -1, compact, True)
    else:
        if isinstance(b, memoryview) and b.itemsize != 1:
            b = b.cast("B")
        _write_len(out, len(b), compact, True)
        out += b


# ------------------------------------------------------------------------------- uuids


#: topic ids seen, by their bytes: every Produce and Fetch answer names its topics by
#: id, and building a UUID was a fifth of a one-partition answer's decode. UUIDs are
#: immutable, so one object per id is safe to share.
_UUIDS: dict[bytes, UUID] = {bytes(16): ZERO_UUID}
_UUIDS_MAX = 4096


def read_uuid(buf: memoryview, pos: int) -> tuple[UUID, int]:
    end = pos + 16
    if end > len(buf):
        _need(buf, pos, 16, "uuid")
    raw = bytes(buf[pos:end])
    known = _UUIDS.get(raw)
    if known is None:
        if len(_UUIDS) >= _UUIDS_MAX:  # a stream of new ids: stay bounded
            _UUIDS.clear()
            _UUIDS[bytes(16)] = ZERO_UUID
        known = _UUIDS[raw] = UUID(bytes=raw)
    return known, end


# ------------------------------------------------------------------------------ arrays


def read_array_len(buf: memoryview, pos: int, compact: bool) -> tuple[int, int]:
    """An array count (-1 for null), checked against the bytes left.

    Every element takes at least one byte... except structs with no fields in this
    version; bounding the count by the remaining bytes keeps even those loops bounded
    by the input size.
    """
    n, pos = _read_len(buf, pos, compact, True)
    if n < -1:
        raise KafkaProtocolError(f"negative array length {n}")
    if n > len(buf) - pos and n > 0:
        raise KafkaProtocolError(
            f"array claims {n} elements but only {len(buf) - pos} bytes remain"
        )
    return n, pos


#: Kafka 4.4's message readers reject an array (or collection) of more elements before
#: allocating it, and close the connection; a request that needs more must be split.
MAX_ARRAY_ELEMENTS = 1_000_000


def _check_count(n: int) -> None:
    if n > MAX_ARRAY_ELEMENTS:
        raise ValueError(
            f"an array of {n:,} elements: Kafka brokers (4.4+) reject arrays of more than "
            f"{MAX_ARRAY_ELEMENTS:,} elements; split the request"
        )


def write_array_len(out: bytearray, n: int, compact: bool) -> None:
    _check_count(n)
    _write_len(out, n, compact, True)


_ARRAY_STRUCTS: dict[str, dict[int, struct.Struct]] = {c: {} for c in _SIZES}


def _array_struct(code: str, n: int) -> struct.Struct:
    cache = _ARRAY_STRUCTS[code]
    st = cache.get(n)
    if st is None:
        st = struct.Struct(f">{n}{code}")
        if n <= 256:
            cache[n] = st
    return st


def read_nullable_int_array(
    buf: memoryview, pos: int, compact: bool, code: str
) -> tuple[list[int] | None, int]:
    if compact and pos < len(buf) and buf[pos] < 0x80:
        n = buf[pos] - 1
        pos += 1
    else:
        n, pos = _read_len(buf, pos, compact, True)
    if n < 0:
        if n != -1:
            raise KafkaProtocolError(f"negative array length {n}")
        return None, pos
    size = n * _SIZES[code]
    if size > len(buf) - pos:
        _need(buf, pos, size, "int array")
    return list(_array_struct(code, n).unpack_from(buf, pos)), pos + size


def read_int_array(buf: memoryview, pos: int, compact: bool, code: str) -> tuple[list[int], int]:
    if compact and pos < len(buf) and 0 < buf[pos] < 0x80:
        n = buf[pos] - 1
        pos += 1
        size = n * _SIZES[code]
        if size > len(buf) - pos:
            _need(buf, pos, size, "int array")
        return list(_array_struct(code, n).unpack_from(buf, pos)), pos + size
    v, pos = read_nullable_int_array(buf, pos, compact, code)
    if v is None:
        raise KafkaProtocolError("null in a non-nullable array")
    return v, pos


def write_int_array(out: bytearray, v: Sequence[int], compact: bool, code: str) -> None:
    n = len(v)
    if compact and n < 0x7F:
        out.append(n + 1)
    else:
        _check_count(n)
        _write_len(out, n, compact, True)
    out += _array_struct(code, n).pack(*v)


def write_nullable_int_array(
    out: bytearray, v: Sequence[int] | None, compact: bool, code: str
) -> None:
    if v is None:
        _write_len(out, -1, compact, True)
    else:
        write_int_array(out, v, compact, code)


def read_nullable_string_array(
    buf: memoryview, pos: int, compact: bool
) -> tuple[list[str] | None, int]:
    n, pos = read_array_len(buf, pos, compact)
    if n < 0:
        return None, pos
    out = []
    for _ in range(n):
        s, pos = read_string(buf, pos, compact)
        out.append(s)
    return out, pos


def read_string_array(buf: memoryview, pos: int, compact: bool) -> tuple[list[str], int]:
    v, pos = read_nullable_string_array(buf, pos, compact)
    if v is None:
        raise KafkaProtocolError("null in a non-nullable array")
    return v, pos


def write_string_array(out: bytearray, v: Sequence[str], compact: bool) -> None:
    write_array_len(out, len(v), compact)
    for s in v:
        write_string(out, s, compact)


def write_nullable_string_array(out: bytearray, v: Sequence[str] | None, compact: bool) -> None:
    if v is None:
        _write_len(out, -1, compact, True)
    else:
        write_string_array(out, v, compact)


def read_nullable_uuid_array(
    buf: memoryview, pos: int, compact: bool
) -> tuple[list[UUID] | None, int]:
    n, pos = read_array_len(buf, pos, compact)
    if n < 0:
        return None, pos
    _need(buf, pos, 16 * n, "uuid array")
    out = []
    for _ in range(n):
        u, pos = read_uuid(buf, pos)
        out.append(u)
    return out, pos


def read_uuid_array(buf: memoryview, pos: int, compact: bool) -> tuple[list[UUID], int]:
    v, pos = read_nullable_uuid_array(buf, pos, compact)
    if v is None:
        raise KafkaProtocolError("null in a non-nullable array")
    return v, pos


def write_uuid_array(out: bytearray, v: Sequence[UUID], compact: bool) -> None:
    write_array_len(out, len(v), compact)
    for u in v:
        out += u.bytes


def write_nullable_uuid_array(out: bytearray, v: Sequence[UUID] | None, compact: bool) -> None:
    if v is None:
        _write_len(out, -1, compact, True)
    else:
        write_uuid_array(out, v, compact)


def read_struct_marker(buf: memoryview, pos: int) -> tuple[bool, int]:
    """The int8 presence marker of a nullable struct field: -1 null, 1 present."""
    if pos >= len(buf):
        raise KafkaProtocolError("truncated struct marker")
    b = buf[pos]
    return b < 0x80, pos + 1


# ------------------------------------------------------------------------ tagged fields


def read_tag_header(buf: memoryview, pos: int) -> tuple[int, int, int]:
    """One tagged field's ``(tag, start, end)``; ``end`` is checked against the buffer."""
    tag, pos = read_uvarint(buf, pos)
    size, pos = read_uvarint(buf, pos)
    end = pos + size
    if end > len(buf):
        _need(buf, pos, size, f"tagged field {tag}")
    return tag, pos, end


def write_tagged_fields(
    out: bytearray,
    known: list[tuple[int, bytes | bytearray]],
    unknown: list[tuple[int, bytes]] | None,
) -> None:
    """The tagged-field section: count, then (tag, size, data) in ascending tag order."""
    fields: list[tuple[int, bytes | bytearray]] = known
    if unknown:
        fields = sorted([*known, *unknown], key=lambda t: t[0])
    write_uvarint(out, len(fields))
    for tag, data in fields:
        write_uvarint(out, tag)
        write_uvarint(out, len(data))
        out += data


# ------------------------------------------------------------------------------ errors


def unsupported_field_error(message: str, field: str, version: int) -> UnsupportedVersionError:
    """A non-default value in a field that ``version`` cannot carry."""
    return UnsupportedVersionError(
        f"{message}.{field} has a non-default value but {message} v{version} cannot carry it"
    )


def null_field_error(message: str, field: str, version: int) -> UnsupportedVersionError:
    """``None`` in a field that is not nullable at ``version``."""
    return UnsupportedVersionError(f"{message}.{field} cannot be null in {message} v{version}")


def null_value_error(message: str, field: str, version: int) -> KafkaProtocolError:
    """A decoded null in a field that is not nullable at ``version``."""
    return KafkaProtocolError(f"null in non-nullable field {message}.{field} (v{version})")


def read_tag_count(buf: memoryview, pos: int) -> tuple[int, int]:
    """The number of tagged fields; each takes at least two bytes."""
    n, pos = read_uvarint(buf, pos)
    if 2 * n > len(buf) - pos:
        raise KafkaProtocolError(f"{n} tagged fields claimed in {len(buf) - pos} bytes")
    return n, pos


# ------------------------------------------------------- signed varints (record fields)


def read_varint(buf: memoryview, pos: int) -> tuple[int, int]:
    """Zig-zag signed 32-bit varint (``varint.decode_varint``)."""
    return decode_varint(buf, pos)


def read_varlong(buf: memoryview, pos: int) -> tuple[int, int]:
    """Zig-zag signed 64-bit varlong (``varint.decode_varlong``)."""
    return decode_varlong(buf, pos)


def write_varint(out: bytearray, value: int) -> None:
    out += encode_varint(value)


def write_varlong(out: bytearray, value: int) -> None:
    out += encode_varlong(value)
