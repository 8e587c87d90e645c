"""``client.metrics()`` through the OpenTelemetry metrics API.

Every metric of a client's ``metrics()`` snapshot becomes an observation of the
asynchronous instrument named ``{group}.{name}`` (``producer-metrics.record-send-rate``,
``consumer-fetch-manager-metrics.records-lag-max``), with the metric's tags as attributes
(``client-id``, ``node-id``, ``topic``, ``partition``): the names OpenTelemetry's Java
agent gives the Java client's metrics, so dashboards built for Java clients read ours.
Names ending ``-total`` are cumulative counts and become observable counters; the rest
(rates, averages, maxima, gauges) observable gauges. NaN (no sample in the window) is
not observed. When a counter is reported at several granularities in one group (per
client and per topic), only the finest is observed, so a sum over attributes does not
count twice.

One bridge per meter provider holds weak references to the clients it observes, so a
dropped client is not kept alive and simply stops being reported. Instruments are
process-wide in a meter, so they are shared by every client: each collection reads each
client's snapshot once (kept for the collection's other callbacks), and a (group, name)
first seen in a collection gets its instrument created right after it by a helper
thread (instruments cannot be created from inside a callback: the SDK holds its lock),
so it is reported from the next collection on.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Meter, MeterProvider, Observation

from aiokproto.metrics.registry import MetricName

log = logging.getLogger(__name__)

_SCOPE = "aiokproto"
#: seconds a read of every client serves the instruments of one collection
_FRESH_S = 1.0


def instrument_name(metric: MetricName) -> str:
    return f"{metric.group}.{metric.name}"


def is_counter(metric: MetricName) -> bool:
    return metric.name.endswith("-total")


class MetricsBridge:
    """The observable instruments of one meter and the clients they read."""

    def __init__(self, meter: Meter) -> None:
        self._meter = meter
        self._lock = threading.Lock()
        self._clients: weakref.WeakSet[Any] = weakref.WeakSet()
        #: instrument name -> created (True) or queued for the helper thread (False)
        self._instruments: dict[str, bool] = {}
        self._queued: list[MetricName] = []
        self._creator: threading.Thread | None = None
        self._idle = threading.Event()
        self._idle.set()
        # the observations of the collection in progress: read when it asks for its
        # first instrument, and the instruments served from them since
        self._observations: dict[str, list[Observation]] = {}
        self._served: set[str] = set()
        self._read_at = -math.inf

    # -- clients ------------------------------------------------------------------------

    def add(self, client: Any) -> None:
        """Observe ``client.metrics()`` from now on; its current metric names get their
        instruments at once (not from a callback: creating them here is safe)."""
        with self._lock:
            self._clients.add(client)
        try:
            snapshot = client.metrics()
        except Exception:
            log.exception("aiokproto.otel: %r.metrics() failed", client)
            return
        with self._lock:
            fresh = self._queue_new(snapshot)
        self._create(fresh)

    def discard(self, client: Any) -> None:
        with self._lock:
            self._clients.discard(client)

    def clients(self) -> list[Any]:
        with self._lock:
            return list(self._clients)

    def wait_idle(self, timeout: float = 5.0) -> bool:
        """Wait until instruments for every name seen so far exist (for tests)."""
        return self._idle.wait(timeout)

    # -- instruments --------------------------------------------------------------------

    def _queue_new(self, snapshot: Iterable[MetricName]) -> list[MetricName]:
        """Names without an instrument yet, marked queued; call with the lock held."""
        fresh: list[MetricName] = []
        for metric in snapshot:
            name = instrument_name(metric)
            if name not in self._instruments:
                self._instruments[name] = False
                fresh.append(metric)
        return fresh

    def _create(self, metrics_: list[MetricName]) -> None:
        for metric in metrics_:
            name = instrument_name(metric)
            try:
                if is_counter(metric):
                    self._meter.create_observable_counter(
                        name, callbacks=[self._callback(name)], description=metric.description
                    )
                else:
                    self._meter.create_observable_gauge(
                        name, callbacks=[self._callback(name)], description=metric.description
                    )
            except Exception:
                log.exception("aiokproto.otel: could not create the instrument %s", name)
            with self._lock:
                self._instruments[name] = True

    def _callback(self, name: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(options: CallbackOptions) -> Iterable[Observation]:
            return self._observe(name, options)

        return observe

    def _start_creator(self) -> None:
        """Create queued instruments on a helper thread; call with the lock held."""
        if self._creator is not None or not self._queued:
            return
        self._idle.clear()
        self._creator = threading.Thread(
            target=self._create_queued, name="aiokproto-otel-instruments", daemon=True
        )
        self._creator.start()

    def _create_queued(self) -> None:
        while True:
            with self._lock:
                batch, self._queued = self._queued, []
                if not batch:
                    self._creator = None
                    self._idle.set()
                    return
            # outside our lock: the SDK's registration waits for a collection in
            # progress, whose callbacks take our lock
            self._create(batch)

    # -- collection ---------------------------------------------------------------------

    def _observe(self, name: str, options: CallbackOptions) -> list[Observation]:
        """One collection calls each instrument's callback once, so an instrument asked
        for again means a new collection: every client is read then, once. (The SDK's
        CallbackOptions cannot tell collections apart: a collect with a timeout of 10 s
        or less, the default of InMemoryMetricReader and Prometheus' reader, gives each
        callback a new one.) A read older than ``_FRESH_S`` is not reused either, for
        an instrument first asked for in a later collection."""
        with self._lock:
            if name in self._served or time.monotonic() - self._read_at > _FRESH_S:
                self._observations = self._read_all()
                self._served = set()
                self._read_at = time.monotonic()
            self._served.add(name)
            return self._observations.get(name, [])

    def _read_all(self) -> dict[str, list[Observation]]:
        """Every client's snapshot as observations; call with the lock held."""
        points: dict[str, list[tuple[MetricName, float]]] = {}
        for client in list(self._clients):
            try:
                snapshot = client.metrics()
            except Exception:
                log.debug("aiokproto.otel: %r.metrics() failed", client, exc_info=True)
                continue
            fresh = self._queue_new(snapshot)
            if fresh:
                self._queued.extend(fresh)
            for metric, value in snapshot.items():
                if not math.isnan(value):
                    points.setdefault(instrument_name(metric), []).append((metric, value))
        self._start_creator()
        out: dict[str, list[Observation]] = {}
        for name, found in points.items():
            if is_counter(found[0][0]):
                found = _finest(found)
            out[name] = [Observation(value, dict(metric.tags)) for metric, value in found]
        return out


def _finest(points: list[tuple[MetricName, float]]) -> list[tuple[MetricName, float]]:
    """Drop the points whose tag keys are a strict subset of another point's (a
    client-wide count beside per-topic ones), so sums do not count twice."""
    keysets = {frozenset(k for k, _ in m.tags) for m, _ in points}
    if len(keysets) == 1:
        return points
    return [
        (m, v)
        for m, v in points
        if not any(frozenset(k for k, _ in m.tags) < other for other in keysets)
    ]


# One bridge per meter provider: an instrument, once created in a meter, keeps the
# callback it was created with, so instrumenting again must find the same bridge.
_BRIDGES: weakref.WeakKeyDictionary[Any, MetricsBridge] = weakref.WeakKeyDictionary()
_BRIDGES_LOCK = threading.Lock()


def bridge_for(meter_provider: MeterProvider | None = None) -> MetricsBridge:
    from aiokproto import __version__

    provider: Any = meter_provider if meter_provider is not None else metrics.get_meter_provider()
    with _BRIDGES_LOCK:
        found = _BRIDGES.get(provider)
        if found is None:
            meter = metrics.get_meter(_SCOPE, __version__, meter_provider=provider)
            found = _BRIDGES[provider] = MetricsBridge(meter)
        return found


def observe_metrics(
    client: Any, *, meter_provider: MeterProvider | None = None
) -> Callable[[], None]:
    """Report ``client.metrics()`` through the OpenTelemetry metrics API (the global
    meter provider unless one is given), for as long as the client lives; returns a
    function that stops it earlier. ``AiokprotoInstrumentor().instrument()`` does this
    for every client created while instrumented."""
    bridge = bridge_for(meter_provider)
    bridge.add(client)
    ref = weakref.ref(client)

    def stop() -> None:
        found = ref()
        if found is not None:
            bridge.discard(found)

    return stop
