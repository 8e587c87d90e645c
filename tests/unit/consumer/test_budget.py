"""FetchBudget: the consumer-wide bound on buffered and in-flight fetch bytes."""

from __future__ import annotations

import pytest

from aiokproto import Consumer
from aiokproto.consumer.budget import DEFAULT_FETCH_BUFFER_MAX_BYTES, FetchBudget
from aiokproto.errors import KafkaConfigError


def test_a_grant_is_the_least_of_what_is_wanted_free_and_the_fair_share() -> None:
    budget = FetchBudget(1000)
    assert budget.grant(1, 5000) == 1000  # alone: all of it
    budget.settle(1)
    assert budget.grant(1, 300) == 300
    assert budget.grant(2, 5000, share=500) == 500
    assert (budget.reserved, budget.free) == (800, 200)
    assert budget.grant(3, 5000, share=500) == 200  # only what is left
    assert budget.grant(4, 5000) == 0  # nothing free: that fetch waits
    assert budget.reserved == 1000


def test_a_new_grant_replaces_the_node_s_reservation() -> None:
    budget = FetchBudget(1000)
    budget.grant(1, 600)
    assert budget.grant(1, 700) == 700  # not 400: its own earlier grant is given back
    assert budget.reserved == 700


def test_buffered_bytes_count_until_released_and_settle_frees_the_reservation() -> None:
    budget = FetchBudget(1000)
    assert budget.grant(1, 1000) == 1000
    budget.charge(1500)  # one batch larger than the bound: it still came
    budget.settle(1)
    assert (budget.buffered, budget.reserved, budget.peak) == (1500, 0, 1500)
    assert budget.grant(1, 1000) == 0  # over the bound: no fetch until it drains
    budget.release(1000)
    assert budget.grant(1, 1000) == 500
    budget.settle(1)
    budget.release(500)
    assert (budget.buffered, budget.free, budget.peak) == (0, 1000, 1500)


def test_releasing_more_than_buffered_is_a_defect_not_free_budget() -> None:
    budget = FetchBudget(10)
    budget.charge(5)
    with pytest.raises(AssertionError, match="10 bytes, 5 more than buffered"):
        budget.release(10)


def test_clear_forgets_everything() -> None:
    budget = FetchBudget(10)
    budget.charge(5)
    budget.grant(1, 5)
    budget.clear()
    assert (budget.buffered, budget.reserved, budget.free) == (0, 0, 10)


@pytest.mark.parametrize("limit", [0, -1])
def test_a_limit_below_one_is_refused(limit: int) -> None:
    with pytest.raises(ValueError, match="limit >= 1"):
        FetchBudget(limit)


def test_the_default_is_librdkafka_s_64_mib() -> None:
    assert DEFAULT_FETCH_BUFFER_MAX_BYTES == 65536 * 1024


@pytest.mark.parametrize("bad", [0, -1, 1.5, "64MB", True, None])
def test_a_consumer_refuses_a_bound_that_is_not_a_positive_int(bad: object) -> None:
    with pytest.raises(KafkaConfigError, match=r"fetch_buffer_max_bytes must be an int >= 1"):
        Consumer(bootstrap_servers="localhost:1", fetch_buffer_max_bytes=bad)  # type: ignore[arg-type]


def test_a_consumer_takes_the_bound_and_its_fetcher_applies_it() -> None:
    consumer = Consumer(bootstrap_servers="localhost:1", fetch_buffer_max_bytes=1)
    assert consumer._fetcher.budget.limit == 1
    assert Consumer(bootstrap_servers="localhost:1")._fetcher.budget.limit == 64 << 20
