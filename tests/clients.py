"""Test helper: a ``ClusterClient`` from keyword options, as the public clients take them."""

from __future__ import annotations

from typing import Any

from aiokproto.cluster.client import ClusterClient
from aiokproto.config import split_options


def client_for(bootstrap: str, **options: Any) -> ClusterClient:
    config, _ = split_options({"bootstrap_servers": bootstrap, **options}, (), "test")
    return ClusterClient(config)
