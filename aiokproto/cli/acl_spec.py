"""Pure parts of ``aiokproto acls``: Kafka's names for resource types, operations,
pattern and permission types, and the bindings and filters the options stand for.

Names are read as kafka-acls writes them and in any case or separator style:
``Read``, ``DescribeConfigs``, ``describe-configs`` and ``DESCRIBE_CONFIGS`` are one
operation; ``TransactionalId`` and ``transactional-id`` one resource type.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeVar

from aiokproto.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

E = TypeVar("E", bound=Enum)

CLUSTER_NAME = "kafka-cluster"  # the one name a CLUSTER resource has
#: members that only filters may use (a binding names one specific thing)
FILTER_ONLY = frozenset({"ANY", "MATCH"})


class AclSpecError(ValueError):
    """Options that do not make an ACL or a filter (a usage error)."""


def _key(text: str) -> str:
    return text.replace("-", "").replace("_", "").lower()


def kafka_name(member: Enum) -> str:
    """``DESCRIBE_CONFIGS`` as kafka-acls writes it: ``DescribeConfigs``."""
    return "".join(part.capitalize() for part in member.name.split("_"))


def choices(kind: type[E], *, filters: bool) -> list[E]:
    """The members a user may name (UNKNOWN never; ANY and MATCH only in filters)."""
    return [m for m in kind if m.name != "UNKNOWN" and (filters or m.name not in FILTER_ONLY)]


def parse_name(kind: type[E], text: str, *, filters: bool, option: str) -> E:
    wanted = _key(text)
    allowed = choices(kind, filters=filters)
    for member in allowed:
        if _key(member.name) == wanted:
            return member
    names = ", ".join(kafka_name(m) for m in allowed)
    raise AclSpecError(f"{option} {text!r}: use one of {names}")


@dataclass(frozen=True, slots=True)
class AclOptions:
    """The options of one ``acls`` command, parsed; None and empty mean "not given"."""

    resource_type: ResourceType | None = None
    resource_name: str | None = None
    pattern_type: ResourcePatternType | None = None
    principals: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()
    operations: tuple[AclOperation, ...] = ()
    permission: AclPermissionType | None = None

    @property
    def matches_everything(self) -> bool:
        return (
            self.resource_type in (None, ResourceType.ANY)
            and self.resource_name is None
            and self.pattern_type in (None, ResourcePatternType.ANY)
            and not self.principals
            and not self.hosts
            and all(o is AclOperation.ANY for o in self.operations)
            and self.permission in (None, AclPermissionType.ANY)
        )


def resolve_resource(
    resource_type: ResourceType | None,
    resource_name: str | None,
    *,
    topic: str | None = None,
    group: str | None = None,
    transactional_id: str | None = None,
    cluster: bool = False,
) -> tuple[ResourceType | None, str | None]:
    """``--resource-type``/``--resource-name`` or one of kafka-acls' shortcuts
    (``--topic NAME``, ``--group NAME``, ``--transactional-id NAME``, ``--cluster``)."""
    shortcuts = [
        (ResourceType.TOPIC, topic, "--topic"),
        (ResourceType.GROUP, group, "--group"),
        (ResourceType.TRANSACTIONAL_ID, transactional_id, "--transactional-id"),
        (ResourceType.CLUSTER, CLUSTER_NAME if cluster else None, "--cluster"),
    ]
    given = [(t, n, o) for t, n, o in shortcuts if n is not None]
    if resource_type is not None or resource_name is not None:
        given_opts = [o for _, _, o in given]
        if given_opts:
            raise AclSpecError(
                f"give --resource-type/--resource-name or {given_opts[0]}, not both"
            )
        if resource_type is ResourceType.CLUSTER and resource_name is None:
            resource_name = CLUSTER_NAME
        return resource_type, resource_name
    if len(given) > 1:
        raise AclSpecError(f"give one resource, not {' and '.join(o for _, _, o in given)}")
    if given:
        return given[0][0], given[0][1]
    return None, None


def _check_principal(principal: str) -> str:
    kind, sep, name = principal.partition(":")
    if not sep or not kind or not name:
        raise AclSpecError(f"--principal {principal!r}: write Type:name, e.g. User:alice")
    return principal


def bindings(opts: AclOptions) -> list[AclBinding]:
    """What ``acls create`` adds: one binding per principal x host x operation (as
    kafka-acls does). Defaults: LITERAL pattern, host ``*``, permission ALLOW."""
    if opts.resource_type is None or opts.resource_type is ResourceType.ANY:
        raise AclSpecError(
            "name a resource: --resource-type TYPE --resource-name NAME, or --topic, "
            "--group, --transactional-id, --cluster"
        )
    if not opts.resource_name:
        raise AclSpecError(f"--resource-name: which {kafka_name(opts.resource_type)}?")
    if not opts.principals:
        raise AclSpecError("--principal is required, e.g. --principal User:alice")
    if not opts.operations:
        raise AclSpecError("--operation is required, e.g. --operation Read")
    bad = [o for o in opts.operations if o is AclOperation.ANY]
    if bad:
        raise AclSpecError("--operation Any only filters; an ACL names an operation (or All)")
    pattern = opts.pattern_type or ResourcePatternType.LITERAL
    if pattern.name in FILTER_ONLY:
        raise AclSpecError(f"--pattern-type {kafka_name(pattern)} only filters; use Literal "
                           "or Prefixed")
    permission = opts.permission or AclPermissionType.ALLOW
    if permission is AclPermissionType.ANY:
        raise AclSpecError("--permission Any only filters; use Allow or Deny")
    return [
        AclBinding(opts.resource_type, opts.resource_name, pattern, _check_principal(p), host,
                   op, permission)
        for p, host, op in itertools.product(opts.principals, opts.hosts or ("*",),
                                             opts.operations)
    ]


def filters(opts: AclOptions) -> list[AclBindingFilter]:
    """What ``acls list``/``delete`` match: one filter per principal x host x operation
    given; what is not given matches anything (the pattern type too: ANY)."""
    for p in opts.principals:
        _check_principal(p)
    return [
        AclBindingFilter(
            opts.resource_type or ResourceType.ANY,
            opts.resource_name,
            opts.pattern_type or ResourcePatternType.ANY,
            principal,
            host,
            op,
            opts.permission or AclPermissionType.ANY,
        )
        for principal, host, op in itertools.product(
            _or_any(opts.principals), _or_any(opts.hosts), opts.operations or (AclOperation.ANY,)
        )
    ]


def _or_any(values: Sequence[str]) -> Sequence[str | None]:
    return values or (None,)


def sort_bindings(found: Iterable[AclBinding]) -> list[AclBinding]:
    """Distinct, in a stable order: by resource, then principal, host, operation."""
    return sorted(
        set(found),
        key=lambda b: (b.resource_type.value, b.name, b.pattern_type.value, b.principal,
                       b.host, b.operation.value, b.permission_type.value),
    )


COLUMNS = ["Resource", "Name", "Pattern", "Principal", "Host", "Operation", "Permission"]


def row(b: AclBinding) -> list[str]:
    return [kafka_name(b.resource_type), b.name, kafka_name(b.pattern_type), b.principal,
            b.host, kafka_name(b.operation), kafka_name(b.permission_type)]


def as_data(b: AclBinding) -> dict[str, Any]:
    """One binding for ``--output json`` (Kafka's enum names, as the Java Admin has them)."""
    return {
        "resource_type": b.resource_type.name,
        "resource_name": b.name,
        "pattern_type": b.pattern_type.name,
        "principal": b.principal,
        "host": b.host,
        "operation": b.operation.name,
        "permission_type": b.permission_type.name,
    }
