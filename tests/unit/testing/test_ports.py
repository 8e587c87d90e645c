"""Free loopback ports for broker listeners."""

from __future__ import annotations

from aiokproto.testing.ports import free_ports


def test_free_ports_are_distinct() -> None:
    ports = free_ports(8)
    assert len(set(ports)) == 8
