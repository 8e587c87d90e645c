"""The harness's wire probe against a one-answer server: ApiVersions and Metadata
decoded, bad answers refused."""

from __future__ import annotations

import socket
import struct
import threading

import pytest

from aiokproto.testing import (
    ProbeError,
    api_versions,
    metadata,
)


def _serve_once(reply: bytes) -> tuple[int, threading.Thread]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)

    def run() -> None:
        with server:
            conn, _ = server.accept()
            with conn:
                (size,) = struct.unpack(">i", conn.recv(4))
                conn.recv(size)
                conn.sendall(struct.pack(">i", len(reply)) + reply)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return server.getsockname()[1], thread


def test_probe_decodes_api_versions() -> None:
    body = struct.pack(">ih", 0x5EED, 0) + struct.pack(">i", 2)
    body += struct.pack(">hhh", 3, 0, 12) + struct.pack(">hhh", 18, 0, 4)
    port, thread = _serve_once(body)
    assert api_versions("127.0.0.1", port) == {3: (0, 12), 18: (0, 4)}
    thread.join(5)


def test_probe_decodes_metadata() -> None:
    host = b"127.0.0.1"
    body = struct.pack(">ii", 0x5EED, 0) + struct.pack(">i", 1)
    body += struct.pack(">ih", 7, len(host)) + host + struct.pack(">ih", 9092, -1)
    body += struct.pack(">h", 3) + b"abc" + struct.pack(">ii", 7, 0)
    port, thread = _serve_once(body)
    md = metadata("127.0.0.1", port)
    assert md.cluster_id == "abc" and md.controller_id == 7 and md.broker_ids == {7}
    thread.join(5)


def test_probe_rejects_a_wrong_correlation_id() -> None:
    port, thread = _serve_once(struct.pack(">ih", 1, 0) + struct.pack(">i", 0))
    with pytest.raises(ProbeError):
        api_versions("127.0.0.1", port)
    thread.join(5)


def test_probe_rejects_truncated_bodies() -> None:
    port, thread = _serve_once(struct.pack(">ih", 0x5EED, 0) + struct.pack(">i", 5))
    with pytest.raises(ProbeError):
        api_versions("127.0.0.1", port)
    thread.join(5)
