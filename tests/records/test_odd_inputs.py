"""The builder and murmur2 on odd input (issue 34, defects 1 and 5), in every build: each
case runs the entry point in use (compiled when built) and the Python reference
(``_append_python``, the record-by-record ``append_many``, ``murmur2_python``), and both
must give the same batch or the same typed error with nothing buffered. The batches are
checked by decoding them: a wrong length or stale bytes show as other records."""

from __future__ import annotations

import array
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from aiokproto.accel import native
from aiokproto.errors import CorruptRecordError, IllegalStateError
from aiokproto.producer.partitioner import murmur2, murmur2_python
from aiokproto.records import batch_v2, decode
from aiokproto.records.batch_v2 import HEADER_SIZE, RecordBatch, RecordBatchBuilder
from aiokproto.records.record import Record

PATHS = ["append", "python"]


@contextmanager
def _pure_append_many() -> Iterator[None]:
    """append_many as the pure-Python build runs it (a no-op in that build)."""
    saved = batch_v2._native
    batch_v2._native = None
    try:
        yield
    finally:
        batch_v2._native = saved


def _append(b: RecordBatchBuilder, path: str) -> Callable[..., int | None]:
    return b._append_python if path == "python" else b.append


def _records(b: RecordBatchBuilder) -> list[Record]:
    return RecordBatch.parse(bytes(b.build())).records()


def _unchanged(b: RecordBatchBuilder, size: int, count: int) -> None:
    assert (b.estimated_size, b.record_count) == (size, count)


# -- defect 1: the builder's own buffer as a key or value -------------------------------


@pytest.mark.parametrize("how", ["append_many", "append_many_python", "append", "python"])
def test_a_built_batch_appended_to_its_own_builder_is_what_it_was(how: str) -> None:
    """A built uncompressed batch is the builder's buffer: appended to the same builder,
    the buffer grows (moves) while it is read. Compiled, the old storage was read after
    its free (ASan: heap-use-after-free; a normal build wrote stale heap bytes)."""
    b = RecordBatchBuilder()
    b.append(0, None, b"x" * 40)
    built = b.build()
    before = bytes(built)
    if how == "append_many":
        assert b.append_many(1, [built], [built], 0, 1) == 1
    elif how == "append_many_python":
        with _pure_append_many():
            assert b.append_many(1, [built], [built], 0, 1) == 1
    else:
        assert _append(b, how)(1, built, built) == 1
    got = _records(b)
    assert [(r.key, r.value) for r in got] == [(None, b"x" * 40), (before, before)]


def test_a_view_of_the_builders_buffer_is_refused_alike() -> None:
    """A memoryview of the buffer pins it (it cannot grow): a BufferError in both
    builds, nothing buffered."""
    for path in PATHS:
        b = RecordBatchBuilder()
        b.append(0, None, b"x" * 40)
        size = b.estimated_size
        with memoryview(b.build()) as view, pytest.raises(BufferError):
            _append(b, path)(1, None, view)
        _unchanged(b, size, 1)


# -- defect 1: a record count no batch holds ---------------------------------------------

# 2**63 - 1 is PY_SSIZE_T_MAX: count + 1 overflowed in C (undefined behaviour)
BAD_COUNTS = [-1, -(2**63), 2**31, 2**62, 2**63 - 1]


@pytest.mark.parametrize("count", BAD_COUNTS)
@pytest.mark.parametrize("how", ["append_many", "append_many_python", "append", "python"])
def test_an_impossible_record_count_is_refused(count: int, how: str) -> None:
    b = RecordBatchBuilder()
    b.append(0, None, b"a")
    b._count = count
    with pytest.raises(IllegalStateError, match="impossible record count"):
        if how == "append_many":
            b.append_many(1, None, [b"b", b"c"], 0, 2)
        elif how == "append_many_python":
            with _pure_append_many():
                b.append_many(1, None, [b"b", b"c"], 0, 2)
        else:
            _append(b, how)(1, None, b"b")
    _unchanged(b, HEADER_SIZE + 8, count)


def test_a_batch_of_2_31_minus_1_records_is_full() -> None:
    """recordCount is int32: at 2**31-1 records the next one starts a new batch."""
    for path in PATHS:
        b = RecordBatchBuilder(batch_size=1 << 20)
        b.append(0, None, b"a")
        b._count = 2**31 - 2
        assert _append(b, path)(1, None, b"b") == 2**31 - 2
        size = b.estimated_size
        assert _append(b, path)(1, None, b"c") is None
        assert b.append_many(1, None, [b"c"], 0, 1) == 0
        with _pure_append_many():
            assert b.append_many(1, None, [b"c"], 0, 1) == 0
        _unchanged(b, size, 2**31 - 1)
    b = RecordBatchBuilder(batch_size=1 << 20)
    b.append(0, None, b"a")
    b._count = 2**31 - 3
    assert b.append_many(1, None, [b"b", b"c", b"d"], 0, 3) == 2  # the third does not fit


# -- defect 5: buffers of multi-byte items count their bytes -----------------------------


def _odd_buffers() -> list[Any]:
    return [
        array.array("I", [1, 2, 3]),
        memoryview(b"abcdefgh").cast("I"),
        memoryview(b"abcdefgh").cast("H", [2, 2]),  # 2-D, C-contiguous
        array.array("d", [1.5]),
    ]


@pytest.mark.parametrize("i", range(4))
def test_a_buffer_of_wider_items_is_written_as_its_bytes(i: int) -> None:
    """len() of an array('I') or a memoryview.cast('I') counts items: Python wrote that
    as the length of 4 times as many bytes (a corrupt batch); it is memoryview.nbytes,
    as the compiled append reads it."""
    odd = _odd_buffers()[i]
    raw = memoryview(odd).tobytes()
    for path in PATHS:
        b = RecordBatchBuilder()
        assert _append(b, path)(5, odd, odd, [("h", odd)]) == 0
        (rec,) = _records(b)
        assert (rec.key, rec.value, rec.headers) == (raw, raw, (("h", raw),))


def test_a_buffer_that_is_not_contiguous_or_not_bytes_is_a_type_error() -> None:
    for bad in (memoryview(b"abcdef")[::2], "text", [1, 2], 5):
        for path in PATHS:
            b = RecordBatchBuilder()
            b.append(0, None, b"a")
            with pytest.raises(TypeError, match="record value must be bytes"):
                _append(b, path)(1, None, bad)
            with pytest.raises(TypeError, match="record key must be bytes"):
                _append(b, path)(1, bad, None)
            with pytest.raises(TypeError, match="header value must be bytes"):
                _append(b, path)(1, None, b"v", [("h", bad)])
            with pytest.raises(TypeError, match="header key must be a str"):
                _append(b, path)(1, None, b"v", [(b"h", b"v")])
            _unchanged(b, HEADER_SIZE + 8, 1)


def test_append_many_takes_bytes_bytearray_and_none_alike() -> None:
    """The compiled loop reads its keys and values in place (no Python code runs in it),
    so it takes bytes, bytearray and None only; the Python one takes the same."""
    for pure in (False, True):
        b = RecordBatchBuilder()
        b.append(0, None, b"a")
        with _pure_append_many() if pure else _nothing():
            assert b.append_many(1, [b"k", None], [bytearray(b"v"), None], 0, 2) == 2
            for bad in (memoryview(b"v"), array.array("I", [1]), "v"):
                with pytest.raises(TypeError, match="bytes, bytearray or None"):
                    b.append_many(2, None, [b"w", bad], 0, 2)
        assert [(r.key, r.value) for r in _records(b)] == [
            (None, b"a"), (b"k", b"v"), (None, None)
        ]


@contextmanager
def _nothing() -> Iterator[None]:
    yield


# -- defect 5: timestamps ---------------------------------------------------------------


class _Index:
    def __index__(self) -> int:
        return 5


@pytest.mark.parametrize("ts", [1.0, 1.5, _Index(), "5", None])
def test_a_timestamp_that_is_not_an_int_is_refused_with_nothing_buffered(ts: Any) -> None:
    """A float first timestamp went in (Python) and build() raised a bare struct.error;
    on the compiled builder the record stayed in the buffer. The compiled append took
    __index__ objects, which Python refused."""
    for how in ("append_many", "append_many_python", "append", "python"):
        for first in (True, False):
            b = RecordBatchBuilder()
            if not first:
                b.append(0, None, b"a")
            size, count, max_ts = b.estimated_size, b.record_count, b.max_timestamp
            with pytest.raises(TypeError, match="timestamp must be an int"):
                if how == "append_many":
                    b.append_many(ts, None, [b"b"], 0, 1)
                elif how == "append_many_python":
                    with _pure_append_many():
                        b.append_many(ts, None, [b"b"], 0, 1)
                else:
                    _append(b, how)(ts, None, b"b")
            _unchanged(b, size, count)
            assert b.max_timestamp == max_ts


def test_a_bool_timestamp_is_an_int_in_both_builds() -> None:
    for path in PATHS:
        b = RecordBatchBuilder()
        assert _append(b, path)(True, None, b"a") == 0
        assert _records(b)[0].timestamp == 1


@pytest.mark.parametrize("ts", [2**63, -(2**63) - 1])
def test_append_many_refuses_a_first_timestamp_outside_int64_alike(ts: int) -> None:
    """as append does: an OverflowError for a first record (nothing buffered, not an
    error from the header field once the records are in), a new batch for a later one"""
    for pure in (False, True):
        with _pure_append_many() if pure else _nothing():
            b = RecordBatchBuilder()
            with pytest.raises(OverflowError):
                b.append_many(ts, None, [b"a", b"b"], 0, 2)
            _unchanged(b, HEADER_SIZE, 0)
            assert b.max_timestamp == -1
            b.append(2**62 if ts > 0 else -(2**62), None, b"a")
            size = b.estimated_size
            assert b.append_many(ts, None, [b"b"], 0, 1) == 0
            _unchanged(b, size, 1)


# -- defect 5: append_many's range and roll back ----------------------------------------


@pytest.mark.parametrize("start, stop", [(-1, 1), (-2, 0), (0, 3), (2, 3)])
def test_append_many_refuses_a_range_outside_the_lists_alike(start: int, stop: int) -> None:
    """start=-1 wrapped to the last value in Python; C raised IndexError."""
    for pure in (False, True):
        b = RecordBatchBuilder()
        with _pure_append_many() if pure else _nothing(), pytest.raises(IndexError):
            b.append_many(0, None, [b"a", b"b"], start, stop)
        _unchanged(b, HEADER_SIZE, 0)
        with _pure_append_many() if pure else _nothing(), pytest.raises(IndexError):
            b.append_many(0, [b"k"], [b"a", b"b"], 0, 2)  # fewer keys than values


def test_an_empty_or_reversed_range_appends_nothing_alike() -> None:
    for pure in (False, True):
        b = RecordBatchBuilder()
        with _pure_append_many() if pure else _nothing():
            assert b.append_many(0, None, [b"a", b"b"], 2, 1) == 0
            assert b.append_many(0, None, [b"a", b"b"], 1, 1) == 0
        _unchanged(b, HEADER_SIZE, 0)


@pytest.mark.parametrize("first", [True, False])
def test_append_many_refused_midway_takes_back_its_records_alike(first: bool) -> None:
    """A bad value after good ones: C took back the call's records, Python kept them
    (counted, in the batch)."""
    for pure in (False, True):
        b = RecordBatchBuilder()
        if not first:
            b.append(7, b"k", b"kept")
        before = (b.estimated_size, b.record_count, b.max_timestamp, b._base_ts)
        with _pure_append_many() if pure else _nothing(), pytest.raises(TypeError):
            b.append_many(9, None, [b"a", b"b", 5, b"c"], 0, 4)  # type: ignore[list-item]
        assert (b.estimated_size, b.record_count, b.max_timestamp, b._base_ts) == before
        assert b.append(9, None, b"z") == (0 if first else 1)
        assert [r.value for r in _records(b)] == ([] if first else [b"kept"]) + [b"z"]



def test_append_many_checks_in_the_same_order_alike() -> None:
    """Found by the differential fuzz (tests/faults/test_codec_differential.py): for
    records that must start a batch of their own (no varlong holds the timestamp delta)
    C returned 0 before looking at the keys' types and Python raised TypeError; and a bad
    header raised in C (encoded before the loop) while Python returned 0. Both now
    check the headers, then whether the records fit, then each record's types."""
    for pure in (False, True):
        b = RecordBatchBuilder()
        b.append(-(2**63), None, b"first")
        with _pure_append_many() if pure else _nothing():
            bad_key: Any = [memoryview(b"k")]
            assert b.append_many(2**62, bad_key, [b"v"], 0, 1) == 0
            with pytest.raises(TypeError, match="header key must be a str"):
                b.append_many(2**62, None, [b"v"], 0, 1, [(b"h", b"v")])  # type: ignore[list-item]
        _unchanged(b, HEADER_SIZE + 12, 1)

# -- defect 5: murmur2 and decode_records -----------------------------------------------


def test_murmur2_hashes_the_bytes_of_any_contiguous_buffer_alike() -> None:
    """A multi-byte buffer was hashed as its items in Python and as its bytes in C."""
    hashes = [murmur2_python, murmur2] + ([native.murmur2] if native is not None else [])
    for odd in _odd_buffers():
        raw = memoryview(odd).tobytes()
        assert {h(odd) for h in hashes} == {murmur2_python(raw)}
    for bad in (memoryview(b"abcdef")[::2], "text", [1, 2, 3], 7):
        for h in hashes:
            with pytest.raises(TypeError, match="murmur2 needs bytes"):
                h(bad)


@pytest.mark.parametrize("buf, count", [(b"", -1), (b"\x00" * 10, -5), (b"", 1), (b"ab", 3)])
def test_decode_records_refuses_an_impossible_count_alike(buf: bytes, count: int) -> None:
    """decode_records(b"", -1) returned [] in Python; C raised ValueError (which the
    callers turn into CorruptRecordError, what Python raises)."""
    with pytest.raises(CorruptRecordError):
        decode.decode_records(buf, count, 0, 0, Record, (), ())
    if native is not None:
        with pytest.raises(ValueError, match="impossible record count"):
            native.decode_records(buf, count, 0, 0, Record, (), ())
