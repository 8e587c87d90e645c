"""The fuzzing machinery itself: corpus, spot walker, mutations, loop and checks.

Every check of the runner is shown to fire on a scenario built to break it, so a green
fuzz run means the checks ran, not that they could not fail.
"""

from __future__ import annotations

import asyncio
import logging
import random
import struct
import time
from collections.abc import Awaitable, Callable

import pytest

from aiokproto.errors import KafkaConnectionError
from aiokproto.protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from tests.faults.fuzz import corpus as corpus_module
from tests.faults.fuzz.corpus import default_corpus
from tests.faults.fuzz.mutations import MUTATIONS, Step, Target
from tests.faults.fuzz.plans import NO_MUTATION, REPLAYED, Plan, plan_case
from tests.faults.fuzz.runner import (
    CRASH,
    HANG,
    HARNESS,
    LOOP_ERROR,
    MEMORY,
    PENDING,
    SPIN,
    SUCCESS,
    WRONG_TYPE,
    run_in_new_loop,
)
from tests.faults.fuzz.scenarios import BOUND_S, SCENARIOS, Names
from tests.faults.fuzz.spots import spots
from tests.faults.fuzz.vloop import VirtualClockLoop
from tests.faults.fuzz.wire import request_signature, response_body, response_frame


def test_corpus_is_small_and_covers_every_scenario() -> None:
    assert corpus_module.CORPUS_PATH.stat().st_size < 1_000_000
    corpus = default_corpus()
    assert set(REPLAYED) <= set(corpus.scenarios)
    apis = {e.api_key for e in corpus.exchanges}
    # Produce, Fetch, ListOffsets, Metadata, OffsetCommit, OffsetFetch, FindCoordinator,
    # JoinGroup, Heartbeat, LeaveGroup, SyncGroup, DescribeGroups-free group flow,
    # ListGroups, ApiVersions, CreateTopics, DeleteTopics, DescribeConfigs,
    # InitProducerId, DescribeCluster
    assert {0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 16, 18, 19, 20, 32, 22, 60} <= apis


def test_spot_walker_covers_every_recorded_answer() -> None:
    kinds: set[str] = set()
    for e in default_corpus().exchanges:
        found = spots(e.api_key, e.version, response_body(e.api_key, e.version, e.response))
        kinds |= {s.kind for s in found}
    assert {"int", "count", "element", "length", "string", "uuid", "records", "tags"} <= kinds


def test_signature_ignores_deadlines_and_partition_order() -> None:
    def request(order: list[int], timeout: int) -> bytes:
        parts = [ListOffsetsPartition(partition_index=p, timestamp=-2) for p in order]
        topics = [ListOffsetsTopic(name="t", partitions=parts)]
        return ListOffsetsRequest(topics=topics, timeout_ms=timeout).encode(9)

    a, b = request([0, 1, 2], 1000), request([2, 0, 1], 30_000)
    assert request_signature(2, 9, a) == request_signature(2, 9, b)
    assert request_signature(2, 9, a) != request_signature(2, 9, request([0, 1], 1000))


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_mutations_are_deterministic_and_change_the_answer(name: str) -> None:
    corpus = default_corpus()
    fetch = next(e for e in corpus.exchanges if e.api_key == 1 and len(e.response) > 500)
    frame = response_frame(1, fetch.version, 7, response_body(1, fetch.version, fetch.response))
    good = [("write", len(frame).to_bytes(4, "big") + frame, 0.0)]
    changed = 0
    for seed in range(20):
        steps = [
            [
                (s.action, s.data, s.delay_s)
                for s in MUTATIONS[name](
                    Target(1, fetch.version, frame, frame, random.Random(seed))
                )
            ]
            for _ in range(2)
        ]
        assert steps[0] == steps[1]
        changed += steps[0] != good
    assert changed >= 15  # a mutation that leaves the answer alone is rare


def test_loop_time_jumps_over_idle_waits() -> None:
    loop = VirtualClockLoop()
    try:
        began = time.monotonic()
        loop.run_until_complete(asyncio.sleep(3600))
        assert time.monotonic() - began < 1
        assert loop.time() >= 1000 + 3600
    finally:
        loop.close()


# -- the runner's checks fire --------------------------------------------------------------

_kept: list[object] = []


async def _wrong_type(bootstrap: str, names: Names) -> None:
    raise ValueError("not a KafkaError")


async def _typed(bootstrap: str, names: Names) -> None:
    raise KafkaConnectionError("typed")


async def _hangs(bootstrap: str, names: Names) -> None:
    await asyncio.sleep(10**6)


async def _leaves_a_task(bootstrap: str, names: Names) -> None:
    _kept.append(asyncio.get_running_loop().create_task(asyncio.sleep(10**6)))


async def _callback_fails(bootstrap: str, names: Names) -> None:
    asyncio.get_running_loop().call_soon(lambda: 1 / 0)
    await asyncio.sleep(0.01)


async def _drops_a_failed_future(bootstrap: str, names: Names) -> None:
    future = asyncio.get_running_loop().create_future()
    future.set_exception(RuntimeError("nobody looks"))
    del future


async def _allocates(bootstrap: str, names: Names) -> None:
    data = bytearray(128 * 2**20)
    del data


async def _logs_a_crash(bootstrap: str, names: Names) -> None:
    try:
        raise IndexError("a codec bug")
    except IndexError:  # what the client's catch-alls do before re-raising a KafkaError
        logging.getLogger("aiokproto.somewhere").exception("failed unexpectedly")


async def _spins(bootstrap: str, names: Names) -> None:
    while True:  # noqa: ASYNC110 - busy on purpose: the clock must not move
        await asyncio.sleep(0)


BROKEN: dict[str, tuple[Callable[[str, Names], Awaitable[None]], str]] = {
    "wrong_type": (_wrong_type, f"{WRONG_TYPE} ValueError"),
    "typed": (_typed, "KafkaConnectionError"),
    "hangs": (_hangs, HANG),
    "leaves_a_task": (_leaves_a_task, PENDING),
    "callback_fails": (_callback_fails, LOOP_ERROR),
    "allocates": (_allocates, MEMORY),
    "spins": (_spins, SPIN),
    "logs_a_crash": (_logs_a_crash, f"{CRASH} after {SUCCESS}"),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_checks_fire(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    scenario, outcome = BROKEN[name]
    monkeypatch.setitem(SCENARIOS, name, scenario)
    monkeypatch.setitem(BOUND_S, name, 5.0)
    plan = Plan(1, 0, name, NO_MUTATION, -1, -1, -1)
    began = time.monotonic()
    report = run_in_new_loop(default_corpus(), [plan], wall_limit_s=0.5)
    result = report.results[0]
    assert result.outcome == outcome, result.detail
    assert result.failure == (outcome != "KafkaConnectionError")
    assert time.monotonic() - began < 10
    for task in _kept:
        assert isinstance(task, asyncio.Task) and task.cancelled()  # cleaned up
    _kept.clear()


def test_never_retrieved_exception_is_pinned_on_its_case(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(SCENARIOS, "drops", _drops_a_failed_future)
    monkeypatch.setitem(BOUND_S, "drops", 5.0)
    corpus = default_corpus()
    plans = [plan_case(corpus, 1, i) for i in range(3)]
    plans.insert(1, Plan(1, 99, "drops", NO_MUTATION, -1, -1, -1))
    report = run_in_new_loop(corpus, plans)
    assert [case for case, _ in report.never_retrieved] == ["1:99"]
    assert "never retrieved" in report.never_retrieved[0][1]
    assert report.results[1].outcome == SUCCESS  # the run itself went on


def test_a_failing_mutation_is_the_fuzzers_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(target: Target) -> list[Step]:
        raise struct.error("a mutation bug")

    corpus = default_corpus()
    plan = plan_case(corpus, 1, 0, mutation="bit_flip")
    monkeypatch.setitem(MUTATIONS, "bit_flip", broken)
    result = run_in_new_loop(corpus, [plan]).results[0]
    assert result.outcome == HARNESS and "a mutation bug" in result.detail
