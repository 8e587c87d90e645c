"""Shared pytest setup: the real-Kafka fixtures come from aiokproto's own plugin."""

pytest_plugins = [
    "aiokproto.testing.pytest_plugin",
    # a local MIT KDC and a broker with GSSAPI listeners (tests/kerberos, the guides)
    "tests.kerberos.fixtures",
]
