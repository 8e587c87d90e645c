"""Admin ACL methods: create, describe and delete ACL bindings."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from aiokproto.admin import codecs
from aiokproto.admin.base import AdminBase, Outcome, _error
from aiokproto.admin.types import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)
from aiokproto.errors import KafkaConfigError
from aiokproto.protocol.base import Request

_T = TypeVar("_T")


def _distinct(items: Iterable[_T], cls: type[_T], method: str) -> list[_T]:
    """``items`` without repeats, each checked to be a ``cls``."""
    keys = list(dict.fromkeys(items))
    for item in keys:
        if not isinstance(item, cls):
            raise KafkaConfigError(f"{method} takes {cls.__name__}, not {item!r}")
    return keys


def _filter_fields(f: AclBindingFilter) -> dict[str, Any]:
    """A filter as DescribeAcls and DeleteAcls name its fields (the same in both)."""
    return {
        "resource_type_filter": f.resource_type.value,
        "resource_name_filter": f.name,
        "pattern_type_filter": f.pattern_type.value,
        "principal_filter": f.principal,
        "host_filter": f.host,
        "operation": f.operation.value,
        "permission_type": f.permission_type.value,
    }


class AclsMixin(AdminBase):
    """ACL administration, sent to the controller."""

    async def create_acls(
        self, acls: Iterable[AclBinding], *, timeout_ms: int | None = None
    ) -> dict[AclBinding, None]:
        """Create ACL bindings (needs an authorizer on the brokers)."""
        keys = _distinct(acls, AclBinding, "create_acls")
        CA = codecs.create_acls

        async def attempt(pending: list[AclBinding]) -> Outcome[AclBinding, None]:
            def build(version: int) -> Request:
                return CA.CreateAclsRequest(
                    creations=[
                        CA.CreateAclsRequestAclCreation(
                            resource_type=a.resource_type.value,
                            resource_name=a.name,
                            resource_pattern_type=a.pattern_type.value,
                            principal=a.principal,
                            host=a.host,
                            operation=a.operation.value,
                            permission_type=a.permission_type.value,
                        )
                        for a in pending
                    ]
                )

            _, response = await self._send(self._controller(), CA.CreateAclsRequest, build)
            # Results come back in the order of the creations.
            return {
                acl: _error(r.error_code, r.error_message, "ACL") if r.error_code else None
                for acl, r in zip(pending, response.results, strict=False)
            }

        return await self._batch("create_acls", keys, attempt, self._timeout(timeout_ms))

    async def describe_acls(
        self, acl_filter: AclBindingFilter | None = None, *, timeout_ms: int | None = None
    ) -> list[AclBinding]:
        """ACL bindings matching ``acl_filter`` (all of them by default)."""
        f = acl_filter or AclBindingFilter.any()
        DA = codecs.describe_acls

        async def call() -> list[AclBinding]:
            def build(version: int) -> Request:
                return DA.DescribeAclsRequest(**_filter_fields(f))

            _, response = await self._send(self._any_node(), DA.DescribeAclsRequest, build)
            if response.error_code:
                raise _error(response.error_code, response.error_message, "DescribeAcls")
            return [
                _binding(
                    r.resource_type,
                    r.resource_name,
                    r.pattern_type,
                    a.principal,
                    a.host,
                    a.operation,
                    a.permission_type,
                )
                for r in response.resources
                for a in r.acls
            ]

        return await self._single("describe_acls", call, self._timeout(timeout_ms))

    async def delete_acls(
        self, filters: Iterable[AclBindingFilter], *, timeout_ms: int | None = None
    ) -> dict[AclBindingFilter, list[AclBinding]]:
        """Delete the ACLs matching each filter; returns what each filter deleted."""
        keys = _distinct(filters, AclBindingFilter, "delete_acls")
        DA = codecs.delete_acls

        async def attempt(pending: list[AclBindingFilter]) -> Outcome[AclBindingFilter, Any]:
            def build(version: int) -> Request:
                return DA.DeleteAclsRequest(
                    filters=[
                        DA.DeleteAclsFilter(**_filter_fields(f))
                        for f in pending
                    ]
                )

            _, response = await self._send(self._controller(), DA.DeleteAclsRequest, build)
            out: Outcome[AclBindingFilter, Any] = {}
            for f, r in zip(pending, response.filter_results, strict=False):
                if r.error_code:
                    out[f] = _error(r.error_code, r.error_message, "DeleteAcls filter")
                    continue
                failed = [m for m in r.matching_acls if m.error_code]
                if failed:
                    out[f] = _error(failed[0].error_code, failed[0].error_message, "deleting ACL")
                    continue
                out[f] = [
                    _binding(
                        m.resource_type,
                        m.resource_name,
                        m.pattern_type,
                        m.principal,
                        m.host,
                        m.operation,
                        m.permission_type,
                    )
                    for m in r.matching_acls
                ]
            return out

        return await self._batch("delete_acls", keys, attempt, self._timeout(timeout_ms))


def _binding(
    resource_type: int,
    name: str,
    pattern_type: int,
    principal: str,
    host: str,
    operation: int,
    permission_type: int,
) -> AclBinding:
    return AclBinding(
        ResourceType.from_code(resource_type),
        name,
        ResourcePatternType.from_code(pattern_type),
        principal,
        host,
        AclOperation.from_code(operation),
        AclPermissionType.from_code(permission_type),
    )
