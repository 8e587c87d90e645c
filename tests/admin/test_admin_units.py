"""The batch retry loop and the client-side pieces, without a broker."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import time
from collections.abc import Mapping

import pytest

from aiokproto.admin import AdminBatchError, ScramMechanism
from aiokproto.admin._batch import run_batch
from aiokproto.admin.base import _operations
from aiokproto.admin.groups import _assignment
from aiokproto.admin.scram import salted_password
from aiokproto.admin.types import AclOperation, OffsetSpec, TopicPartition
from aiokproto.errors import (
    KafkaConfigError,
    KafkaConnectionError,
    KafkaError,
    NotControllerError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from aiokproto.protocol.messages.consumer_protocol_assignment import (
    ConsumerProtocolAssignment,
    ConsumerProtocolAssignmentTopicPartition,
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


def test_salted_password_matches_rfc_7677_example() -> None:
    # RFC 7677 section 3: user "user", password "pencil"; check the client proof.
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    salted = salted_password(ScramMechanism.SCRAM_SHA_256, "pencil", salt, 4096)
    auth = (
        b"n=user,r=rOprNGfwEbeRWgbNEkqO,"
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,"
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    )
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    signature = hmac.digest(hashlib.sha256(client_key).digest(), auth, "sha256")
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    assert base64.b64encode(proof) == b"dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    assert len(salted_password(ScramMechanism.SCRAM_SHA_512, b"pw", b"s", 4096)) == 64


def test_consumer_assignment_and_operation_bits() -> None:
    body = ConsumerProtocolAssignment(
        assigned_partitions=[ConsumerProtocolAssignmentTopicPartition(topic="t", partitions=[0, 2])]
    ).encode(1)
    assert _assignment(b"\x00\x01" + body) == (TopicPartition("t", 0), TopicPartition("t", 2))
    assert _assignment(b"\x00\x01garbage") == ()
    assert _assignment(None) == ()
    bits = (1 << AclOperation.READ) | (1 << AclOperation.DESCRIBE)
    assert _operations(bits, True) == frozenset({AclOperation.READ, AclOperation.DESCRIBE})
    assert _operations(bits, False) is None
    assert _operations(-(2**31), True) is None


def test_offset_spec_validation() -> None:
    assert OffsetSpec.earliest().timestamp == -2
    assert OffsetSpec.max_timestamp().timestamp == -3
    with pytest.raises(KafkaConfigError):
        OffsetSpec.for_timestamp(-5)
