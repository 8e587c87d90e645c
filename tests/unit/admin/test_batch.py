"""The retry loop of batch Admin calls: only what failed retriably is retried, final
errors and the deadline end it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping

import pytest

from aiokproto.admin import AdminBatchError
from aiokproto.admin._batch import run_batch
from aiokproto.errors import (
    KafkaConnectionError,
    KafkaError,
    NotControllerError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)


async def _run(
    script: list[Mapping[str, object]], keys: list[str], timeout_ms: int = 2000, **kw: object
) -> tuple[dict[str, object], list[list[str]]]:
    calls: list[list[str]] = []

    async def attempt(pending: list[str]) -> Mapping[str, object]:
        calls.append(list(pending))
        step = script[min(len(calls) - 1, len(script) - 1)]
        if isinstance(step.get("*"), KafkaError):
            raise step["*"]  # type: ignore[misc]
        return step

    result = await run_batch(
        "op",
        keys,
        attempt,
        timeout_ms=timeout_ms,
        backoff_ms=1,
        backoff_max_ms=4,
        **kw,  # type: ignore[arg-type]
    )
    return result, calls


async def test_retries_only_the_items_that_failed_retriably() -> None:
    stale: list[int] = []

    async def refresh() -> None:
        stale.append(1)

    with pytest.raises(AdminBatchError) as info:
        await _run(
            [{"a": 1, "b": NotControllerError(), "c": TopicAlreadyExistsError()}, {"b": 2}],
            ["a", "b", "c"],
            on_stale_metadata=refresh,
        )
    assert info.value.results == {"a": 1, "b": 2}
    assert isinstance(info.value.errors["c"], TopicAlreadyExistsError)
    assert stale == [1]  # NOT_CONTROLLER refreshed metadata before the retry
    assert "'c'" in str(info.value) and "1 of 3" in str(info.value)


async def test_whole_request_failure_retries_every_pending_item() -> None:
    result, calls = await _run([{"*": KafkaConnectionError("down")}, {"a": 1, "b": 2}], ["a", "b"])
    assert result == {"a": 1, "b": 2}
    assert calls == [["a", "b"], ["a", "b"]]


async def test_final_errors_are_not_retried_and_deadline_keeps_last_error() -> None:
    began = time.monotonic()
    with pytest.raises(AdminBatchError) as info:
        await _run(
            [{"a": UnknownTopicOrPartitionError(), "b": KafkaConnectionError("x")}],
            ["a", "b"],
            timeout_ms=200,
            final=(UnknownTopicOrPartitionError,),
        )
    assert 0.15 < time.monotonic() - began < 2
    assert isinstance(info.value.errors["a"], UnknownTopicOrPartitionError)
    assert isinstance(info.value.errors["b"], KafkaConnectionError)


async def test_a_final_error_can_be_given_a_few_answers_to_go_away() -> None:
    # Kafka 4.3 answered UNKNOWN_TOPIC_OR_PARTITION to AlterShareGroupOffsets for a
    # topic created a moment before (CI): the second answer was the real one.
    gone = UnknownTopicOrPartitionError
    result, calls = await _run([{"a": gone()}, {"a": 7}], ["a"], final=(gone,), final_after=3)
    assert result == {"a": 7} and len(calls) == 2
    # a topic that really is missing is final after final_after answers in a row
    with pytest.raises(AdminBatchError) as info:
        await _run([{"a": gone()}], ["a"], final=(gone,), final_after=3)
    assert isinstance(info.value.errors["a"], gone)


async def test_a_hung_attempt_times_out() -> None:
    async def attempt(pending: list[str]) -> Mapping[str, int]:
        await asyncio.sleep(10)
        return {}

    with pytest.raises(AdminBatchError) as info:
        await run_batch("op", ["a"], attempt, timeout_ms=100, backoff_ms=1, backoff_max_ms=1)
    assert "within 100 ms" in str(info.value.errors["a"])
