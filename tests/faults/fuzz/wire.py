"""Frame-level helpers shared by the recorder and the replayer.

Frames here never include their int32 size prefix. Uses the project's own codecs to
decode and re-encode bodies (to move broker addresses, to change versions).
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Any

from aiokproto.protocol.base import Struct
from aiokproto.protocol.headers import decode_request_header, response_header_version
from aiokproto.protocol.messages import request_class, response_class

_HHI = struct.Struct(">hhi")
_I = struct.Struct(">i")

# APIs whose answers name broker addresses (the client connects to what they say).
ADDRESS_APIS = frozenset({3, 10, 60})  # Metadata, FindCoordinator, DescribeCluster


def request_head(frame: bytes) -> tuple[int, int, int]:
    """``(api_key, version, correlation_id)`` of a request frame."""
    api_key, version, corr = _HHI.unpack_from(frame, 0)
    return api_key, version, corr


def request_body(frame: bytes) -> bytes:
    _, offset = decode_request_header(frame)
    return frame[offset:]


def response_header_size(api_key: int, version: int, frame: bytes) -> int:
    """Bytes of the response header (the correlation id, plus tagged fields if v1)."""
    if response_header_version(api_key, version) == 0:
        return 4
    # Brokers send an empty tag section; a recorded frame is trusted to have one.
    return 5


def response_body(api_key: int, version: int, frame: bytes) -> bytes:
    return frame[response_header_size(api_key, version, frame) :]


def response_frame(api_key: int, version: int, corr: int, body: bytes) -> bytes:
    head = _I.pack(corr)
    if response_header_version(api_key, version) >= 1:
        head += b"\x00"
    return head + body


def restamp(frame: bytes, corr: int) -> bytes:
    return _I.pack(corr) + frame[4:]


def size_prefixed(frame: bytes) -> bytes:
    return _I.pack(len(frame)) + frame


def _walk(obj: Any, visit: Any) -> None:
    """Call ``visit(struct)`` on ``obj`` and every struct nested in it."""
    if isinstance(obj, Struct):
        visit(obj)
        for f in dataclasses.fields(obj):  # type: ignore[arg-type]
            _walk(getattr(obj, f.name), visit)
    elif isinstance(obj, list):
        for item in obj:
            _walk(item, visit)


def move_addresses(api_key: int, version: int, body: bytes, host: str, port: int) -> bytes:
    """``body`` with every broker address in it replaced by ``host:port``."""
    cls = response_class(api_key)
    message = cls.decode(body, version)

    def visit(s: Any) -> None:
        # An empty host is a field the version does not carry (FindCoordinator v4+
        # keeps its addresses in the coordinators list).
        if getattr(s, "host", None) and isinstance(getattr(s, "port", None), int):
            s.host, s.port = host, port

    _walk(message, visit)
    return message.encode(version)


def reencode_response(api_key: int, body: bytes, old: int, new: int) -> bytes:
    """An answer recorded at version ``old`` re-encoded at ``new`` (ValueError if it
    cannot be: a field the new version lacks is set)."""
    cls = response_class(api_key)
    return cls.decode(body, old).encode(new)


# Request fields that legitimately differ between the recording and a replay of the
# same logical request: deadlines, record bytes (timestamps, CRCs) and the order of
# partitions (set iteration order depends on the hash seed).
def _normalise(obj: Any) -> Any:
    if isinstance(obj, list):
        items = [_normalise(item) for item in obj]
        return sorted(items, key=repr) if items and isinstance(items[0], Struct) else items
    if not isinstance(obj, Struct):
        return obj
    for f in dataclasses.fields(obj):  # type: ignore[arg-type]
        name = f.name
        value = getattr(obj, name)
        if name == "records":
            setattr(obj, name, None)
        elif isinstance(value, int) and not isinstance(value, bool):
            if name.endswith("_ms") or name == "timeout":
                setattr(obj, name, 0)
        elif isinstance(value, list | Struct):
            setattr(obj, name, _normalise(value))
    return obj


def request_signature(api_key: int, version: int, body: bytes) -> bytes:
    """What identifies a request for matching it with a recorded one."""
    try:
        message = request_class(api_key).decode(body, version)
        return _normalise(message).encode(version)  # type: ignore[no-any-return]
    except Exception:
        return body
