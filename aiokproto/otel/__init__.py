"""OpenTelemetry for aiokproto (``pip install 'aiokproto[otel]'``), the only package
that imports OpenTelemetry: ``instrumentor.py`` (``AiokprotoInstrumentor`` swaps a few
client methods for traced ones and back), ``tracing.py`` (``send {topic}`` spans ended
at delivery, W3C context in a copy of the headers, ``poll {topic}`` receive spans linked
to it, ``process_span``), ``metrics.py`` (``metrics()`` as observable instruments
``{group}.{name}``, ``observe_metrics``); benchmarks/otel_overhead.py measures it.

- ``AiokprotoInstrumentor().instrument(tracer_provider=..., meter_provider=...)``:
  spans per the messaging semantic conventions (a ``send {topic}`` span per record
  sent, its W3C trace context in the record's headers; a ``poll {topic}`` span per
  record or batch handed out, linked to the producer's) and every client's
  ``metrics()`` through the metrics API. ``uninstrument()`` undoes it.
- ``observe_metrics(client)``: one client's metrics, without the instrumentor.
- ``process_span(record)``: a ``process {topic}`` span around handling one record.

``import aiokproto`` never imports OpenTelemetry; only this package does.
"""

try:
    import opentelemetry.instrumentation.instrumentor
    import opentelemetry.semconv
    import opentelemetry.trace  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("aiokproto.otel needs OpenTelemetry: pip install 'aiokproto[otel]'") from exc

from aiokproto.otel.instrumentor import AiokprotoInstrumentor
from aiokproto.otel.metrics import observe_metrics
from aiokproto.otel.tracing import process_span

__all__ = ["AiokprotoInstrumentor", "observe_metrics", "process_span"]
