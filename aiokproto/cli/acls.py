"""``aiokproto acls list|create|delete``: Admin's ACL calls (need an authorizer on the
brokers, e.g. ``authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Iterator
from enum import Enum
from typing import Any

import click
from rich.console import Console

from aiokproto.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    Admin,
    AdminBatchError,
    ResourcePatternType,
    ResourceType,
)
from aiokproto.cli.acl_spec import (
    COLUMNS,
    AclOptions,
    AclSpecError,
    as_data,
    bindings,
    choices,
    filters,
    kafka_name,
    parse_name,
    resolve_resource,
    row,
    sort_bindings,
)
from aiokproto.cli.common import CliError, Settings, command, out, print_json, table, usage
from aiokproto.errors import SecurityDisabledError

acls = click.Group("acls", help="Access control lists: list, create and delete ACLs.")


class KafkaName(click.ParamType[Enum, Any]):
    """A member of one of the ACL enums, named as kafka-acls names it (any case)."""

    def __init__(self, kind: type[Enum], *, filters: bool) -> None:
        self.kind = kind
        self.filters = filters
        self.name = kind.__name__

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> Enum:
        if isinstance(value, self.kind):
            return value
        try:
            return parse_name(self.kind, str(value), filters=self.filters, option="")
        except AclSpecError as exc:
            self.fail(str(exc).strip(), param, ctx)


def _names(kind: type[Enum], filters: bool) -> str:
    return "|".join(kafka_name(m) for m in choices(kind, filters=filters))


def _options(*, filtering: bool) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The resource, principal, host, operation and permission options; in a filter
    (list, delete) each may be left out to match anything."""
    each = "; repeatable"
    made = [
        click.option("--resource-type", type=KafkaName(ResourceType, filters=filtering),
                     metavar=_names(ResourceType, filtering), help="The resource's type."),
        click.option("--resource-name", metavar="NAME",
                     help="The resource's name (a prefix with --pattern-type Prefixed)."),
        click.option("--topic", metavar="NAME", help="Same as --resource-type Topic "
                     "--resource-name NAME."),
        click.option("--group", metavar="NAME", help="A consumer group resource."),
        click.option("--transactional-id", metavar="NAME", help="A transactional id resource."),
        click.option("--cluster", is_flag=True, help="The cluster resource (kafka-cluster)."),
        click.option("--pattern-type", "--resource-pattern-type", "pattern_type",
                     type=KafkaName(ResourcePatternType, filters=filtering),
                     metavar=_names(ResourcePatternType, filtering),
                     help="[default: Any]" if filtering else "[default: Literal]"),
        click.option("--principal", "principals", multiple=True, metavar="TYPE:NAME",
                     help=f"e.g. User:alice{each}."),
        click.option("--host", "hosts", multiple=True, metavar="HOST",
                     help=f"Client host{each}." + ("" if filtering else " [default: *]")),
        click.option("--operation", "operations", multiple=True,
                     type=KafkaName(AclOperation, filters=filtering),
                     metavar=_names(AclOperation, filtering), help=f"The operation{each}."),
        click.option("--permission", type=KafkaName(AclPermissionType, filters=filtering),
                     metavar=_names(AclPermissionType, filtering),
                     help="[default: Any]" if filtering else "[default: Allow]"),
    ]

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed(made):
            fn = option(fn)
        return fn

    return decorate


def _parse(kwargs: dict[str, Any]) -> AclOptions:
    try:
        rtype, rname = resolve_resource(
            kwargs.pop("resource_type"), kwargs.pop("resource_name"),
            topic=kwargs.pop("topic"), group=kwargs.pop("group"),
            transactional_id=kwargs.pop("transactional_id"), cluster=kwargs.pop("cluster"),
        )
    except AclSpecError as exc:
        usage(str(exc))
    return AclOptions(rtype, rname, kwargs.pop("pattern_type"), tuple(kwargs.pop("principals")),
                      tuple(kwargs.pop("hosts")), tuple(kwargs.pop("operations")),
                      kwargs.pop("permission"))


@contextlib.contextmanager
def _authorizer_needed() -> Iterator[None]:
    """A cluster without an authorizer answers SECURITY_DISABLED: say what it means."""
    try:
        yield
    except (SecurityDisabledError, AdminBatchError) as exc:
        errors = list(exc.errors.values()) if isinstance(exc, AdminBatchError) else [exc]
        if errors and all(isinstance(e, SecurityDisabledError) for e in errors):
            raise CliError(
                "the cluster has no authorizer (SecurityDisabledError): ACLs need "
                "authorizer.class.name set on the brokers"
            ) from None
        raise


async def _settle(
    admin: Admin, timeout_s: float, present: Iterable[AclBinding], absent: Iterable[AclBinding]
) -> None:
    """Wait until the brokers' authorizer shows the change: ACLs reach it through the
    metadata log after the controller answers, and the next command should see them."""
    want, gone = set(present), set(absent)
    resources = {(b.resource_type, b.name, b.pattern_type) for b in want | gone}
    looking = [AclBindingFilter(t, n, p) for t, n, p in resources]
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                seen: set[AclBinding] = set()
                for f in looking:
                    seen.update(await admin.describe_acls(f))
                if want <= seen and not gone & seen:
                    return
                await asyncio.sleep(0.05)
    except TimeoutError:
        pass  # done on the controller; the authorizer just lags: not worth failing over


def _show(title: str, found: list[AclBinding]) -> None:
    t = table(title, COLUMNS, [row(b) for b in found])
    for column in t.columns:
        column.overflow = "fold"  # a narrow terminal wraps a principal, never cuts it
    # into a pipe or a file: each row on one line, however long
    (out if out.is_terminal else Console(soft_wrap=True, width=1_000)).print(t)


@command(acls, "list")
@_options(filtering=True)
async def list_acls(settings: Settings, **kwargs: Any) -> None:
    """ACLs matching the options (every ACL without any)."""
    opts = _parse(kwargs)
    try:
        wanted = filters(opts)
    except AclSpecError as exc:
        usage(str(exc))
    found: list[AclBinding] = []
    async with settings.admin() as admin:
        with _authorizer_needed():
            for f in wanted:
                found.extend(await admin.describe_acls(f))
    result = sort_bindings(found)
    if settings.json:
        print_json([as_data(b) for b in result])
    elif result:
        _show(f"{len(result)} ACL{'s' if len(result) != 1 else ''}", result)
    else:
        out.print("no ACLs match", highlight=False)


@command(acls, "create")
@_options(filtering=False)
async def create_acls(settings: Settings, **kwargs: Any) -> None:
    """Add ACLs: one per --principal x --host x --operation on the resource."""
    opts = _parse(kwargs)
    try:
        new = bindings(opts)
    except AclSpecError as exc:
        usage(str(exc))
    async with settings.admin() as admin:
        with _authorizer_needed():
            await admin.create_acls(new)
        await _settle(admin, settings.timeout_ms / 1000, new, ())
    created = sort_bindings(new)
    if settings.json:
        print_json({"created": [as_data(b) for b in created]})
    else:
        _show(f"created {len(created)} ACL{'s' if len(created) != 1 else ''}", created)


@command(acls, "delete")
@_options(filtering=True)
@click.option("--all", "everything", is_flag=True,
              help="Allow a filter that matches every ACL (no other option given).")
async def delete_acls(settings: Settings, everything: bool, **kwargs: Any) -> None:
    """Delete the ACLs matching the options (see `acls list` with the same options)."""
    opts = _parse(kwargs)
    if opts.matches_everything and not everything:
        usage("this would delete every ACL: narrow it down (--topic, --principal...) or "
              "add --all")
    try:
        wanted = filters(opts)
    except AclSpecError as exc:
        usage(str(exc))
    async with settings.admin() as admin:
        with _authorizer_needed():
            deleted = await admin.delete_acls(wanted)
        gone = sort_bindings(b for found in deleted.values() for b in found)
        await _settle(admin, settings.timeout_ms / 1000, (), gone)
    if settings.json:
        print_json({"deleted": [as_data(b) for b in gone]})
    elif gone:
        _show(f"deleted {len(gone)} ACL{'s' if len(gone) != 1 else ''}", gone)
    else:
        out.print("no ACLs match: nothing deleted", highlight=False)
