"""Membership and offset requests: every version they go out in encodes, and answers parse."""

from __future__ import annotations

import uuid

import pytest

from aiokproto.consumer.group import GroupConfig
from aiokproto.consumer.group.assignors import resolve_assignors
from aiokproto.consumer.group.offsets import (
    build_commit,
    build_fetch,
    parse_commit,
    parse_fetch,
    usable_version,
)
from aiokproto.consumer.group.protocol import decode_subscription
from aiokproto.consumer.group.requests import (
    describe_error,
    heartbeat_request,
    join_request,
    leave_request,
    sync_request,
)
from aiokproto.errors import FencedInstanceIdError, RebalanceInProgressError
from aiokproto.protocol.messages import offset_commit as oc
from aiokproto.protocol.messages import offset_fetch as of
from aiokproto.protocol.messages.leave_group import LeaveGroupRequest
from aiokproto.structs import OffsetAndMetadata
from aiokproto.structs import TopicPartition as TP

TID = uuid.uuid4()


@pytest.mark.parametrize("version", range(6))
def test_leave_request_every_version(version: int) -> None:
    request = leave_request("g", "m-1", version)
    decoded = LeaveGroupRequest.decode(request.encode(version), version)
    if version >= 3:
        assert [m.member_id for m in decoded.members] == ["m-1"]
    else:
        assert decoded.member_id == "m-1"


def test_join_request_carries_one_subscription_per_assignor() -> None:
    config = GroupConfig(
        "g",
        group_instance_id="i",
        client_rack="r",
        partition_assignment_strategy=("range", "sticky"),
    )
    request = join_request(
        config,
        resolve_assignors(config.partition_assignment_strategy),
        frozenset({"b", "a"}),
        "m",
        4,
        [TP("a", 1)],
    )
    assert [p.name for p in request.protocols] == ["range", "sticky"]
    sub = decode_subscription(request.protocols[0].metadata)
    assert (sub.topics, sub.owned_partitions, sub.generation_id, sub.rack_id) == (
        ("a", "b"),
        (TP("a", 1),),
        4,
        "r",
    )
    assert request.rebalance_timeout_ms == config.max_poll_interval_ms
    for version in range(5, 10):  # static members need v5+
        request.encode(version)
    sync_request(config, "m", 4, "range", {"m": b"x"}).encode(5)
    heartbeat_request(config, "m", 4).encode(4)


def test_usable_version_needs_topic_ids_for_v10() -> None:
    assert usable_version(10, ["t"], {"t": TID}) == 10
    assert usable_version(10, ["t", "u"], {"t": TID}) == 9
    assert usable_version(8, ["u"], {}) == 8


@pytest.mark.parametrize("version", [2, 7, 9, 10])
def test_commit_request_and_answer(version: int) -> None:
    offsets = {TP("t", 0): OffsetAndMetadata(5, "m", 3), TP("t", 1): OffsetAndMetadata(9)}
    request = build_commit("g", 2, "m-1", "static", offsets, {"t": TID}, version)
    decoded = oc.OffsetCommitRequest.decode(request.encode(version), version)
    parts = decoded.topics[0].partitions
    assert [(p.partition_index, p.committed_offset) for p in parts] == [(0, 5), (1, 9)]
    response = oc.OffsetCommitResponse(
        topics=[
            oc.OffsetCommitResponseTopic(
                name="t",
                topic_id=TID,
                partitions=[
                    oc.OffsetCommitResponsePartition(partition_index=0, error_code=0),
                    oc.OffsetCommitResponsePartition(partition_index=1, error_code=27),
                ],
            )
        ]
    )
    wire = oc.OffsetCommitResponse.decode(response.encode(version), version)
    assert parse_commit(wire, version, {"t": TID}) == {TP("t", 0): 0, TP("t", 1): 27}


@pytest.mark.parametrize("version", [1, 7, 8, 10])
def test_fetch_request_and_answer(version: int) -> None:
    request = build_fetch("g", [TP("t", 1), TP("t", 0)], {"t": TID}, version)
    of.OffsetFetchRequest.decode(request.encode(version), version)
    partitions = [(0, 5, "meta", 0), (1, -1, "", 0)]
    if version >= 8:
        response = of.OffsetFetchResponse(
            groups=[
                of.OffsetFetchResponseGroup(
                    group_id="g",
                    topics=[
                        of.OffsetFetchResponseTopics(
                            name="t",
                            topic_id=TID,
                            partitions=[
                                of.OffsetFetchResponsePartitions(
                                    partition_index=p, committed_offset=o, metadata=md, error_code=e
                                )
                                for p, o, md, e in partitions
                            ],
                        )
                    ],
                )
            ]
        )
    else:
        response = of.OffsetFetchResponse(
            topics=[
                of.OffsetFetchResponseTopic(
                    name="t",
                    partitions=[
                        of.OffsetFetchResponsePartition(
                            partition_index=p, committed_offset=o, metadata=md, error_code=e
                        )
                        for p, o, md, e in partitions
                    ],
                )
            ]
        )
    wire = of.OffsetFetchResponse.decode(response.encode(version), version)
    code, got = parse_fetch(wire, version, {"t": TID})
    assert code == 0
    assert got[TP("t", 0)] == (0, OffsetAndMetadata(5, "meta", got[TP("t", 0)][1].leader_epoch))  # type: ignore[union-attr]
    assert got[TP("t", 1)] == (0, None)


def test_error_messages_say_what_to_do() -> None:
    config = GroupConfig("g", group_instance_id="inst")
    fenced = describe_error(FencedInstanceIdError.errno, "Heartbeat", config)
    assert isinstance(fenced, FencedInstanceIdError) and "own group_instance_id" in str(fenced)
    other = describe_error(RebalanceInProgressError.errno, "JoinGroup", config)
    assert isinstance(other, RebalanceInProgressError) and "'g'" in str(other)
