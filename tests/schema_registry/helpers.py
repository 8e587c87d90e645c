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


def protobuf_classes() -> dict[str, Any]:
    """Message classes of two files built at run time (no protoc): ``shop/money.proto``
    (Money) and ``shop/order.proto`` importing it (Order with a nested Line, Refund)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fdp = descriptor_pb2.FieldDescriptorProto
    money = descriptor_pb2.FileDescriptorProto(
        name="shop/money.proto", package="shop", syntax="proto3"
    )
    m = money.message_type.add(name="Money")
    m.field.add(name="cents", number=1, type=fdp.TYPE_INT64, label=fdp.LABEL_OPTIONAL)
    order = descriptor_pb2.FileDescriptorProto(
        name="shop/order.proto", package="shop", syntax="proto3", dependency=["shop/money.proto"]
    )
    o = order.message_type.add(name="Order")
    o.field.add(name="id", number=1, type=fdp.TYPE_INT32, label=fdp.LABEL_OPTIONAL)
    o.field.add(
        name="total",
        number=2,
        type=fdp.TYPE_MESSAGE,
        type_name=".shop.Money",
        label=fdp.LABEL_OPTIONAL,
    )
    line = o.nested_type.add(name="Line")
    line.field.add(name="sku", number=1, type=fdp.TYPE_STRING, label=fdp.LABEL_OPTIONAL)
    r = order.message_type.add(name="Refund")
    r.field.add(name="id", number=1, type=fdp.TYPE_INT32, label=fdp.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(money)
    pool.Add(order)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"shop.{name}"))
        for name in ("Money", "Order", "Order.Line", "Refund")
    }
