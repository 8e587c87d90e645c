"""Shared pytest setup: the real-Kafka fixtures come from aiokproto's own plugin."""

pytest_plugins = ["aiokproto.testing.pytest_plugin"]
