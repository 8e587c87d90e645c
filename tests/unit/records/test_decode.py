"""The one Python v2 decoder (aiokproto.records.decode) in every build: against the
compiled one whenever it is built, also under AIOKPROTO_PURE_PYTHON=1 (which only stops
aiokproto from loading it), and the typed error for a codec this client does not know."""

from __future__ import annotations

import importlib
import struct
from types import ModuleType
from typing import Any

import pytest
from crc32c import crc32c
from hypothesis import given
from hypothesis import strategies as st

from aiokproto.consumer.decode import decode_v2
from aiokproto.consumer.record import ConsumerRecord
from aiokproto.errors import CorruptRecordError, UnsupportedCompressionTypeError
from aiokproto.records import decode
from aiokproto.records.batch_v2 import HEADER_SIZE, RecordBatch, RecordBatchBuilder
from aiokproto.records.record import LOG_APPEND_TIME, Record
from tests.records.strategies import RECORDS, record


def _compiled() -> ModuleType | None:
    try:
        return importlib.import_module("aiokproto._accel")
    except ImportError:
        return None


compiled = _compiled()
needs_compiled = pytest.mark.skipif(compiled is None, reason="aiokproto._accel is not built")

# (cls, prefix, suffix): RecordBatch's shape, the consumers' shape, and one neither uses
SHAPES: list[tuple[type[Any], tuple[Any, ...], tuple[Any, ...]]] = [
    (Record, (), ()),
    (ConsumerRecord, ("t", 3), (7,)),
    (ConsumerRecord, ("t",), (3, 7)),
]


def _section(recs: list[tuple[int, bytes | None, bytes | None, list[Any]]]) -> bytes:
    b = RecordBatchBuilder(batch_size=1 << 30)
    for td, k, v, h in recs:
        b.append(1_000 + td, k, v, h)
    return bytes(b.build())[HEADER_SIZE:]


def _run(fn: Any, buf: bytes, count: int, shape: int) -> Any:
    cls, prefix, suffix = SHAPES[shape]
    try:
        return fn(buf, count, 10, 1_000, cls, prefix, suffix)
    except (CorruptRecordError, ValueError):
        return CorruptRecordError


@needs_compiled
@RECORDS
@given(
    recs=st.lists(record, min_size=1, max_size=20),
    shape=st.integers(0, len(SHAPES) - 1),
    data=st.data(),
)
def test_reference_and_compiled_decode_alike(
    recs: list[tuple[int, bytes | None, bytes | None, list[Any]]], shape: int, data: st.DataObject
) -> None:
    assert compiled is not None
    buf = bytearray(_section(recs))
    count = len(recs)
    py = _run(decode.decode_records, bytes(buf), count, shape)
    assert py is not CorruptRecordError
    at = len(SHAPES[shape][1])  # key, value, headers sit after offset, timestamp, type
    want = [(k, v, h) for _, k, v, h in recs]
    assert [(r[at + 3], r[at + 4], list(r[at + 5])) for r in py] == want
    assert _run(compiled.decode_records, bytes(buf), count, shape) == py
    if data.draw(st.booleans()):  # damaged: both refuse it, or both read the same
        i = data.draw(st.integers(0, len(buf) - 1))
        buf[i] = data.draw(st.integers(0, 255))
        count = data.draw(st.sampled_from([count, count - 1, count + 1]))
        py = _run(decode.decode_records, bytes(buf), count, shape)
        assert _run(compiled.decode_records, bytes(buf), count, shape) == py


def _batch(codec: int, *, log_append_time: bool = False) -> bytes:
    """A valid-CRC batch whose attributes name ``codec`` (records left uncompressed)."""
    b = RecordBatchBuilder(log_append_time=log_append_time)
    for i in range(3):
        b.append(1_000 + i, None, b"v%d" % i)
    raw = bytearray(b.build())
    attrs_at = 21  # baseOffset, batchLength, epoch, magic, crc
    attrs = struct.unpack_from(">h", raw, attrs_at)[0]
    struct.pack_into(">h", raw, attrs_at, attrs & ~0x07 | codec)
    struct.pack_into(">I", raw, 17, crc32c(bytes(raw[21:])))
    return bytes(raw)


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_an_unknown_codec_is_a_typed_error_naming_it(codec: int) -> None:
    raw = _batch(codec)
    batch = RecordBatch.parse(raw)
    for read in (batch.records, lambda: decode_v2(batch, memoryview(raw), "t", 0)):
        with pytest.raises(UnsupportedCompressionTypeError, match=f"codec {codec}") as err:
            read()
        assert "offset 0" in str(err.value)
        assert not isinstance(err.value, CorruptRecordError)


def test_log_append_time_is_applied_to_every_shape() -> None:
    raw = _batch(0, log_append_time=True)
    batch = RecordBatch.parse(raw)
    ts = batch.max_timestamp
    for recs in (batch.records(), decode_v2(batch, memoryview(raw), "t", 4)):
        assert [(r.timestamp, r.timestamp_type) for r in recs] == [(ts, LOG_APPEND_TIME)] * 3
        assert [r.value for r in recs] == [b"v0", b"v1", b"v2"]
    cons = decode_v2(batch, memoryview(raw), "t", 4)
    assert [(c.topic, c.partition, c.offset) for c in cons] == [("t", 4, i) for i in range(3)]
