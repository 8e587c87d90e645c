"""Sensors and the registry without sockets: windows, expiry, Java's rate rule."""

from __future__ import annotations

import math

import pytest

from aiokproto.metrics.registry import MetricName, MetricsRegistry
from aiokproto.metrics.sensor import Sensor


def test_stats_over_the_window() -> None:
    s = Sensor(window_s=10, num_samples=2)
    t0 = s._start
    for v in (1.0, 5.0, 3.0):
        s.record(v, t0 + 1)
    assert s.avg(t0 + 2) == 3.0
    assert s.max(t0 + 2) == 5.0 and s.min(t0 + 2) == 1.0
    assert s.count_total == 3 and s.sum_total == 9.0
    # rates are over at least (num_samples - 1) windows: 9 / 10 s, not 9 / 2 s
    assert s.rate(t0 + 2) == pytest.approx(0.9)
    assert s.count_rate(t0 + 2) == pytest.approx(0.3)


def test_old_samples_drop_out_but_totals_stay() -> None:
    s = Sensor(window_s=10, num_samples=2)
    t0 = s._start
    s.record(100.0, t0 + 1)
    s.record(1.0, t0 + 12)  # second sample
    assert s.max(t0 + 15) == 100.0
    s.record(2.0, t0 + 25)  # a third window reuses the first sample's slot
    assert s.max(t0 + 26) == 2.0
    # nothing recorded for two whole windows: averages are NaN, rates 0 (as in Java)
    assert math.isnan(s.avg(t0 + 100)) and math.isnan(s.max(t0 + 100))
    assert s.rate(t0 + 100) == 0.0
    assert s.count_total == 3 and s.sum_total == 103.0


def test_a_long_idle_then_a_record_counts_only_the_new_value() -> None:
    s = Sensor(window_s=1, num_samples=2)
    t0 = s._start
    s.record(50.0, t0)
    s.record(7.0, t0 + 1000)
    assert s.avg(t0 + 1000.5) == 7.0


def _registry() -> MetricsRegistry:
    reg = MetricsRegistry("cid", window_ms=1000, num_samples=2)
    total, per_topic = reg.sensor(), reg.sensor()
    reg.publish(total, "records", "g", ("rate", "total"))
    reg.publish(per_topic, "records", "g", ("total",), topic="t")
    total.record(3)
    per_topic.record(3)
    reg.gauge("depth", "g", lambda: 7)
    reg.family(
        lambda _now: {MetricName("lag", "g", (("client-id", "cid"), ("partition", "0"))): 4.0}
    )
    return reg


def test_snapshot_lookup_by_name_group_and_tags() -> None:
    snap = _registry().snapshot()
    assert snap.value("records-total") == 3  # the one without a topic tag
    assert snap.value("records-total", tags={"topic": "t"}) == 3
    assert len(snap.find("records-total")) == 2
    assert snap.value("depth", "g") == 7
    assert snap.value("lag", tags={"partition": "0"}) == 4
    with pytest.raises(KeyError, match="no metric"):
        snap.value("nope")
    assert all(m.tag("client-id") == "cid" for m in snap)
    assert snap.as_dict()["g:records-total{client-id=cid}"] == 3


def test_remove_drops_tagged_metrics_only() -> None:
    reg = _registry()
    reg.remove("g", topic="t")
    snap = reg.snapshot()
    assert len(snap.find("records-total")) == 1
    assert not reg.has("g", topic="t") and reg.has("g")


def test_nan_is_null_in_json_form() -> None:
    reg = MetricsRegistry("cid")
    reg.publish(reg.sensor(), "latency", "g", ("avg",))
    assert reg.snapshot().as_dict() == {"g:latency-avg{client-id=cid}": None}


def test_totals_and_windows_survive_many_rolls() -> None:
    """Totals count every value across closed samples; a read sees only the samples
    in the window (the current one and num_samples - 1 before it)."""
    s = Sensor(window_s=1.0, num_samples=3)
    t0 = s._start
    for i in range(10):  # one value per window, 10 windows
        s.record(float(i), t0 + i + 0.5)
    assert (s.count_total, s.sum_total) == (10, 45.0)
    now = t0 + 9.6
    assert s.avg(now) == pytest.approx((7 + 8 + 9) / 3)
    assert (s.max(now), s.min(now)) == (9.0, 7.0)


def test_record_many_reads_as_the_same_values_recorded_one_by_one() -> None:
    one, many = Sensor(window_s=10, num_samples=2), Sensor(window_s=10, num_samples=2)
    many._start = one._start
    t0 = one._start
    values = [4.0, 1.5, 9.0, 2.0]
    for v in values:
        one.record(v, t0 + 1)
    many.record_many(len(values), sum(values), max(values), min(values), t0 + 1)
    one.record(3.0, t0 + 12)  # the next window: record_many rolls the sample too
    many.record_many(1, 3.0, 3.0, 3.0, t0 + 12)
    for now in (t0 + 2, t0 + 13, t0 + 25):
        assert one.avg(now) == many.avg(now) and one.max(now) == many.max(now)
        assert one.min(now) == many.min(now) and one.rate(now) == many.rate(now)
        assert one.count_rate(now) == many.count_rate(now)
    assert (one.count_total, one.sum_total) == (many.count_total, many.sum_total)
