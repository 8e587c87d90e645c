"""Admin against broker answers that do not match the request (a fake broker)."""

from __future__ import annotations

import asyncio

import pytest

from aiokproto import OffsetSpec, TopicPartition
from aiokproto.admin import Admin, AdminBatchError, NewTopic
from aiokproto.admin._batch import NoResult
from aiokproto.errors import UnknownTopicOrPartitionError
from aiokproto.protocol.messages.create_topics import (
    CreateTopicsResponse,
    CreateTopicsResponseCreatableTopicResult,
)
from aiokproto.protocol.messages.find_coordinator import (
    FindCoordinatorResponse,
    FindCoordinatorResponseCoordinator,
)
from aiokproto.protocol.messages.list_offsets import (
    ListOffsetsPartitionResponse,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from aiokproto.protocol.messages.metadata import MetadataResponsePartition, MetadataResponseTopic
from aiokproto.protocol.messages.offset_fetch import OffsetFetchResponse, OffsetFetchResponseGroup
from tests.fake_broker import FakeBroker, Received, Reply, Script


def _create_topics_answer(*names: str) -> Reply:
    return Reply(
        response=CreateTopicsResponse(
            topics=[
                CreateTopicsResponseCreatableTopicResult(
                    name=n, num_partitions=1, replication_factor=1
                )
                for n in names
            ]
        )
    )


@pytest.mark.parametrize(
    "answered",
    [("other",), ("other", "asked"), ()],
    ids=["only-another-topic", "another-topic-too", "no-topic"],
)
async def test_create_topics_answer_naming_topics_not_asked_for(answered: tuple[str, ...]) -> None:
    # Found by the protocol fuzzer: such an answer raised a bare KeyError.
    def script(rec: Received) -> Reply | None:
        return _create_topics_answer(*answered) if rec.api_key == 19 else None

    async with FakeBroker(script) as fake:
        async with Admin(bootstrap_servers=fake.bootstrap, default_api_timeout_ms=2000) as admin:
            if "asked" in answered:
                created = await admin.create_topics([NewTopic("asked", 1, 1)])
                assert list(created) == ["asked"]  # "other" is ignored
                return
            with pytest.raises(AdminBatchError) as info:
                await admin.create_topics([NewTopic("asked", 1, 1)])
    assert list(info.value.errors) == ["asked"]
    assert isinstance(info.value.errors["asked"], NoResult)
    assert info.value.results == {}


@pytest.mark.parametrize("groups", [(), ("another-group",)], ids=["no-group", "another-group"])
async def test_offset_fetch_answer_without_the_asked_group(groups: tuple[str, ...]) -> None:
    # Found by the protocol fuzzer: an empty groups list raised a bare IndexError.
    def script(rec: Received) -> Reply | None:
        if rec.api_key == 10:  # FindCoordinator: this broker
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
        if rec.api_key == 9:
            return Reply(
                response=OffsetFetchResponse(
                    groups=[OffsetFetchResponseGroup(group_id=g) for g in groups]
                )
            )
        return None

    async with FakeBroker(script) as fake:
        async with Admin(bootstrap_servers=fake.bootstrap, default_api_timeout_ms=2000) as admin:
            with pytest.raises(NoResult, match="asked-group"):
                await admin.list_consumer_group_offsets("asked-group")


def _fresh_topic_script(fake: FakeBroker, unknown_answers: int, where: str) -> Script:
    """A broker that learns of topic ``fresh`` only after ``unknown_answers`` answers
    (as a broker of a cluster does for a topic the controller created a moment ago)."""
    seen = {"metadata": 0, "leader": 0}

    def script(rec: Received) -> Reply | None:
        if rec.api_key == 3 and rec.request.topics:
            seen["metadata"] += 1
            unknown = where == "metadata" and seen["metadata"] <= unknown_answers
            topic = MetadataResponseTopic(
                name="fresh",
                error_code=UnknownTopicOrPartitionError.errno if unknown else 0,
                partitions=[]
                if unknown
                else [
                    MetadataResponsePartition(
                        partition_index=0,
                        leader_id=fake.node_id,
                        replica_nodes=[fake.node_id],
                        isr_nodes=[fake.node_id],
                    )
                ],
            )
            response = fake.default_response(rec)
            response.topics = [topic]
            return Reply(response=response)
        if rec.api_key == 2:
            seen["leader"] += 1
            unknown = where == "leader" and seen["leader"] <= unknown_answers
            partition = ListOffsetsPartitionResponse(
                partition_index=0,
                error_code=UnknownTopicOrPartitionError.errno if unknown else 0,
                offset=-1 if unknown else 42,
            )
            return Reply(
                response=ListOffsetsResponse(
                    topics=[ListOffsetsTopicResponse(name="fresh", partitions=[partition])]
                )
            )
        return None

    return script


@pytest.mark.parametrize("where", ["metadata", "leader"])
async def test_a_topic_created_a_moment_ago_is_not_reported_missing(where: str) -> None:
    # CI, 3-node cluster: list_offsets right after create_topics failed with
    # UNKNOWN_TOPIC_OR_PARTITION from a broker that had not caught up yet.
    fake = FakeBroker()
    fake.script = _fresh_topic_script(fake, unknown_answers=2, where=where)
    async with fake, Admin(bootstrap_servers=fake.bootstrap, default_api_timeout_ms=5000) as admin:
        tp = TopicPartition("fresh", 0)
        result = await admin.list_offsets({tp: OffsetSpec.latest()})
    assert result[tp].offset == 42


@pytest.mark.parametrize("where", ["metadata", "leader"])
async def test_a_topic_that_stays_missing_is_reported_long_before_the_timeout(where: str) -> None:
    fake = FakeBroker()
    fake.script = _fresh_topic_script(fake, unknown_answers=10**6, where=where)
    async with fake, Admin(bootstrap_servers=fake.bootstrap, default_api_timeout_ms=30000) as admin:
        tp = TopicPartition("fresh", 0)
        async with asyncio.timeout(10):
            with pytest.raises(AdminBatchError) as info:
                await admin.list_offsets({tp: OffsetSpec.latest()})
    assert isinstance(info.value.errors[tp], UnknownTopicOrPartitionError)
