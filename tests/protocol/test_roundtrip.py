"""Property tests over every message (request, response, data, header) and every version.

For a value built from the spec of that version:

- ``encode`` gives the same bytes as the reference encoder walking the version's source
  spec (Kafka 4.4.0 or 3.9.1, unmerged);
- ``decode(encode(x)) == x`` (fields the version does not carry stay at their defaults on
  both sides) and re-encoding gives the same bytes.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.protocol.schema import case_id, cases, message_class, message_strategy, ref_encode

SETTINGS = settings(
    max_examples=6,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.mark.parametrize(("spec", "version"), cases(), ids=case_id)
@SETTINGS
@given(data=st.data())
def test_roundtrip(spec: Any, version: int, data: st.DataObject) -> None:
    cls = message_class(spec)
    value = data.draw(message_strategy(spec, version))
    encoded = value.encode(version)
    assert encoded == ref_encode(spec, value, version)
    decoded = cls.decode(encoded, version)
    assert decoded == value
    assert decoded.encode(version) == encoded
    # decoding from a memoryview at an offset gives the same
    framed = b"\x99" * 3 + encoded
    again, end = cls.decode_from(memoryview(framed), 3, version)
    assert again == value and end == len(framed)


@pytest.mark.parametrize(("spec", "version"), cases(), ids=case_id)
def test_default_instance_roundtrips(spec: Any, version: int) -> None:
    cls = message_class(spec)
    value = cls()
    encoded = value.encode(version)
    assert encoded == ref_encode(spec, value, version)
    assert cls.decode(encoded, version) == value
