"""Spans per the OpenTelemetry messaging semantic conventions (Kafka).

Producer: one ``send {topic}`` span per ``send()`` (PRODUCER), ended when the broker
answered for the record (``send()`` itself returns once the record is buffered). Its
context is the record's *creation context*: injected into a copy of the record's headers
by the global propagator (W3C ``traceparent``/``tracestate`` by default). A record whose
headers already carry a valid creation context keeps it untouched (the conventions: a
custom creation context SHOULD NOT be modified); the span is then CLIENT and links to
it. ``send_batch()`` gets one span for the call (``messaging.batch.message_count``),
which is the creation context of all its records (they share one headers list).

Consumer: the application pulls records (``async for``, ``getone()``, ``getmany()``), so
each call that hands out records gets a *receive* span, ``poll {topic}``, kind CLIENT
(the current conventions' kind for receive), covering the call, with a **link** to each
record's creation context: a batch can come from many traces, and the application's
ambient span (an HTTP request, a job) is the natural parent. For a span around the
processing of one record, ``process_span(record)`` opens a ``process {topic}`` CONSUMER
span (linked, or with ``parent_from_record=True`` a child of the producer's span).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence, Sized
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.propagators.textmap import Getter
from opentelemetry.trace import Link, Span, SpanContext, SpanKind, Status, StatusCode, Tracer

from aiokproto.otel import _attributes as A

log = logging.getLogger(__name__)

Headers = Sequence[tuple[str, Any]]

#: set while an instrumented poll runs, so a poll that calls another (``getone()``
#: calls ``__anext__``, ``ShareConsumer.__anext__`` calls ``getmany()``) makes one span
_POLLING: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "aiokproto_otel_poll", default=False
)

#: tasks that end ``send_batch`` spans, kept referenced until done
_BATCH_WATCHERS: set[asyncio.Task[None]] = set()


class _HeaderGetter(Getter[Headers]):
    """Reads (str, bytes | None) header pairs; values that are not bytes are skipped."""

    def get(self, carrier: Headers, key: str) -> list[str] | None:
        found = [
            bytes(v).decode("utf-8", "replace")
            for k, v in carrier
            if k == key and isinstance(v, (bytes, bytearray))
        ]
        return found or None

    def keys(self, carrier: Headers) -> list[str]:
        return [k for k, _ in carrier]


GETTER = _HeaderGetter()

_SCOPE = "aiokproto"

#: the tracer provider ``instrument()`` was given, for ``process_span()``; here, not in
#: the instrumentor, so the two modules do not import each other
_instrumented_provider: list[trace.TracerProvider | None] = []


def tracer_for(tracer_provider: trace.TracerProvider | None = None) -> trace.Tracer:
    """aiokproto's tracer from ``tracer_provider``, else from the one the instrumentor
    was given, else from the global one."""
    from aiokproto import __version__

    if tracer_provider is None and _instrumented_provider:
        tracer_provider = _instrumented_provider[0]
    return trace.get_tracer(_SCOPE, __version__, tracer_provider)


def creation_context(headers: Headers) -> SpanContext | None:
    """The valid span context the propagator finds in ``headers``, else None (no
    headers, none of its fields, or garbage)."""
    if not headers:
        return None
    try:
        ctx = propagate.get_global_textmap().extract(headers, context=Context(), getter=GETTER)
    except Exception:  # a hostile header must not break a poll
        log.debug("could not extract a trace context from %r", headers, exc_info=True)
        return None
    sc = trace.get_current_span(ctx).get_span_context()
    return sc if sc.is_valid else None


def _listed(headers: Any) -> tuple[Any, bool]:
    """The caller's headers as a new list, and whether they are (str, bytes | None)
    pairs, as the producer accepts them, that we can read and add to. The list is
    passed on in any case (a generator is consumed here), except when it is no
    iterable at all; when they are not such pairs, they are passed on untouched, so
    the producer refuses them as it would without instrumentation (replacing a
    malformed ``traceparent`` would turn a refused send into an accepted one)."""
    if headers is None:
        return [], True
    try:
        copy = list(headers)
    except TypeError:
        return headers, False
    for item in copy:
        if not (
            isinstance(item, (tuple, list))
            and len(item) == 2
            and isinstance(item[0], str)
            and (item[1] is None or isinstance(item[1], (bytes, bytearray)))
        ):
            return copy, False
    return copy, True


def failed(span: Span, exc: BaseException) -> None:
    """``error.type`` (the exception's class name), the exception event, status ERROR."""
    if span.is_recording():
        span.set_attribute(A.ERROR_TYPE, type(exc).__qualname__)
        span.record_exception(exc)
        span.set_status(Status(StatusCode.ERROR, str(exc) or type(exc).__qualname__))


class Tracing:
    """The span logic the instrumentor's method wrappers call."""

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer

    # -- producer -------------------------------------------------------------------

    def start_send(
        self,
        producer: Any,
        topic: Any,
        key: Any,
        partition: Any,
        value_is_none: bool,
        headers: Any,
        count: int | None = None,
    ) -> tuple[Span, Any]:
        """The send span and the headers to send: a copy with the span's context in
        it, or the caller's own when they carry a creation context (or are malformed)."""
        attrs = dict(A.operation_attributes(producer, "send", A.SEND))
        attrs[A.DESTINATION] = str(topic)
        if partition.__class__ is int:
            attrs[A.PARTITION] = str(partition)
        if count is None:
            text = A.key_string(key)
            if text is not None:
                attrs[A.KEY] = text
            if value_is_none:
                attrs[A.TOMBSTONE] = True
        else:
            attrs[A.BATCH_COUNT] = count
        copy, readable = _listed(headers)
        custom = creation_context(copy) if readable and copy else None
        if custom is not None:
            span = self.tracer.start_span(
                f"send {topic}", kind=SpanKind.CLIENT, attributes=attrs, links=[Link(custom)]
            )
            return span, copy
        span = self.tracer.start_span(f"send {topic}", kind=SpanKind.PRODUCER, attributes=attrs)
        if not readable or not span.get_span_context().is_valid:
            return span, copy  # a no-op tracer: no context to pass on
        carrier: dict[str, str] = {}
        propagate.inject(carrier, context=trace.set_span_in_context(span))
        if not carrier:
            return span, copy
        # the propagator's fields replace any (invalid) ones the caller had
        out = [h for h in copy if h[0] not in carrier] if copy else []
        out.extend((k, v.encode()) for k, v in carrier.items())
        return span, out

    def watch_batch(self, span: Span, delivery: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(_end_when_delivered(span, delivery))
        _BATCH_WATCHERS.add(task)
        task.add_done_callback(_BATCH_WATCHERS.discard)

    # -- consumers ------------------------------------------------------------------

    def received_safely(
        self, consumer: Any, start: int, got: Sequence[Any] | Mapping[Any, Sequence[Any]]
    ) -> None:
        """``received`` for one record or a ``getmany()`` answer, never raising: the
        records must reach the caller. An empty poll makes no span (in a loop it would
        be only noise)."""
        try:
            records = (
                [r for recs in got.values() for r in recs] if isinstance(got, Mapping) else got
            )
            if records:
                self.received(consumer, start, records)
        except Exception:
            log.exception("aiokproto.otel: could not record a receive span")

    def received(self, consumer: Any, start: int, records: Sequence[Any]) -> None:
        """One receive span for records a poll handed out, from ``start`` to now."""
        attrs = dict(A.operation_attributes(consumer, "poll", A.RECEIVE))
        links: list[Link] = []
        if len(records) == 1:
            record = records[0]
            topic = record.topic
            attrs[A.DESTINATION] = topic
            attrs[A.PARTITION] = str(record.partition)
            attrs[A.OFFSET] = record.offset
            text = A.key_string(record.key)
            if text is not None:
                attrs[A.KEY] = text
            if record.value is None:
                attrs[A.TOMBSTONE] = True
            sc = creation_context(record.headers)
            if sc is not None:
                links.append(Link(sc))
        else:
            topics = {r.topic for r in records}
            topic = topics.pop() if len(topics) == 1 else None
            attrs[A.BATCH_COUNT] = len(records)
            if topic is not None:
                attrs[A.DESTINATION] = topic
                partitions = {r.partition for r in records}
                if len(partitions) == 1:
                    attrs[A.PARTITION] = str(partitions.pop())
            for record in records:
                sc = creation_context(record.headers)
                if sc is not None:
                    links.append(
                        Link(
                            sc,
                            {
                                A.DESTINATION: record.topic,
                                A.PARTITION: str(record.partition),
                                A.OFFSET: record.offset,
                            },
                        )
                    )
        name = "poll" if topic is None else f"poll {topic}"
        span = self.tracer.start_span(
            name, kind=SpanKind.CLIENT, attributes=attrs, links=links, start_time=start
        )
        span.end()

    def poll_failed(self, consumer: Any, start: int, exc: BaseException) -> None:
        attrs = A.operation_attributes(consumer, "poll", A.RECEIVE)
        span = self.tracer.start_span(
            "poll", kind=SpanKind.CLIENT, attributes=attrs, start_time=start
        )
        failed(span, exc)
        span.end()


def on_delivered(span: Span, handle: Any) -> None:
    """A ``DeliveryFuture`` callback: partition and offset, or the error; then end."""
    try:
        exc = handle.exception()
        if exc is None:
            meta = handle.result()
            if span.is_recording():
                span.set_attribute(A.PARTITION, str(meta.partition))
                if meta.offset >= 0:  # -1 with acks=0
                    span.set_attribute(A.OFFSET, meta.offset)
        else:
            failed(span, exc)
    except BaseException as exc:  # a cancelled batch future raises here
        failed(span, exc)
    finally:
        span.end()


async def _end_when_delivered(span: Span, delivery: Awaitable[Any]) -> None:
    try:
        await delivery
    except BaseException as exc:  # the caller gets the error from its own await
        failed(span, exc)
    finally:
        span.end()


# -- method wrappers (installed by the instrumentor) -------------------------------------


def wrap_send(original: Callable[..., Awaitable[Any]], tracing: Tracing) -> Callable[..., Any]:
    @functools.wraps(original)
    async def send(
        self: Any,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Any = None,
        *,
        on_delivery: Any = None,
    ) -> Any:
        try:
            span, headers = tracing.start_send(self, topic, key, partition, value is None, headers)
        except Exception:  # never let the instrumentation break a send
            log.exception("aiokproto.otel: could not start a send span")
            return await original(
                self, topic, value, key, partition, timestamp_ms, headers, on_delivery=on_delivery
            )
        try:
            handle = await original(
                self, topic, value, key, partition, timestamp_ms, headers, on_delivery=on_delivery
            )
        except BaseException as exc:
            failed(span, exc)
            span.end()
            raise
        if span.is_recording():  # ending a non-recording span does nothing
            handle.add_done_callback(functools.partial(on_delivered, span))
        return handle

    return send


def wrap_send_batch(
    original: Callable[..., Awaitable[Any]], tracing: Tracing
) -> Callable[..., Any]:
    @functools.wraps(original)
    async def send_batch(self: Any, topic: Any, values: Any, **kwargs: Any) -> Any:
        if not isinstance(topic, str):  # aiokafka's send_batch(built, topic, partition=)
            return await original(self, topic, values, **kwargs)
        if not isinstance(values, Sized):
            with contextlib.suppress(TypeError):  # not iterable: send_batch says so
                values = list(values)
        count = len(values) if isinstance(values, Sized) else 0
        try:
            span, headers = tracing.start_send(
                self, topic, None, kwargs.get("partition"), False, kwargs.get("headers"), count
            )
        except Exception:  # never let the instrumentation break a send
            log.exception("aiokproto.otel: could not start a send span")
            return await original(self, topic, values, **kwargs)
        if headers is not None:
            kwargs["headers"] = headers
        try:
            delivery = await original(self, topic, values, **kwargs)
        except BaseException as exc:
            failed(span, exc)
            span.end()
            raise
        if span.is_recording():
            tracing.watch_batch(span, delivery)
        return delivery

    return send_batch


def _wrap_poll(
    original: Callable[..., Awaitable[Any]],
    tracing: Tracing,
    records_of: Callable[[Any], Any],
    passthrough: tuple[type[BaseException], ...],
) -> Callable[..., Any]:
    """A receive span for what one poll call handed out (``records_of`` its result);
    a poll made inside another (``getone()`` calling ``__anext__``) makes none."""

    @functools.wraps(original)
    async def poll(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _POLLING.get():
            return await original(self, *args, **kwargs)
        start = time.time_ns()
        token = _POLLING.set(True)
        try:
            got = await original(self, *args, **kwargs)
        except passthrough:
            raise
        except Exception as exc:
            with contextlib.suppress(Exception):
                tracing.poll_failed(self, start, exc)
            raise
        finally:
            _POLLING.reset(token)
        tracing.received_safely(self, start, records_of(got))
        return got

    return poll


def wrap_poll_one(original: Callable[..., Awaitable[Any]], tracing: Tracing) -> Callable[..., Any]:
    """``__anext__`` and ``getone()``: a receive span for the one record handed out."""
    return _wrap_poll(
        original, tracing, lambda record: (record,), (StopAsyncIteration, asyncio.CancelledError)
    )


def wrap_poll_many(original: Callable[..., Awaitable[Any]], tracing: Tracing) -> Callable[..., Any]:
    """``getmany()``: one receive span per call that returned records."""
    return _wrap_poll(original, tracing, lambda got: got, (asyncio.CancelledError,))


# -- explicit helper ------------------------------------------------------------------------


@contextlib.contextmanager
def process_span(
    record: Any,
    *,
    consumer: Any = None,
    tracer_provider: trace.TracerProvider | None = None,
    parent_from_record: bool = False,
) -> Iterator[Span]:
    """A ``process {topic}`` span (CONSUMER) around the processing of one record, made
    current, so spans started inside it are its children::

        async for record in consumer:
            with process_span(record, consumer=consumer):
                await handle(record)

    The tracer comes from ``tracer_provider``, else the one the instrumentor was given,
    else the global one. It links to the record's creation context (the producer's send span). With
    ``parent_from_record=True`` that context becomes its parent instead, and the
    ambient span, if any, is linked (the conventions' opt-in). An exception escaping the
    block is recorded (``error.type``) and re-raised.
    """
    tracer = tracer_for(tracer_provider)
    attrs = dict(A.client_attributes(consumer)) if consumer is not None else {A.SYSTEM: A.KAFKA}
    attrs[A.OPERATION_NAME] = "process"
    attrs[A.OPERATION_TYPE] = A.PROCESS
    attrs[A.DESTINATION] = record.topic
    attrs[A.PARTITION] = str(record.partition)
    attrs[A.OFFSET] = record.offset
    text = A.key_string(record.key)
    if text is not None:
        attrs[A.KEY] = text
    sc = creation_context(record.headers)
    links: list[Link] = []
    parent: Context | None = None
    if sc is not None:
        links.append(Link(sc))
        if parent_from_record:
            parent = trace.set_span_in_context(trace.NonRecordingSpan(sc))
            ambient = trace.get_current_span().get_span_context()
            if ambient.is_valid:
                links.append(Link(ambient))
    with tracer.start_as_current_span(
        f"process {record.topic}",
        context=parent,
        kind=SpanKind.CONSUMER,
        attributes=attrs,
        links=links,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield span
        except BaseException as exc:
            failed(span, exc)
            raise
