"""Producer options: an unknown name, a wrong type, a missing required option."""

# ruff: noqa: E501, F841 - one call per line, so mypy's line numbers match the marks

from aiokproto import Producer
from aiokproto.options import ProducerOptions


def build() -> None:
    Producer(bootstrap_servers="localhost:9092", linger_msec=5)  # E: Unexpected keyword argument "linger_msec" for overloaded function "Producer"; did you mean "linger_ms"?
    Producer(bootstrap_servers="localhost:9092", linger_ms="5")  # E: No overload variant of "Producer" matches argument types "str", "str"
    Producer(bootstrap_servers="localhost:9092", acks="none")  # E: No overload variant
    Producer(bootstrap_servers="localhost:9092", compression_type="brotli")  # E: No overload variant
    Producer(linger_ms=5)  # E: No overload variant
    # accepted: every form a program uses
    Producer(bootstrap_servers=["h1:9092", "h2:9092"], linger_ms=5, acks="all")
    Producer(bootstrap_servers="h:9092", acks=1, compression_type="zstd", retries=3)
    Producer(bootstrap_servers="h:9092", security_protocol="SASL_SSL", sasl_plain_username="u")
    options: ProducerOptions = {"bootstrap_servers": "h:9092", "enable_idempotence": False}
    Producer(**options)
    bad: ProducerOptions = {"bootstrap_servers": "h:9092", "batch_sise": 1}  # E: Extra key "batch_sise" for TypedDict "ProducerOptions"
