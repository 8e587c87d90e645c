"""Client metrics: ``Producer.metrics()``, ``Consumer.metrics()``, ``Admin.metrics()``."""

from aiokproto.metrics.registry import MetricName, MetricsSnapshot

__all__ = ["MetricName", "MetricsSnapshot"]
