"""Variable-length integers of the Kafka protocol: unsigned and zig-zag, bounds-checked.

Unsigned varints (compact lengths, tagged-field headers) are LEB128; signed varints
and varlongs (record fields) are zig-zag encoded first. Decoders take a buffer and a
position and return ``(value, next_position)`` so hot loops avoid slicing; they raise
``KafkaProtocolError`` on a truncated or over-long encoding, never read past the end.
"""

from __future__ import annotations

from aiokproto.errors import KafkaProtocolError

_MAX_VARINT_BYTES = 5
_MAX_VARLONG_BYTES = 10


def encode_uvarint(value: int) -> bytes:
    """LEB128 encoding of a non-negative int (at most 64 bits)."""
    if value < 0x80:
        if value < 0:
            raise ValueError(f"unsigned varint cannot hold {value}")
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """Zig-zag varint for a signed 32-bit int."""
    return encode_uvarint(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def encode_varlong(value: int) -> bytes:
    """Zig-zag varlong for a signed 64-bit int."""
    return encode_uvarint(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def _decode(buf: bytes | bytearray | memoryview, pos: int, limit: int) -> tuple[int, int]:
    result = 0
    shift = 0
    end = len(buf)
    for _ in range(limit):
        if pos >= end:
            raise KafkaProtocolError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
    raise KafkaProtocolError(f"varint longer than {limit} bytes")


def decode_uvarint(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """Unsigned 32-bit varint at ``pos``."""
    b = buf[pos] if pos < len(buf) else 0x80
    if b < 0x80:
        return b, pos + 1
    value, pos = _decode(buf, pos, _MAX_VARINT_BYTES)
    if value > 0xFFFFFFFF:
        raise KafkaProtocolError("unsigned varint overflows 32 bits")
    return value, pos


def decode_uvarlong(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """Unsigned 64-bit varint at ``pos``."""
    value, pos = _decode(buf, pos, _MAX_VARLONG_BYTES)
    if value > 0xFFFFFFFFFFFFFFFF:
        raise KafkaProtocolError("unsigned varlong overflows 64 bits")
    return value, pos


def decode_varint(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """Zig-zag signed 32-bit varint at ``pos``."""
    raw, pos = decode_uvarint(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def decode_varlong(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """Zig-zag signed 64-bit varlong at ``pos``."""
    raw, pos = decode_uvarlong(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos
