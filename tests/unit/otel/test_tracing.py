"""The creation context a ``send`` span reads back from record headers survives hostile headers."""

from __future__ import annotations

from aiokproto.otel.tracing import creation_context


def test_creation_context_survives_hostile_headers() -> None:
    good = b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    sc = creation_context((("traceparent", good),))
    assert sc is not None and sc.is_remote and f"{sc.span_id:016x}" == "b7ad6b7169203331"
    for headers in (
        (),
        (("traceparent", None),),
        (("traceparent", b"\x80\x81"),),
        (("traceparent", b"00-zz-yy-01"),),
        (("traceparent", b"x" * 10_000),),
        (("other", good),),
    ):
        assert creation_context(headers) is None, headers
    # the first of two wins, as with HTTP headers
    assert creation_context((("traceparent", good), ("traceparent", b"junk"))) == sc
