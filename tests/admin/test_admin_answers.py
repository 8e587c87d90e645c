"""Admin against broker answers that do not match the request (a fake broker)."""

from __future__ import annotations

import pytest

from aiokproto.admin import Admin, AdminBatchError, NewTopic
from aiokproto.admin._batch import NoResult
from aiokproto.protocol.messages.create_topics import (
    CreateTopicsResponse,
    CreateTopicsResponseCreatableTopicResult,
)
from aiokproto.protocol.messages.find_coordinator import (
    FindCoordinatorResponse,
    FindCoordinatorResponseCoordinator,
)
from aiokproto.protocol.messages.offset_fetch import OffsetFetchResponse, OffsetFetchResponseGroup
from tests.fake_broker import FakeBroker, Received, Reply


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
