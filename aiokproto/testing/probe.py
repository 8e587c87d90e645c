"""A tiny blocking Kafka client used only to tell that a broker is really up.

It sends ApiVersions v0 and Metadata v4 (the oldest Metadata version that both Kafka
3.9 and 4.x accept; KIP-896 removed v0-3) with the project's generated codecs, over a
plain blocking socket so it can run outside any event loop.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass
from typing import TypeVar

from aiokproto.errors import KafkaError
from aiokproto.protocol.base import Request, Response
from aiokproto.protocol.headers import decode_response_header, encode_request
from aiokproto.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from aiokproto.protocol.messages.metadata import MetadataRequest, MetadataResponse
from aiokproto.testing.errors import KafkaHarnessError

API_METADATA = 3
API_VERSIONS = 18
_CLIENT_ID = "aiokproto-harness"
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


R = TypeVar("R", bound=Response)


def _round_trip(
    host: str, port: int, request: Request, version: int, response_cls: type[R], timeout: float
) -> R:
    correlation_id = 0x5EED
    frame = encode_request(request, version, correlation_id, _CLIENT_ID)
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(frame)
        (size,) = struct.unpack(">i", _recv_exact(sock, 4))
        if not 4 <= size <= _MAX_FRAME:
            raise ProbeError(f"implausible response size {size}")
        payload = _recv_exact(sock, size)
    try:
        # both versions used here have response header v0 (correlation id only)
        got, offset = decode_response_header(payload, 0)
        if got != correlation_id:
            raise ProbeError(f"correlation id mismatch: sent {correlation_id}, got {got}")
        return response_cls.decode(memoryview(payload)[offset:], version)
    except KafkaError as exc:
        raise ProbeError(f"undecodable {response_cls.__name__} v{version}: {exc}") from exc


def api_versions(host: str, port: int, timeout: float = 2.0) -> dict[int, tuple[int, int]]:
    """ApiVersions v0: ``{api_key: (min_version, max_version)}``."""
    response = _round_trip(host, port, ApiVersionsRequest(), 0, ApiVersionsResponse, timeout)
    if response.error_code != 0:
        raise ProbeError(f"ApiVersions v0 returned error code {response.error_code}")
    return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}


def metadata(host: str, port: int, timeout: float = 2.0) -> ClusterMetadata:
    """Metadata v4 asking for no topics: which brokers are registered and alive."""
    # topics: an empty list (None would mean all topics); no auto-creation.
    request = MetadataRequest(topics=[], allow_auto_topic_creation=False)
    response = _round_trip(host, port, request, 4, MetadataResponse, timeout)
    brokers = sorted(
        (BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in response.brokers),
        key=lambda b: b.node_id,
    )
    return ClusterMetadata(response.cluster_id, response.controller_id, tuple(brokers))
