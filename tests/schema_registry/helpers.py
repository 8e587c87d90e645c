"""Schemas and small helpers shared by the schema registry tests."""

from __future__ import annotations

import json
from typing import Any

import httpx

ORDER_V1 = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "namespace": "shop",
        "fields": [{"name": "id", "type": "int"}, {"name": "amount", "type": "double"}],
    }
)
# v1 plus a field with a default: BACKWARD and FORWARD compatible with v1
ORDER_V2 = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "namespace": "shop",
        "fields": [
            {"name": "id", "type": "int"},
            {"name": "amount", "type": "double"},
            {"name": "note", "type": "string", "default": ""},
        ],
    }
)
# v1 with a new field and no default: a v2 reader cannot read v1 records (not BACKWARD)
ORDER_NO_DEFAULT = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "namespace": "shop",
        "fields": [
            {"name": "id", "type": "int"},
            {"name": "amount", "type": "double"},
            {"name": "currency", "type": "string"},
        ],
    }
)


class CountingTransport(httpx.AsyncBaseTransport):
    """httpx's transport, counting requests by ``"METHOD path"``."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self.counts: dict[str, int] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        key = f"{request.method} {request.url.path}"
        self.counts[key] = self.counts.get(key, 0) + 1
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()

    def matching(self, method: str, suffix: str) -> int:
        return sum(n for k, n in self.counts.items() if k.startswith(method) and k.endswith(suffix))


def registry_conf(url: str, **extra: Any) -> dict[str, Any]:
    return {"url": url, "retries.wait.ms": 20, "retries.max.wait.ms": 100, **extra}


ORDER_JSON = json.dumps(
    {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Order",
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}},
                    "required": ["sku"],
                },
            },
        },
        "required": ["id"],
    }
)
