"""describe_consumer_groups without a real broker: mapping ConsumerGroupDescribe and
DescribeGroups answers to descriptions, and the fallback between the two (fake broker)."""

from __future__ import annotations

import uuid

import pytest

from aiokproto.admin import Admin, AdminBatchError, ConsumerGroupDescription, TopicPartition
from aiokproto.admin.groups import _classic_group, _consumer_protocol_group
from aiokproto.admin.types import AclOperation
from aiokproto.cluster.snapshot import BrokerInfo
from aiokproto.errors import GroupAuthorizationFailedError
from aiokproto.protocol.messages import REQUESTS
from aiokproto.protocol.messages import consumer_group_describe as cgd
from aiokproto.protocol.messages import describe_groups as dg
from aiokproto.protocol.messages.api_versions import (
    ApiVersionsResponse,
    ApiVersionsResponseApiVersion,
)
from aiokproto.protocol.messages.consumer_protocol_assignment import (
    ConsumerProtocolAssignment,
    ConsumerProtocolAssignmentTopicPartition,
)
from aiokproto.protocol.messages.find_coordinator import (
    FindCoordinatorResponse,
    FindCoordinatorResponseCoordinator,
)
from tests.fake_broker import TELEMETRY_APIS, FakeBroker, Received, Reply

COORDINATOR = BrokerInfo(7, "broker-7", 9092)
BY_ID = uuid.UUID(int=1)  # a topic the answer names by id only
GONE = uuid.UUID(int=2)  # a topic id nobody knows any more
READ_DESCRIBE = (1 << AclOperation.READ) | (1 << AclOperation.DESCRIBE)


def _assigned(
    *topics: tuple[uuid.UUID, str, list[int]],
) -> cgd.ConsumerGroupDescribeResponseAssignment:
    return cgd.ConsumerGroupDescribeResponseAssignment(
        topic_partitions=[
            cgd.ConsumerGroupDescribeResponseTopicPartitions(
                topic_id=tid, topic_name=name, partitions=parts
            )
            for tid, name, parts in topics
        ]
    )


def _consumer_group(
    group_id: str,
) -> cgd.ConsumerGroupDescribeResponseDescribedGroup:
    return cgd.ConsumerGroupDescribeResponseDescribedGroup(
        group_id=group_id,
        group_state="Reconciling",
        group_epoch=5,
        assignment_epoch=5,
        assignor_name="uniform",
        members=[
            cgd.ConsumerGroupDescribeResponseMember(
                member_id="m1",
                instance_id="static-1",
                rack_id="rack-a",
                member_epoch=4,
                client_id="c1",
                client_host="/10.0.0.1",
                subscribed_topic_names=["a", "b"],
                subscribed_topic_regex="",
                assignment=_assigned(
                    (uuid.UUID(int=3), "a", [2, 0]), (BY_ID, "", [1]), (GONE, "", [0])
                ),
                target_assignment=_assigned((uuid.UUID(int=3), "a", [0])),
                member_type=1,
            )
        ],
        authorized_operations=READ_DESCRIBE,
    )


def test_consumer_protocol_answer_maps_to_a_description() -> None:
    # through the codec, as a broker's v1 answer would arrive
    wire = cgd.ConsumerGroupDescribeResponse(groups=[_consumer_group("g")]).encode(1)
    (group,) = cgd.ConsumerGroupDescribeResponse.decode(wire, 1).groups
    described = _consumer_protocol_group(group, COORDINATOR, True, {BY_ID: "b"})
    assert described.type == "consumer" and not described.is_simple_consumer_group
    assert (described.state, described.group_epoch, described.assignment_epoch) == (
        "Reconciling",
        5,
        5,
    )
    assert described.partition_assignor == described.server_assignor == "uniform"
    assert described.coordinator is COORDINATOR
    assert described.authorized_operations == frozenset({AclOperation.READ, AclOperation.DESCRIBE})
    (member,) = described.members
    assert (member.member_id, member.group_instance_id, member.rack) == ("m1", "static-1", "rack-a")
    assert (member.client_id, member.host, member.member_epoch) == ("c1", "/10.0.0.1", 4)
    assert member.subscribed_topic_names == ("a", "b")
    assert member.subscribed_topic_regex is None  # Kafka's "" for "no regex"
    # sorted; the id-only topic resolved; the unknown id left out
    assert member.assignment == (
        TopicPartition("a", 0),
        TopicPartition("a", 2),
        TopicPartition("b", 1),
    )
    assert member.target_assignment == (TopicPartition("a", 0),)
    assert _consumer_protocol_group(group, COORDINATOR, False, {}).authorized_operations is None


def test_classic_answers_map_to_descriptions() -> None:
    assignment = b"\x00\x03" + ConsumerProtocolAssignment(
        assigned_partitions=[ConsumerProtocolAssignmentTopicPartition(topic="t", partitions=[1])]
    ).encode(3)
    member = dg.DescribeGroupsResponseDescribedGroupMember(
        member_id="m", client_id="c", client_host="/h", member_assignment=assignment
    )
    classic = dg.DescribeGroupsResponseDescribedGroup(
        group_id="g",
        group_state="Stable",
        protocol_type="consumer",
        protocol_data="range",
        members=[member],
    )
    described = _classic_group(classic, COORDINATOR, False)
    assert (described.type, described.partition_assignor, described.state) == (
        "classic",
        "range",
        "Stable",
    )
    assert described.server_assignor is None and described.group_epoch is None
    (m,) = described.members
    assert m.assignment == (TopicPartition("t", 1),)
    assert m.member_epoch is None and m.target_assignment is None

    simple = dg.DescribeGroupsResponseDescribedGroup(group_id="s", group_state="Empty")
    described = _classic_group(simple, COORDINATOR, False)
    assert described.is_simple_consumer_group and described.members == ()


# -- the fallback, against a fake broker --------------------------------------------


def _coordinator_is(fake: FakeBroker, rec: Received) -> Reply:
    return Reply(
        response=FindCoordinatorResponse(
            coordinators=[
                FindCoordinatorResponseCoordinator(
                    key=key, node_id=fake.node_id, host=fake.host, port=fake.port
                )
                for key in rec.request.coordinator_keys
            ]
        )
    )


def _without_consumer_group_describe() -> Reply:
    return Reply(
        response=ApiVersionsResponse(
            api_keys=[
                ApiVersionsResponseApiVersion(
                    api_key=k, min_version=cls.MIN_VERSION, max_version=cls.MAX_STABLE_VERSION
                )
                for k, cls in sorted(REQUESTS.items())
                if k != cgd.ConsumerGroupDescribeRequest.API_KEY and k not in TELEMETRY_APIS
            ]
        )
    )


def _classic_answer(rec: Received) -> Reply:
    return Reply(
        response=dg.DescribeGroupsResponse(
            groups=[
                dg.DescribeGroupsResponseDescribedGroup(
                    group_id=g, group_state="Empty", protocol_type="consumer"
                )
                for g in rec.request.groups
            ]
        )
    )


def _answers(fake: FakeBroker, key: int) -> list[Received]:
    return [r for r in fake.received if r.api_key == key]


async def _describe(fake: FakeBroker, *groups: str) -> dict[str, ConsumerGroupDescription]:
    async with Admin(
        bootstrap_servers=fake.bootstrap, default_api_timeout_ms=3000, retry_backoff_ms=10
    ) as admin:
        return await admin.describe_consumer_groups(groups)


CGD_KEY = cgd.ConsumerGroupDescribeRequest.API_KEY
DG_KEY = dg.DescribeGroupsRequest.API_KEY


async def test_only_classic_groups_fall_back_to_describe_groups() -> None:
    def script(rec: Received) -> Reply | None:
        if rec.api_key == 10:
            return _coordinator_is(fake, rec)
        if rec.api_key == CGD_KEY:
            not_found = cgd.ConsumerGroupDescribeResponseDescribedGroup(
                group_id="old", error_code=69, error_message="Group old is not a consumer group."
            )
            groups = [_consumer_group("new"), not_found]
            return Reply(response=cgd.ConsumerGroupDescribeResponse(groups=groups))
        return _classic_answer(rec) if rec.api_key == DG_KEY else None

    async with FakeBroker(script) as fake:
        described = await _describe(fake, "new", "old")
    assert {g: d.type for g, d in described.items()} == {
        "new": "consumer",
        "old": "classic",
    }
    (asked,) = _answers(fake, DG_KEY)
    assert asked.request.groups == ["old"]


async def test_a_broker_without_consumer_group_describe_gets_describe_groups() -> None:
    def script(rec: Received) -> Reply | None:
        if rec.api_key == 18:
            return _without_consumer_group_describe()
        if rec.api_key == 10:
            return _coordinator_is(fake, rec)
        return _classic_answer(rec) if rec.api_key == DG_KEY else None

    async with FakeBroker(script) as fake:
        described = await _describe(fake, "g")
    assert described["g"].type == "classic"
    assert _answers(fake, CGD_KEY) == []


async def test_coordinator_errors_retry_and_authorization_is_final() -> None:
    answers = iter([14, 16, 0])  # COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR, fine

    def script(rec: Received) -> Reply | None:
        if rec.api_key == 10:
            return _coordinator_is(fake, rec)
        if rec.api_key != CGD_KEY:
            return None
        groups = []
        for g in rec.request.group_ids:
            code = 30 if g == "secret" else next(answers)
            groups.append(
                cgd.ConsumerGroupDescribeResponseDescribedGroup(group_id=g, error_code=code)
                if code
                else _consumer_group(g)
            )
        return Reply(response=cgd.ConsumerGroupDescribeResponse(groups=groups))

    async with FakeBroker(script) as fake:
        with pytest.raises(AdminBatchError) as info:
            await _describe(fake, "g", "secret")
    assert info.value.results["g"].type == "consumer"
    assert isinstance(info.value.errors["secret"], GroupAuthorizationFailedError)
    asked = [r.request.group_ids for r in _answers(fake, CGD_KEY)]
    assert asked == [["g", "secret"], ["g"], ["g"]]
    # NOT_COORDINATOR made the client look the coordinator up again
    assert len(_answers(fake, 10)) >= 2
    assert _answers(fake, DG_KEY) == []
