"""``AiokprotoInstrumentor``: OpenTelemetry tracing and metrics for every aiokproto client.

``AiokprotoInstrumentor().instrument(tracer_provider=..., meter_provider=...)`` replaces
a few methods of the client classes with traced ones (``Producer.send``/``send_batch``,
``Consumer.__anext__``/``getone``/``getmany``, ``ShareConsumer.__anext__``/``getmany``)
and makes every client created from then on (``Producer``, ``Consumer``,
``ShareConsumer``, ``Admin``) report ``metrics()`` through the meter provider;
``uninstrument()`` puts the original methods back. Nothing is patched until
``instrument()`` runs, so an application that never calls it pays nothing, and the
client code itself has no tracing checks on its hot paths. Instrumenting twice does
nothing the second time (``BaseInstrumentor`` warns). ``opentelemetry-instrument``
finds it through the ``opentelemetry_instrumentor`` entry point.
"""

from __future__ import annotations

import functools
import logging
import weakref
from collections.abc import Callable, Collection
from typing import Any

from opentelemetry.instrumentation.instrumentor import (  # type: ignore[attr-defined]
    BaseInstrumentor,
)

from aiokproto.otel.metrics import MetricsBridge, bridge_for
from aiokproto.otel.tracing import (
    Tracing,
    _instrumented_provider,
    tracer_for,
    wrap_poll_many,
    wrap_poll_one,
    wrap_send,
    wrap_send_batch,
)

log = logging.getLogger(__name__)

_MARK = "__aiokproto_otel__"

Wrapper = Callable[[Callable[..., Any], Tracing], Callable[..., Any]]


def _targets() -> list[tuple[type, str, Wrapper]]:
    from aiokproto.consumer import Consumer
    from aiokproto.producer import Producer
    from aiokproto.share import ShareConsumer

    return [
        (Producer, "send", wrap_send),
        (Producer, "send_batch", wrap_send_batch),
        (Consumer, "__anext__", wrap_poll_one),
        (Consumer, "getone", wrap_poll_one),
        (Consumer, "getmany", wrap_poll_many),
        (ShareConsumer, "__anext__", wrap_poll_one),
        (ShareConsumer, "getmany", wrap_poll_many),
    ]


def _client_classes() -> list[type]:
    from aiokproto.admin import Admin
    from aiokproto.consumer import Consumer
    from aiokproto.producer import Producer
    from aiokproto.share import ShareConsumer

    return [Producer, Consumer, ShareConsumer, Admin]


class _Patch:
    """One replaced class attribute, and how to put it back."""

    __slots__ = ("cls", "name", "original", "own")

    def __init__(self, cls: type, name: str, original: Any, own: bool) -> None:
        self.cls = cls
        self.name = name
        self.original = original
        self.own = own  # defined on the class itself (else inherited: delete ours)

    def undo(self) -> None:
        if self.own:
            setattr(self.cls, self.name, self.original)
        else:
            delattr(self.cls, self.name)


def _patch(cls: type, name: str, make: Callable[[Any], Callable[..., Any]]) -> _Patch | None:
    own = name in cls.__dict__
    original = cls.__dict__[name] if own else getattr(cls, name)
    if getattr(original, _MARK, False):
        log.warning("aiokproto.otel: %s.%s is instrumented already", cls.__name__, name)
        return None
    wrapper = make(original)
    setattr(wrapper, _MARK, True)
    setattr(cls, name, wrapper)
    return _Patch(cls, name, original, own)


class AiokprotoInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """OpenTelemetry for aiokproto. ``instrument()`` takes ``tracer_provider`` and
    ``meter_provider`` (the global ones by default)."""

    _patches: list[_Patch]
    _bridge: MetricsBridge | None = None
    _observed: weakref.WeakSet[Any]

    def instrumentation_dependencies(self) -> Collection[str]:
        return ()  # this is aiokproto's own instrumentation: nothing else to check

    def _instrument(self, **kwargs: Any) -> None:
        provider = kwargs.get("tracer_provider")
        tracing = Tracing(tracer_for(provider))
        _instrumented_provider[:] = [provider]
        self._bridge = bridge_for(kwargs.get("meter_provider"))
        self._observed = weakref.WeakSet()
        self._patches = []
        for cls, name, wrap in _targets():
            done = _patch(cls, name, functools.partial(_bind, wrap, tracing))
            if done is not None:
                self._patches.append(done)
        for cls in _client_classes():
            done = _patch(cls, "__init__", functools.partial(_wrap_init, self._observe))
            if done is not None:
                self._patches.append(done)

    def _observe(self, client: Any) -> None:
        bridge = self._bridge
        if bridge is None or not callable(getattr(client, "metrics", None)):
            return  # a client class without metrics() yet
        try:
            bridge.add(client)
            self._observed.add(client)
        except Exception:
            log.exception("aiokproto.otel: could not observe %r", client)

    def _uninstrument(self, **kwargs: Any) -> None:
        for patch in reversed(self._patches):
            patch.undo()
        self._patches = []
        _instrumented_provider.clear()
        if self._bridge is not None:
            for client in list(self._observed):
                self._bridge.discard(client)
        self._observed = weakref.WeakSet()
        self._bridge = None


def _bind(wrap: Wrapper, tracing: Tracing, original: Callable[..., Any]) -> Callable[..., Any]:
    return wrap(original, tracing)


def _wrap_init(
    observe: Callable[[Any], None], original: Callable[..., None]
) -> Callable[..., None]:
    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        observe(self)

    return __init__
