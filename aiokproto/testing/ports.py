"""Free loopback ports for broker listeners."""

from __future__ import annotations

import socket


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """Return ``count`` distinct ports that were free on ``host`` a moment ago.

    All sockets stay bound until every port is picked, so the kernel cannot hand the
    same port out twice within one call. Another process may still grab a port before
    the broker binds it; a broker start failing with "Address already in use" is rare
    and shows up in the log tail of the error.
    """
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((host, 0))
            sockets.append(sock)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for sock in sockets:
            sock.close()
