"""Pure parts of ``aiokproto acls``: Kafka's names, resource shortcuts, bindings and filters."""

from __future__ import annotations

import pytest

from aiokproto.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)
from aiokproto.cli.acl_spec import (
    AclOptions,
    AclSpecError,
    bindings,
    filters,
    kafka_name,
    parse_name,
    resolve_resource,
)

R, W = AclOperation.READ, AclOperation.WRITE


@pytest.mark.parametrize("text", ["DescribeConfigs", "describe-configs", "DESCRIBE_CONFIGS",
                                  "describeconfigs"])
def test_operation_names_as_kafka_acls_writes_them(text: str) -> None:
    assert parse_name(AclOperation, text, filters=False, option="") is (
        AclOperation.DESCRIBE_CONFIGS)


def test_names_filter_only_members_and_errors() -> None:
    assert kafka_name(ResourceType.TRANSACTIONAL_ID) == "TransactionalId"
    assert parse_name(ResourcePatternType, "match", filters=True, option="") is (
        ResourcePatternType.MATCH)
    with pytest.raises(AclSpecError, match=r"Literal, Prefixed$"):
        parse_name(ResourcePatternType, "match", filters=False, option="--pattern-type")
    with pytest.raises(AclSpecError, match="use one of"):
        parse_name(AclOperation, "unknown", filters=True, option="")


def test_resources_from_shortcuts() -> None:
    assert resolve_resource(None, None, topic="t") == (ResourceType.TOPIC, "t")
    assert resolve_resource(None, None, cluster=True) == (ResourceType.CLUSTER, "kafka-cluster")
    assert resolve_resource(ResourceType.CLUSTER, None) == (ResourceType.CLUSTER, "kafka-cluster")
    assert resolve_resource(None, "x") == (None, "x")
    assert resolve_resource(None, None) == (None, None)
    with pytest.raises(AclSpecError, match="not both"):
        resolve_resource(ResourceType.GROUP, "g", topic="t")
    with pytest.raises(AclSpecError, match="--topic and --group"):
        resolve_resource(None, None, topic="t", group="g")


def test_bindings_are_the_cross_product_with_defaults() -> None:
    opts = AclOptions(ResourceType.TOPIC, "t", principals=("User:a", "User:b"),
                      operations=(R, W))
    made = bindings(opts)
    assert len(made) == 4
    assert made[0] == AclBinding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL,
                                 "User:a", "*", R, AclPermissionType.ALLOW)
    for bad, message in [
        (AclOptions(None, "t", principals=("User:a",), operations=(R,)), "name a resource"),
        (AclOptions(ResourceType.TOPIC, None, principals=("User:a",), operations=(R,)),
         "which Topic"),
        (AclOptions(ResourceType.TOPIC, "t", operations=(R,)), "--principal is required"),
        (AclOptions(ResourceType.TOPIC, "t", principals=("User:a",)), "--operation is required"),
        (AclOptions(ResourceType.TOPIC, "t", principals=("a",), operations=(R,)), "Type:name"),
    ]:
        with pytest.raises(AclSpecError, match=message):
            bindings(bad)


def test_filters_match_anything_not_given() -> None:
    assert AclOptions().matches_everything
    assert filters(AclOptions()) == [AclBindingFilter.any()]
    assert not AclOptions(principals=("User:a",)).matches_everything
    got = filters(AclOptions(ResourceType.TOPIC, "t", principals=("User:a", "User:b"),
                             operations=(R,)))
    assert got == [
        AclBindingFilter(ResourceType.TOPIC, "t", ResourcePatternType.ANY, p, None, R)
        for p in ("User:a", "User:b")
    ]
