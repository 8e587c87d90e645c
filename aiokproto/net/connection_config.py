"""Settings shared by every connection of a client (``ConnectionConfig``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from aiokproto.errors import KafkaConfigError
from aiokproto.net.security import SecurityConfig


@dataclass(frozen=True, slots=True)
class ConnectionConfig:
    """Per-connection behaviour; names follow Java's configs in snake_case."""

    client_id: str = "aiokproto"
    request_timeout_ms: int = 30_000
    socket_connection_setup_timeout_ms: int = 10_000
    max_in_flight_requests_per_connection: int = 5
    connections_max_idle_ms: int = 540_000
    # Largest response frame accepted; checked before any buffer is allocated.
    max_response_size: int = 256 * 1024 * 1024
    security: SecurityConfig = field(default_factory=SecurityConfig)

    def __post_init__(self) -> None:
        for name in (
            "request_timeout_ms",
            "socket_connection_setup_timeout_ms",
            "max_in_flight_requests_per_connection",
            "connections_max_idle_ms",
            "max_response_size",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise KafkaConfigError(f"{name} must be a positive int, not {value!r}")
        if not isinstance(self.client_id, str):
            raise KafkaConfigError(f"client_id must be a str, not {self.client_id!r}")
