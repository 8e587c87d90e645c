"""Request and response headers, and which header version each API version uses.

Request header v0: api_key int16, api_version int16, correlation_id int32.
v1 adds client_id (a nullable *classic* int16-length string, even in v2).
v2 adds a tagged-field section. Response header v0: correlation_id int32; v1 adds a
tagged-field section.

A request uses header v2 when its API version is flexible, else v1 (v0 was only ever
used by ControlledShutdown v0, an inter-broker API that is not generated). A response
uses header v1 when flexible, else v0 -- except ApiVersions, whose response always
uses v0 so that a client can read the broker's answer (usually an UNSUPPORTED_VERSION
error listing the supported versions) whatever version it asked for.

``RequestHeader``/``ResponseHeader`` are the generated classes (all header versions,
unknown tagged fields kept). ``encode_request``/``decode_response_header`` are the fast
paths for the connection layer.
"""

from __future__ import annotations

import struct

from aiokproto.errors import KafkaProtocolError, UnsupportedVersionError
from aiokproto.protocol.base import Request
from aiokproto.protocol.messages import REQUEST_FLEXIBLE_MIN, RESPONSE_FLEXIBLE_MIN
from aiokproto.protocol.messages.request_header import RequestHeader
from aiokproto.protocol.messages.response_header import ResponseHeader
from aiokproto.protocol.primitives import (
    read_tag_count,
    read_tag_header,
    write_nullable_string,
)

__all__ = [
    "RequestHeader",
    "ResponseHeader",
    "decode_request_header",
    "decode_response_header",
    "encode_request",
    "encode_request_header",
    "request_header_version",
    "response_header_version",
]

API_VERSIONS_KEY = 18

_HHI = struct.Struct(">hhi")
_I = struct.Struct(">i")


def _flexible_min(table: dict[int, int | None], api_key: int) -> int | None:
    try:
        return table[api_key]
    except KeyError:
        raise UnsupportedVersionError(f"unknown API key {api_key}") from None


def request_header_version(api_key: int, api_version: int) -> int:
    """The request header version for ``api_version`` of ``api_key``."""
    flex = _flexible_min(REQUEST_FLEXIBLE_MIN, api_key)
    return 2 if flex is not None and api_version >= flex else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """The response header version for ``api_version`` of ``api_key``."""
    flex = _flexible_min(RESPONSE_FLEXIBLE_MIN, api_key)
    if api_key == API_VERSIONS_KEY:
        return 0
    return 1 if flex is not None and api_version >= flex else 0


def encode_request_header(
    out: bytearray,
    api_key: int,
    api_version: int,
    correlation_id: int,
    client_id: str | None,
    header_version: int,
) -> None:
    """Append a request header of ``header_version`` (0, 1 or 2) to ``out``."""
    out += _HHI.pack(api_key, api_version, correlation_id)
    if header_version >= 1:
        write_nullable_string(out, client_id, False)
        if header_version >= 2:
            out.append(0)  # no tagged fields
    elif header_version != 0:
        raise UnsupportedVersionError(f"request header version {header_version}")


def encode_request(
    request: Request,
    version: int,
    correlation_id: int,
    client_id: str | None,
    *,
    size_prefix: bool = True,
) -> bytearray:
    """Header + body of ``request`` at ``version``, by default with the int32 size prefix
    a Kafka frame starts with."""
    out = bytearray(b"\0\0\0\0") if size_prefix else bytearray()
    header_version = request_header_version(request.API_KEY, version)
    encode_request_header(out, request.API_KEY, version, correlation_id, client_id, header_version)
    request.encode_into(out, version)
    if size_prefix:
        _I.pack_into(out, 0, len(out) - 4)
    return out


def decode_request_header(
    data: bytes | bytearray | memoryview,
) -> tuple[RequestHeader, int]:
    """A request header at the start of ``data`` (a frame without its size prefix).

    The header version follows from the API key and version it starts with; returns
    the header and the offset of the body.
    """
    if len(data) < 4:
        raise KafkaProtocolError("truncated request header")
    api_key, api_version = struct.unpack_from(">hh", data, 0)
    try:
        header_version = request_header_version(api_key, api_version)
    except UnsupportedVersionError as e:
        raise KafkaProtocolError(str(e)) from None
    return RequestHeader.decode_from(data, 0, header_version)


def decode_response_header(
    data: bytes | bytearray | memoryview, header_version: int
) -> tuple[int, int]:
    """``(correlation_id, body_offset)`` of a response frame (without size prefix).

    Tagged fields of a v1 header are validated and skipped.
    """
    buf = data if isinstance(data, memoryview) else memoryview(data)
    if len(buf) < 4:
        raise KafkaProtocolError("truncated response header")
    (correlation_id,) = _I.unpack_from(buf, 0)
    pos = 4
    if header_version >= 1:
        n, pos = read_tag_count(buf, pos)
        for _ in range(n):
            _tag, _start, pos = read_tag_header(buf, pos)
    return correlation_id, pos
