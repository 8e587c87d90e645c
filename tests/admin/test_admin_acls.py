"""ACLs against a broker with KRaft's StandardAuthorizer (started once for this module)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

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
from aiokproto.errors import InvalidRequestError, KafkaConfigError
from aiokproto.testing import LocalKafka

ALLOW = AclPermissionType.ALLOW


def binding(name: str, principal: str, op: AclOperation = AclOperation.READ) -> AclBinding:
    return AclBinding(
        ResourceType.TOPIC, name, ResourcePatternType.LITERAL, principal, "*", op, ALLOW
    )


async def test_create_describe_delete_acls(acl_kafka: LocalKafka) -> None:
    topic = f"acl-{uuid.uuid4().hex[:8]}"
    read = binding(topic, "User:alice")
    write = binding(topic, "User:alice", AclOperation.WRITE)
    prefixed = AclBinding(
        ResourceType.GROUP,
        "team-",
        ResourcePatternType.PREFIXED,
        "User:bob",
        "*",
        AclOperation.ALL,
        AclPermissionType.DENY,
    )
    broken = binding(topic, "alice-without-type")  # principals are "Type:name"
    async with Admin(bootstrap_servers=acl_kafka.bootstrap_servers) as admin:
        with pytest.raises(AdminBatchError) as info:
            await admin.create_acls([read, write, prefixed, broken])
        assert info.value.results == {read: None, write: None, prefixed: None}
        assert isinstance(info.value.errors[broken], InvalidRequestError)

        by_topic = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL)
        # ACL changes reach the broker's authorizer through the metadata log.
        async with asyncio.timeout(10):
            while len(found := await admin.describe_acls(by_topic)) < 2:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        assert set(found) == {read, write}
        everything = await admin.describe_acls()
        assert {read, write, prefixed} <= set(everything)

        only_write = AclBindingFilter(ResourceType.TOPIC, topic, operation=AclOperation.WRITE)
        nothing = AclBindingFilter(ResourceType.TOPIC, "no-such-" + topic)
        deleted = await admin.delete_acls([only_write, nothing])
        assert deleted == {only_write: [write], nothing: []}
        by_bob = AclBindingFilter(principal="User:bob")
        assert await admin.delete_acls([by_bob]) == {by_bob: [prefixed]}
        async with asyncio.timeout(10):
            while len(found := await admin.describe_acls(by_topic)) > 1:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        assert found == [read]


def test_acl_binding_rejects_filter_values() -> None:
    with pytest.raises(KafkaConfigError, match="ANY"):
        binding("t", "User:a", AclOperation.ANY)
    with pytest.raises(KafkaConfigError):
        AclBinding(
            ResourceType.TOPIC,
            "t",
            ResourcePatternType.MATCH,
            "User:a",
            "*",
            AclOperation.READ,
            ALLOW,
        )
