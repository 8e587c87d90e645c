"""Tracing against the real broker: send spans that end at delivery, W3C trace context in
record headers, receive spans linked to the producer's, and the hostile cases."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from aiokproto import Admin, Consumer, Producer, ShareConsumer
from aiokproto.errors import RecordTooLargeError
from aiokproto.otel import AiokprotoInstrumentor, process_span
from aiokproto.producer.producer import SerializationError
from aiokproto.structs import TopicPartition
from tests.otel.conftest import Otel, make_otel
from tests.producer.helpers import create_topic

# the originals, read before any test instruments anything
ORIGINALS = {
    (cls, name): cls.__dict__[name]
    for cls, names in (
        (Producer, ("send", "send_batch", "__init__")),
        (Consumer, ("__anext__", "getone", "getmany", "__init__")),
        (ShareConsumer, ("__anext__", "getmany", "__init__")),
    )
    for name in names
}


def traceparent(span: ReadableSpan) -> str:
    ctx = span.get_span_context()
    assert ctx is not None
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


def header(headers: Any, key: str) -> list[bytes | None]:
    return [v for k, v in headers if k == key]


async def read(bootstrap: str, topic: str, n: int, how: str = "iter") -> list[Any]:
    """``n`` records from offset 0 of partition 0, by ``async for``, getone or getmany."""
    out: list[Any] = []
    async with Consumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", client_id="otel-reader"
    ) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        async with asyncio.timeout(20):
            if how == "iter":
                async for record in consumer:
                    out.append(record)
                    if len(out) == n:
                        break
            elif how == "getone":
                while len(out) < n:
                    out.append(await consumer.getone())
            else:
                while len(out) < n:
                    for recs in (await consumer.getmany(timeout_ms=500)).values():
                        out.extend(recs)
    return out


async def test_a_send_span_has_the_conventions_attributes_and_ends_at_delivery(
    kafka: Any, topic_name: str, otel: Otel
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=2)
    async with Producer(
        bootstrap_servers=kafka.bootstrap_servers, client_id="otel-p", linger_ms=300
    ) as p:
        handle = await p.send(topic_name, b"v", key=b"k1", partition=1)
        # buffered, not delivered: linger holds the batch, so the span is still open
        assert otel.spans() == []
        meta = await handle
    (span,) = otel.spans()
    assert span.name == f"send {topic_name}"
    assert span.kind is SpanKind.PRODUCER
    host, port = kafka.bootstrap_servers.rsplit(":", 1)
    assert dict(span.attributes or {}) == {
        "messaging.system": "kafka",
        "messaging.operation.name": "send",
        "messaging.operation.type": "send",
        "messaging.destination.name": topic_name,
        "messaging.destination.partition.id": "1",
        "messaging.kafka.message.key": "k1",
        "messaging.client.id": "otel-p",
        "server.address": host,
        "server.port": int(port),
        "messaging.kafka.offset": meta.offset,
    }
    assert span.status.status_code is StatusCode.UNSET
    assert span.parent is None


async def test_a_record_carries_the_send_span_and_its_receive_span_links_to_it(
    kafka: Any, topic_name: str, otel: Otel
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    mine = [("app", b"1")]
    tracer = otel.tracer_provider.get_tracer("test")
    async with Producer(bootstrap_servers=kafka.bootstrap_servers) as p:
        with tracer.start_as_current_span("request") as request:
            await (await p.send(topic_name, b"a", headers=mine))
            await (await p.send(topic_name, None, key=b"x", headers=(("app", b"2"),)))
            gen = (h for h in [("app", b"3")])  # consumed once: by the wrapper
            await p.send_and_wait(topic_name, b"c", headers=gen)
    assert mine == [("app", b"1")]  # the caller's list is not touched
    sends = otel.spans(f"send {topic_name}")
    assert len(sends) == 3
    for s in sends:  # children of the application's span
        assert s.parent is not None and s.parent.span_id == request.get_span_context().span_id
    assert (
        sends[1].attributes is not None and sends[1].attributes["messaging.kafka.message.tombstone"]
    )
    otel.exporter.clear()

    records = await read(kafka.bootstrap_servers, topic_name, 3)
    assert [header(r.headers, "app") for r in records] == [[b"1"], [b"2"], [b"3"]]
    for record, send in zip(records, sends, strict=True):
        assert header(record.headers, "traceparent") == [traceparent(send).encode()]
    polls = otel.spans(f"poll {topic_name}")
    assert len(polls) == 3  # one per record handed out
    for poll, send, record in zip(polls, sends, records, strict=True):
        assert poll.kind is SpanKind.CLIENT  # "receive": CLIENT in the current conventions
        attrs = dict(poll.attributes or {})
        assert attrs["messaging.operation.name"] == "poll"
        assert attrs["messaging.operation.type"] == "receive"
        assert attrs["messaging.kafka.offset"] == record.offset
        assert attrs["messaging.destination.partition.id"] == "0"
        assert attrs["messaging.client.id"] == "otel-reader"
        (link,) = poll.links
        assert link.context.span_id == send.get_span_context().span_id
        assert link.context.trace_id == send.get_span_context().trace_id
        assert poll.parent is None  # linked, not a child: the consumer's trace is its own


async def test_getone_makes_one_span_and_getmany_one_span_per_batch_with_a_link_each(
    kafka: Any, topic_name: str, otel: Otel
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    async with Producer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=50) as p:
        batch = await p.send_batch(topic_name, [b"1", b"2", b"3"])
        assert not otel.spans()
        await batch
    (send,) = otel.spans()
    assert send.attributes is not None and send.attributes["messaging.batch.message_count"] == 3
    otel.exporter.clear()

    await read(kafka.bootstrap_servers, topic_name, 3, "getone")
    polls = otel.spans(f"poll {topic_name}")
    assert len(polls) == 3  # getone() calls __anext__: still one span per call
    otel.exporter.clear()

    got = await read(kafka.bootstrap_servers, topic_name, 3, "getmany")
    (poll,) = otel.spans(f"poll {topic_name}")  # empty polls make no span
    assert poll.attributes is not None and poll.attributes["messaging.batch.message_count"] == 3
    assert [link.context.span_id for link in poll.links] == [send.get_span_context().span_id] * 3
    assert [link.attributes["messaging.kafka.offset"] for link in poll.links] == [  # type: ignore[index]
        r.offset for r in got
    ]


async def test_a_failed_delivery_ends_the_span_with_the_error(
    kafka: Any, topic_name: str, otel: Otel
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, configs={"max.message.bytes": "1000"})
    async with Producer(bootstrap_servers=kafka.bootstrap_servers, retries=0) as p:
        handle = await p.send(topic_name, b"y" * 5000)
        with pytest.raises(RecordTooLargeError) as raised:
            await handle
    (span,) = otel.spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes is not None
    # the broker's MESSAGE_TOO_LARGE, a RecordTooLargeError
    assert span.attributes["error.type"] == type(raised.value).__qualname__
    assert span.attributes["error.type"] == "MessageTooLargeError"
    assert "messaging.kafka.offset" not in span.attributes
    assert [e.name for e in span.events] == ["exception"]


async def test_a_send_that_raises_ends_its_span_and_reraises_the_same_exception(
    kafka: Any, topic_name: str, otel: Otel
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    async with Producer(bootstrap_servers=kafka.bootstrap_servers) as p:
        with pytest.raises(SerializationError) as raised:
            await p.send(topic_name, 12345)  # not bytes: refused before buffering
        seen: list[BaseException] = []
        try:
            await p.send(topic_name, b"v", headers=[("k", 5)])  # a bad header value
        except SerializationError as exc:
            seen.append(exc)
        with pytest.raises(SerializationError):
            await p.send_batch(topic_name, [b"ok", 7])
        with pytest.raises(SerializationError):  # not pairs: passed on as they are
            await p.send(topic_name, b"v", headers=(h for h in [("a", b"1"), "bad"]))
        await (await p.send(topic_name, b"fine"))  # and the producer goes on
    spans = otel.spans()
    assert len(spans) == 5
    for span in spans[:4]:
        assert span.status.status_code is StatusCode.ERROR
        assert span.attributes is not None
        assert span.attributes["error.type"] == "SerializationError"
    assert spans[0].events[0].attributes is not None
    assert spans[0].events[0].attributes["exception.message"] == str(raised.value)
    assert len(seen) == 1
    assert spans[4].status.status_code is StatusCode.UNSET


async def test_a_callers_valid_trace_context_is_kept_and_a_garbage_one_replaced(
    kafka: Any, topic_name: str, otel: Otel
) -> None:
    """The conventions: a creation context the caller put in a message SHOULD NOT be
    modified; the send span then links to it (kind CLIENT). A traceparent that is not
    valid is no context: ours replaces it, so the record has exactly one."""
    await create_topic(kafka.bootstrap_servers, topic_name)
    theirs = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    async with Producer(bootstrap_servers=kafka.bootstrap_servers) as p:
        custom = [("traceparent", theirs.encode()), ("tracestate", b"v=1")]
        await (await p.send(topic_name, b"custom", headers=custom))
        garbage = [("traceparent", b"not-a-trace"), ("x", b"1")]
        await (await p.send(topic_name, b"garbage", headers=garbage))
    assert garbage == [("traceparent", b"not-a-trace"), ("x", b"1")]
    first, second = otel.spans()
    assert first.kind is SpanKind.CLIENT
    (link,) = first.links
    assert f"{link.context.trace_id:032x}" == "0af7651916cd43dd8448eb211c80319c"
    assert second.kind is SpanKind.PRODUCER and not second.links
    records = await read(kafka.bootstrap_servers, topic_name, 2)
    assert records[0].headers == (("traceparent", theirs.encode()), ("tracestate", b"v=1"))
    assert header(records[1].headers, "traceparent") == [traceparent(second).encode()]
    assert header(records[1].headers, "x") == [b"1"]
    # the consumer links each record to the context it carries
    polls = otel.spans(f"poll {topic_name}")
    assert f"{polls[0].links[0].context.trace_id:032x}" == "0af7651916cd43dd8448eb211c80319c"
    assert polls[1].links[0].context.span_id == second.get_span_context().span_id


async def test_garbage_trace_headers_on_consumed_records_give_spans_without_links(
    kafka: Any, topic_name: str, otel: Otel
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    hostile = [
        [("traceparent", b"garbage")],
        [("traceparent", None)],
        [("traceparent", b"\xff\xfe\x00")],
        [("traceparent", b"00-" + b"f" * 600)],
        [("traceparent", b"00-00000000000000000000000000000000-b7ad6b7169203331-01")],
        [("traceparent", b"ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")],
    ]
    send = ORIGINALS[(Producer, "send")]  # written without instrumentation
    async with Producer(bootstrap_servers=kafka.bootstrap_servers) as p:
        for headers in hostile:
            await (await send(p, topic_name, b"v", headers=headers))
    records = await read(kafka.bootstrap_servers, topic_name, len(hostile), "getone")
    assert [list(r.headers) for r in records] == hostile
    polls = otel.spans(f"poll {topic_name}")
    assert len(polls) == len(hostile)
    assert all(not s.links for s in polls)
    otel.exporter.clear()
    await read(kafka.bootstrap_servers, topic_name, len(hostile), "getmany")
    (batch,) = otel.spans(f"poll {topic_name}")
    assert not batch.links


async def test_process_span_links_to_the_producer_or_uses_it_as_parent(
    kafka: Any, topic_name: str, otel: Otel
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    async with Producer(bootstrap_servers=kafka.bootstrap_servers) as p:
        await (await p.send(topic_name, b"v", key=b"k"))
    (send,) = otel.spans()
    (record,) = await read(kafka.bootstrap_servers, topic_name, 1)
    tracer = otel.tracer_provider.get_tracer("test")
    otel.exporter.clear()
    with process_span(record) as span:  # the instrumentor's tracer provider
        with tracer.start_as_current_span("work"):
            pass
    with tracer.start_as_current_span("job") as job:
        with pytest.raises(ValueError):
            with process_span(
                record, tracer_provider=otel.tracer_provider, parent_from_record=True
            ):
                raise ValueError("bad record")
    work, linked, child, _job = otel.spans()
    assert linked.name == f"process {topic_name}" and linked.kind is SpanKind.CONSUMER
    assert work.parent is not None and work.parent.span_id == span.get_span_context().span_id
    assert linked.parent is None
    assert [lk.context.span_id for lk in linked.links] == [send.get_span_context().span_id]
    assert linked.attributes is not None and linked.attributes["messaging.kafka.message.key"] == "k"
    # opt-in: a child of the producer's span, linked to it and to the ambient span
    assert child.parent is not None and child.parent.span_id == send.get_span_context().span_id
    assert child.context is not None
    assert child.context.trace_id == send.get_span_context().trace_id
    assert [lk.context.span_id for lk in child.links] == [
        send.get_span_context().span_id,
        job.get_span_context().span_id,
    ]
    assert child.status.status_code is StatusCode.ERROR
    assert child.attributes is not None and child.attributes["error.type"] == "ValueError"


async def test_instrumenting_twice_wraps_once_and_uninstrument_restores_the_originals(
    kafka: Any, topic_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    o = make_otel()
    instrumentor = AiokprotoInstrumentor()
    instrumentor.instrument(tracer_provider=o.tracer_provider, meter_provider=o.meter_provider)
    try:
        other = make_otel()
        with caplog.at_level(logging.WARNING):
            AiokprotoInstrumentor().instrument(tracer_provider=other.tracer_provider)
        assert "already instrumented" in caplog.text
        async with Producer(bootstrap_servers=kafka.bootstrap_servers) as p:
            await (await p.send(topic_name, b"v"))
        assert len(o.spans()) == 1 and other.spans() == []
        (record,) = await read(kafka.bootstrap_servers, topic_name, 1)
        assert len(header(record.headers, "traceparent")) == 1
    finally:
        instrumentor.uninstrument()
    for (cls, name), original in ORIGINALS.items():
        assert cls.__dict__[name] is original, (cls, name)
    assert "__init__" not in Admin.__dict__  # inherited from AdminBase: ours is deleted
    o.exporter.clear()
    async with Producer(bootstrap_servers=kafka.bootstrap_servers) as p:
        await (await p.send(topic_name, b"after"))
    records = await read(kafka.bootstrap_servers, topic_name, 2)
    assert o.spans() == []
    assert header(records[1].headers, "traceparent") == []


async def test_share_consumer_records_get_receive_spans_linked_to_the_producer(
    kafka: Any, topic_name: str, otel: Otel
) -> None:
    from tests.share.conftest import configure_share_group

    await create_topic(kafka.bootstrap_servers, topic_name)
    group = f"s-{topic_name}"
    await configure_share_group(kafka.bootstrap_servers, group)
    async with Producer(bootstrap_servers=kafka.bootstrap_servers) as p:
        for i in range(3):
            await (await p.send(topic_name, b"%d" % i))
    sends = otel.spans()
    otel.exporter.clear()
    got: list[Any] = []
    async with ShareConsumer(
        topic_name, bootstrap_servers=kafka.bootstrap_servers, group_id=group
    ) as share:
        async with asyncio.timeout(20):
            async for record in share:  # __anext__ calls getmany(): one span per record
                got.append(record)
                if len(got) == 3:
                    break
    polls = otel.spans(f"poll {topic_name}")
    assert len(polls) == 3
    by_offset = {r.offset: s for r, s in zip(got, polls, strict=True)}
    for offset, send in enumerate(sends):
        poll = by_offset[offset]
        assert poll.attributes is not None
        assert poll.attributes["messaging.consumer.group.name"] == group
        assert poll.links[0].context.span_id == send.get_span_context().span_id


async def test_an_instrumented_send_takes_on_delivery(
    kafka: Any, topic_name: str, otel: Otel
) -> None:
    reports: list[Any] = []
    async with Producer(bootstrap_servers=kafka.bootstrap_servers) as p:
        handle = await p.send(topic_name, b"v", on_delivery=lambda e, m: reports.append((e, m)))
        meta = await handle
        await asyncio.sleep(0)
    assert reports == [(None, meta)]
    (span,) = otel.spans()
    assert span.name == f"send {topic_name}"
