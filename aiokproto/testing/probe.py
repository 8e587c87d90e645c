"""A tiny blocking Kafka wire client used only to tell that a broker is really up.

It hand-encodes ApiVersions v0 and Metadata v4 (the oldest Metadata version that both
Kafka 3.9 and 4.x accept, KIP-896 removed v0-3) and deliberately does not depend on
``aiokproto.protocol``: the harness must work while the real codecs are being built.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass

from aiokproto.testing.errors import KafkaHarnessError

API_METADATA = 3
API_VERSIONS = 18
_CLIENT_ID = b"aiokproto-harness"
_MAX_FRAME = 64 * 1024 * 1024


class ProbeError(KafkaHarnessError):
    """The broker answered, but not with what a healthy broker sends."""


@dataclass(frozen=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None


@dataclass(frozen=True)
class ClusterMetadata:
    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerInfo, ...]

    @property
    def broker_ids(self) -> frozenset[int]:
        return frozenset(b.node_id for b in self.brokers)


class _Reader:
    """Cursor over one response body; every read is bounds-checked."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self._pos + n > len(self._data):
            raise ProbeError(f"truncated response: wanted {n} bytes at offset {self._pos}")
        chunk = self._data[self._pos : self._pos + n]
        self._pos += n
        return chunk

    def int8(self) -> int:
        return int(struct.unpack(">b", self.take(1))[0])

    def int16(self) -> int:
        return int(struct.unpack(">h", self.take(2))[0])

    def int32(self) -> int:
        return int(struct.unpack(">i", self.take(4))[0])

    def nullable_string(self) -> str | None:
        length = self.int16()
        return None if length < 0 else self.take(length).decode("utf-8")

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise ProbeError("null where a string is required")
        return value


def _request(api_key: int, api_version: int, correlation_id: int, body: bytes) -> bytes:
    # Request header v1: api_key, api_version, correlation_id, client_id (nullable string).
    header = struct.pack(">hhih", api_key, api_version, correlation_id, len(_CLIENT_ID))
    payload = header + _CLIENT_ID + body
    return struct.pack(">i", len(payload)) + payload


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    parts: list[bytes] = []
    remaining = n
    while remaining:
        chunk = sock.recv(min(remaining, 65536))
        if not chunk:
            raise ProbeError("connection closed by the broker mid-response")
        parts.append(chunk)
        remaining -= len(chunk)
    return b"".join(parts)


def _round_trip(
    host: str, port: int, api_key: int, api_version: int, body: bytes, timeout: float
) -> _Reader:
    correlation_id = 0x5EED
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(_request(api_key, api_version, correlation_id, body))
        (size,) = struct.unpack(">i", _recv_exact(sock, 4))
        if not 4 <= size <= _MAX_FRAME:
            raise ProbeError(f"implausible response size {size}")
        reader = _Reader(_recv_exact(sock, size))
    got = reader.int32()  # response header v0: correlation_id only
    if got != correlation_id:
        raise ProbeError(f"correlation id mismatch: sent {correlation_id}, got {got}")
    return reader


def api_versions(host: str, port: int, timeout: float = 2.0) -> dict[int, tuple[int, int]]:
    """ApiVersions v0: ``{api_key: (min_version, max_version)}``."""
    reader = _round_trip(host, port, API_VERSIONS, 0, b"", timeout)
    error = reader.int16()
    if error != 0:
        raise ProbeError(f"ApiVersions v0 returned error code {error}")
    count = reader.int32()
    versions: dict[int, tuple[int, int]] = {}
    for _ in range(max(count, 0)):
        key, low, high = reader.int16(), reader.int16(), reader.int16()
        versions[key] = (low, high)
    return versions


def metadata(host: str, port: int, timeout: float = 2.0) -> ClusterMetadata:
    """Metadata v4 asking for no topics: which brokers are registered and alive."""
    # topics: empty array (not null, which would mean all topics); no auto-creation.
    body = struct.pack(">ib", 0, 0)
    reader = _round_trip(host, port, API_METADATA, 4, body, timeout)
    reader.int32()  # throttle_time_ms
    brokers = []
    for _ in range(max(reader.int32(), 0)):
        node_id = reader.int32()
        broker_host = reader.string()
        broker_port = reader.int32()
        rack = reader.nullable_string()
        brokers.append(BrokerInfo(node_id, broker_host, broker_port, rack))
    cluster_id = reader.nullable_string()
    controller_id = reader.int32()
    brokers.sort(key=lambda b: b.node_id)
    return ClusterMetadata(cluster_id, controller_id, tuple(brokers))
