"""Admin takes the shared options only."""

# ruff: noqa: E501 - one call per line, so mypy's line numbers match the marks

from aiokproto import Admin


def build() -> None:
    Admin(bootstrap_servers="h:9092", request_timeout_ms=5_000, client_id="ops")
    Admin(bootstrap_servers="h:9092", linger_ms=5)  # E: Unexpected keyword argument "linger_ms" for "Admin"
    Admin(bootstrap_servers="h:9092", request_timeout_ms=None)  # E: Argument "request_timeout_ms" to "Admin" has incompatible type "None"; expected "int"
