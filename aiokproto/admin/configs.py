"""Admin config methods: describe and incrementally alter resource configs."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from aiokproto.admin import codecs
from aiokproto.admin.base import _TOPIC_GONE, MISSING_AFTER, AdminBase, Outcome, _error
from aiokproto.admin.types import (
    AlterConfigOp,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ConfigSynonym,
    ConfigType,
)
from aiokproto.errors import KafkaConfigError
from aiokproto.protocol.base import Request


class ConfigsMixin(AdminBase):
    """Resource configs; broker resources go to that broker, others to any."""

    async def describe_configs(
        self,
        resources: Iterable[ConfigResource],
        *,
        include_synonyms: bool = False,
        include_documentation: bool = False,
        timeout_ms: int | None = None,
    ) -> dict[ConfigResource, dict[str, ConfigEntry]]:
        """Configs of topics, brokers and other resources, by resource then name.

        Broker resources are asked of that broker (only it knows its static configs).
        """
        timeout = self._timeout(timeout_ms)
        keys = list(dict.fromkeys(resources))
        for res in keys:
            if not isinstance(res, ConfigResource):
                raise KafkaConfigError(f"describe_configs takes ConfigResource, not {res!r}")
            res.broker_id  # noqa: B018 - validates a broker resource's name
        DC = codecs.describe_configs

        async def send(node: int, pending: list[ConfigResource]) -> Outcome[ConfigResource, Any]:
            def build(version: int) -> Request:
                request = DC.DescribeConfigsRequest(
                    resources=[
                        DC.DescribeConfigsResource(
                            resource_type=r.type.value,
                            resource_name=r.name,
                            configuration_keys=None,
                        )
                        for r in pending
                    ]
                )
                if version >= 1:
                    request.include_synonyms = include_synonyms
                if version >= 3:
                    request.include_documentation = include_documentation
                return request

            version, response = await self._send(node, DC.DescribeConfigsRequest, build)
            by_key = {(r.type.value, r.name): r for r in pending}
            out: Outcome[ConfigResource, Any] = {}
            for r in response.results:
                res = by_key.get((r.resource_type, r.resource_name))
                if res is None:
                    continue
                if r.error_code:
                    out[res] = _error(r.error_code, r.error_message, repr(res))
                    continue
                out[res] = {
                    c.name: ConfigEntry(
                        name=c.name,
                        value=c.value,
                        source=ConfigSource.from_code(c.config_source),
                        is_read_only=c.read_only,
                        is_sensitive=c.is_sensitive,
                        synonyms=tuple(
                            ConfigSynonym(s.name, s.value, ConfigSource.from_code(s.source))
                            for s in (c.synonyms if version >= 1 else ())
                        ),
                        type=ConfigType.from_code(c.config_type),
                        documentation=c.documentation,
                    )
                    for c in r.configs
                }
            return out

        async def attempt(pending: list[ConfigResource]) -> Outcome[ConfigResource, Any]:
            return await self._per_node(self._route_configs(pending, self._any_node()), send)

        return await self._batch(
            "describe_configs", keys, attempt, timeout, final=_TOPIC_GONE, final_after=MISSING_AFTER
        )

    @staticmethod
    def _route_configs(
        resources: list[ConfigResource], default_node: int
    ) -> dict[int, list[ConfigResource]]:
        routes: dict[int, list[ConfigResource]] = defaultdict(list)
        for res in resources:
            broker = res.broker_id
            routes[default_node if broker is None else broker].append(res)
        return routes

    async def incremental_alter_configs(
        self,
        configs: Mapping[ConfigResource, Iterable[AlterConfigOp]],
        *,
        validate_only: bool = False,
        timeout_ms: int | None = None,
    ) -> dict[ConfigResource, None]:
        """SET / DELETE / APPEND / SUBTRACT config values of resources."""
        timeout = self._timeout(timeout_ms)
        ops: dict[ConfigResource, list[AlterConfigOp]] = {}
        for res, changes in configs.items():
            if not isinstance(res, ConfigResource):
                raise KafkaConfigError(
                    f"incremental_alter_configs keys are ConfigResource: {res!r}"
                )
            res.broker_id  # noqa: B018 - validates a broker resource's name
            ops[res] = list(changes)
            for op in ops[res]:
                if not isinstance(op, AlterConfigOp):
                    raise KafkaConfigError(f"{res!r}: {op!r} is not an AlterConfigOp")
        IA = codecs.incremental_alter_configs

        async def send(node: int, pending: list[ConfigResource]) -> Outcome[ConfigResource, None]:
            def build(version: int) -> Request:
                return IA.IncrementalAlterConfigsRequest(
                    resources=[
                        IA.IncrementalAlterConfigsRequestAlterConfigsResource(
                            resource_type=r.type.value,
                            resource_name=r.name,
                            configs=[
                                IA.IncrementalAlterConfigsRequestAlterableConfig(
                                    name=op.name, config_operation=op.op_type.value, value=op.value
                                )
                                for op in ops[r]
                            ],
                        )
                        for r in pending
                    ],
                    validate_only=validate_only,
                )

            _, response = await self._send(node, IA.IncrementalAlterConfigsRequest, build)
            by_key = {(r.type.value, r.name): r for r in pending}
            out: Outcome[ConfigResource, None] = {}
            for r in response.responses:
                res = by_key.get((r.resource_type, r.resource_name))
                if res is not None:
                    out[res] = (
                        _error(r.error_code, r.error_message, repr(res)) if r.error_code else None
                    )
            return out

        async def attempt(pending: list[ConfigResource]) -> Outcome[ConfigResource, None]:
            return await self._per_node(self._route_configs(pending, self._controller()), send)

        return await self._batch(
            "incremental_alter_configs", ops, attempt, timeout, final=_TOPIC_GONE
        )
