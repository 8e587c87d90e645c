"""TelemetryReporter, the actor, against a scripted cluster (no sockets)."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from aiokproto.config import ClientConfig
from aiokproto.errors import (
    InvalidRecordError,
    KafkaConnectionError,
    UnknownSubscriptionIdError,
)
from aiokproto.metrics.registry import MetricsRegistry
from aiokproto.protocol.messages.get_telemetry_subscriptions import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
)
from aiokproto.protocol.messages.push_telemetry import PushTelemetryRequest, PushTelemetryResponse
from aiokproto.protocol.primitives import ZERO_UUID
from aiokproto.records.compression import ZSTD, decompress
from aiokproto.telemetry.reporter import TelemetryReporter
from aiokproto.telemetry.state import State

metrics_pb2 = pytest.importorskip("opentelemetry.proto.metrics.v1.metrics_pb2")

IID = uuid.UUID(int=0xABCDEF)
SEND_TOTAL = "org.apache.kafka.producer.record.send.total"
Answer = Callable[[int, Any], Any]


def subscription(
    metrics: list[str] | None = None, interval_ms: int = 40, **fields: Any
) -> GetTelemetrySubscriptionsResponse:
    return GetTelemetrySubscriptionsResponse(
        client_instance_id=fields.pop("client_instance_id", IID),
        subscription_id=fields.pop("subscription_id", 7),
        accepted_compression_types=fields.pop("accepted_compression_types", [ZSTD]),
        push_interval_ms=interval_ms,
        telemetry_max_bytes=fields.pop("telemetry_max_bytes", 1 << 20),
        delta_temporality=fields.pop("delta_temporality", True),
        requested_metrics=["org.apache.kafka.producer."] if metrics is None else metrics,
        **fields,
    )


class FakeConnection:
    def __init__(self, cluster: FakeCluster, node: int) -> None:
        self.cluster = cluster
        self.node = node
        self.api_versions = {71: (0, 0), 72: (0, 0)} if cluster.telemetry else {3: (0, 12)}

    def version_for(self, cls: type, min_version: int = 0) -> int:
        return 0

    async def send(self, request: Any, version: int, *, timeout_ms: int | None = None) -> Any:
        self.cluster.requests.append((self.node, request))
        answer = self.cluster.answer(self.node, request)
        if asyncio.iscoroutine(answer):
            answer = await answer
        if isinstance(answer, BaseException):
            raise answer
        return answer


class FakeCluster:
    """Nodes 1 and 2; ``answer(node, request)`` scripts the broker."""

    def __init__(self, answer: Answer, *, telemetry: bool = True) -> None:
        self.answer = answer
        self.telemetry = telemetry
        self.requests: list[tuple[int, Any]] = []

    def least_loaded_node(self, exclude: set[int] | frozenset[int] = frozenset()) -> int:
        return min({1, 2} - set(exclude) or {1, 2})

    async def connection(self, node: int) -> FakeConnection:
        return FakeConnection(self, node)

    def pushes(self) -> list[PushTelemetryRequest]:
        return [r for _, r in self.requests if isinstance(r, PushTelemetryRequest)]

    def gets(self) -> list[tuple[int, GetTelemetrySubscriptionsRequest]]:
        return [(n, r) for n, r in self.requests if isinstance(r, GetTelemetrySubscriptionsRequest)]


def standard(node: int, request: Any) -> Any:
    if isinstance(request, GetTelemetrySubscriptionsRequest):
        return subscription()
    return PushTelemetryResponse()


def config(**options: Any) -> ClientConfig:
    return ClientConfig(bootstrap_servers=(("localhost", 9092),), **options)


def registry() -> tuple[MetricsRegistry, Any]:
    reg = MetricsRegistry("c1")
    sends = reg.sensor()
    reg.publish(sends, "record-send", "producer-metrics", ("rate", "total"))
    return reg, sends


def reporter(
    cluster: FakeCluster, reg: MetricsRegistry | None = None, **kw: Any
) -> TelemetryReporter:
    opts = {k: kw.pop(k) for k in list(kw) if k in ("enable_metrics_push", "retry_backoff_max_ms")}
    return TelemetryReporter(
        cluster,  # type: ignore[arg-type]
        reg or registry()[0],
        "producer",
        config(**opts),
        **kw,
    )


async def until(check: Callable[[], bool], within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.005)


def decoded_total(push: PushTelemetryRequest) -> float:
    raw = decompress(push.compression_type, push.metrics) if push.compression_type else push.metrics
    data = metrics_pb2.MetricsData.FromString(raw)
    return sum(
        p.as_double
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == SEND_TOTAL
        for p in m.sum.data_points
    )


async def test_subscribes_pushes_every_interval_and_ends_with_a_terminating_push() -> None:
    cluster = FakeCluster(standard)
    reg, sends = registry()
    sends.record(3)
    rep = reporter(cluster, reg, resource={"transactional_id": "tx", "group_id": None})
    assert rep.client_instance_id() is None
    async with rep:
        await until(lambda: len(cluster.pushes()) >= 3)
        assert rep.client_instance_id() == IID
        sends.record(4)
    pushes = cluster.pushes()
    (first_node, first_get), *_ = cluster.gets()
    assert first_get.client_instance_id == ZERO_UUID  # "assign me an id"
    assert [p.terminating for p in pushes] == [False] * (len(pushes) - 1) + [True]
    assert all(p.client_instance_id == IID and p.subscription_id == 7 for p in pushes)
    assert all(p.compression_type == ZSTD for p in pushes)
    assert {n for n, _ in cluster.requests} == {first_node}  # one broker for everything
    assert sum(decoded_total(p) for p in pushes) == 7  # deltas add up
    raw = decompress(ZSTD, pushes[-1].metrics)
    (rm,) = metrics_pb2.MetricsData.FromString(raw).resource_metrics
    assert [(a.key, a.value.string_value) for a in rm.resource.attributes] == [
        ("transactional_id", "tx")
    ]
    assert rep.machine.state is State.TERMINATED


async def test_disabled_means_no_task_and_no_request() -> None:
    cluster = FakeCluster(standard)
    rep = reporter(cluster, enable_metrics_push=False)
    async with rep:
        await asyncio.sleep(0.05)
    assert rep._task is None and not cluster.requests and rep.client_instance_id() is None


async def test_a_broker_without_the_telemetry_apis_is_skipped_silently(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cluster = FakeCluster(standard, telemetry=False)
    rep = reporter(cluster)
    with caplog.at_level(logging.INFO, logger="aiokproto.metrics.telemetry"):
        async with rep:
            # asked again only after the default interval (5 minutes)
            await until(lambda: rep.machine.next_at > time.monotonic() + 60)
    assert not cluster.requests and rep.client_instance_id() is None
    assert not caplog.records


async def test_no_requested_metrics_means_no_push_and_asking_again_after_the_interval() -> None:
    cluster = FakeCluster(
        lambda n, r: (
            subscription(metrics=[])
            if isinstance(r, GetTelemetrySubscriptionsRequest)
            else PushTelemetryResponse()
        )
    )
    async with reporter(cluster) as rep:
        await until(lambda: len(cluster.gets()) >= 3)
        assert rep.client_instance_id() == IID
    assert not cluster.pushes()
    # the id the broker assigned is sent back
    assert {r.client_instance_id for _, r in cluster.gets()[1:]} == {IID}


async def test_a_connection_error_moves_to_another_broker_with_the_same_instance_id() -> None:
    failed = []

    def answer(node: int, request: Any) -> Any:
        if isinstance(request, PushTelemetryRequest) and node == 1 and not failed:
            failed.append(node)
            return KafkaConnectionError("broker 1 went away")
        return standard(node, request)

    cluster = FakeCluster(answer)
    async with reporter(cluster, retry_backoff_max_ms=10):
        await until(
            lambda: any(n == 2 and isinstance(r, PushTelemetryRequest) for n, r in cluster.requests)
        )
    nodes = [(n, type(r).__name__) for n, r in cluster.requests]
    assert nodes[:3] == [
        (1, "GetTelemetrySubscriptionsRequest"),
        (1, "PushTelemetryRequest"),  # failed
        (2, "GetTelemetrySubscriptionsRequest"),  # subscribe again elsewhere
    ]
    assert cluster.gets()[1][1].client_instance_id == IID
    assert all(n == 2 for n, _ in cluster.requests[2:])


async def test_unknown_subscription_id_resubscribes_at_once() -> None:
    calls: list[str] = []

    def answer(node: int, request: Any) -> Any:
        if isinstance(request, GetTelemetrySubscriptionsRequest):
            calls.append("get")
            return subscription(subscription_id=len(calls))
        calls.append("push")
        if len(calls) == 2:
            return PushTelemetryResponse(error_code=UnknownSubscriptionIdError.errno)
        return PushTelemetryResponse()

    cluster = FakeCluster(answer)
    async with reporter(cluster):
        await until(lambda: len(calls) >= 4)
    assert calls[:4] == ["get", "push", "get", "push"]
    assert [p.subscription_id for p in cluster.pushes()][:2] == [1, 3]  # the new one


async def test_invalid_record_stops_telemetry_for_good() -> None:
    def answer(node: int, request: Any) -> Any:
        if isinstance(request, GetTelemetrySubscriptionsRequest):
            return subscription()
        return PushTelemetryResponse(error_code=InvalidRecordError.errno)

    cluster = FakeCluster(answer)
    rep = reporter(cluster)
    async with rep:
        await until(lambda: rep.machine.terminated)
        await asyncio.sleep(0.1)
    assert len(cluster.pushes()) == 1  # and no terminating push after it


async def test_close_before_a_subscription_pushes_nothing() -> None:
    gate = asyncio.Event()

    async def slow(node: int, request: Any) -> Any:
        await gate.wait()
        return subscription()

    cluster = FakeCluster(lambda n, r: slow(n, r))
    rep = reporter(cluster, close_timeout_s=5.0)
    await rep.start()
    await until(lambda: bool(cluster.requests))
    started = time.monotonic()
    await rep.close()  # the subscription request never answers: nothing to wait for
    assert time.monotonic() - started < 0.5
    assert not cluster.pushes() and rep._task is not None and rep._task.done()
    assert rep.machine.terminated


async def test_close_does_not_wait_for_a_connection_to_a_dead_broker() -> None:
    class DeadCluster(FakeCluster):
        async def connection(self, node: int) -> FakeConnection:
            await asyncio.sleep(3600)  # a black hole: the connect never completes
            raise AssertionError

    rep = reporter(DeadCluster(standard), close_timeout_s=5.0)
    await rep.start()
    await asyncio.sleep(0.05)
    started = time.monotonic()
    await rep.close()
    assert time.monotonic() - started < 0.5


async def test_a_terminating_push_that_hangs_is_bounded() -> None:
    async def answer(node: int, request: Any) -> Any:
        if isinstance(request, GetTelemetrySubscriptionsRequest):
            return subscription(interval_ms=60_000)
        await asyncio.sleep(3600)  # the broker never answers

    cluster = FakeCluster(lambda n, r: answer(n, r))
    rep = reporter(cluster, close_timeout_s=0.2)
    await rep.start()
    await until(lambda: rep.machine.state is State.PUSH_NEEDED)
    started = time.monotonic()
    await rep.close()
    assert time.monotonic() - started < 1.0
    (push,) = cluster.pushes()
    assert push.terminating  # sent at once on close, though the first push was not due


async def test_an_unexpected_error_stops_the_reporter_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def answer(node: int, request: Any) -> Any:
        raise RuntimeError("a bug")

    cluster = FakeCluster(answer)
    rep = reporter(cluster)
    with caplog.at_level(logging.WARNING, logger="aiokproto.metrics.telemetry"):
        async with rep:
            await until(lambda: rep.machine.terminated)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "unexpected error" in warnings[0].getMessage()
    assert rep._task is not None and rep._task.done() and rep._task.exception() is None


async def test_a_payload_over_telemetry_max_bytes_is_not_sent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cluster = FakeCluster(
        lambda n, r: (
            subscription(telemetry_max_bytes=10)
            if isinstance(r, GetTelemetrySubscriptionsRequest)
            else PushTelemetryResponse()
        )
    )
    reg, sends = registry()
    sends.record(1)
    rep = reporter(cluster, reg)
    with caplog.at_level(logging.WARNING, logger="aiokproto.metrics.telemetry"):
        async with rep:
            await until(
                lambda: len(cluster.gets()) == 1 and rep.machine.state is State.SUBSCRIPTION_NEEDED
            )
    assert not cluster.pushes()
    assert any("telemetry_max_bytes" in r.getMessage() for r in caplog.records)
