"""The compiled codec (aiokproto._accel) against its Python reference, in one process:
the same bytes out of the encoders, the same records (or both a CorruptRecordError) out
of the decoders, on generated and on damaged input (no sockets)."""

from __future__ import annotations

import array
import copy
import gc
import importlib.util
import os
import pickle
import subprocess
import sys
import weakref
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiokproto import accel
from aiokproto.consumer.record import ConsumerRecord
from aiokproto.errors import CorruptRecordError
from aiokproto.producer.partitioner import murmur2_python
from aiokproto.records import batch_v2, decode
from aiokproto.records.batch_v2 import HEADER_SIZE, RecordBatch, RecordBatchBuilder
from aiokproto.records.record import Record
from tests.records.strategies import RECORDS, headers, maybe_bytes, record

native: Any = accel.native
pytestmark = pytest.mark.skipif(native is None, reason="aiokproto._accel is not built")


def _builder(
    recs: list[tuple[int, bytes | None, bytes | None, list[Any]]],
    base_ts: int,
    limit: int,
    *,
    python: bool,
) -> tuple[RecordBatchBuilder, list[int | None]]:
    b = RecordBatchBuilder(batch_size=limit)
    append = b._append_python if python else b.append
    return b, [append(base_ts + td, k, v, h) for td, k, v, h in recs]


@RECORDS
@given(
    recs=st.lists(record, min_size=1, max_size=30),
    base_ts=st.integers(0, 2**41),
    limit=st.sampled_from([0, 200, 2_000, 1 << 20]),
)
def test_append_writes_the_bytes_python_writes(
    recs: list[tuple[int, bytes | None, bytes | None, list[Any]]], base_ts: int, limit: int
) -> None:
    py, py_deltas = _builder(recs, base_ts, limit, python=True)
    c, c_deltas = _builder(recs, base_ts, limit, python=False)
    assert c_deltas == py_deltas  # the same record is the first that does not fit
    assert bytes(c.build()) == bytes(py.build())


@RECORDS
@given(
    values=st.lists(maybe_bytes, min_size=1, max_size=40),
    keyed=st.booleans(),
    hdrs=headers,
    split=st.integers(0, 40),
    limit=st.sampled_from([0, 300, 3_000, 1 << 20]),
)
def test_append_many_equals_appending_one_by_one(
    values: list[bytes | None], keyed: bool, hdrs: list[Any], split: int, limit: int
) -> None:
    keys = [None if v is None else v[::-1] for v in values] if keyed else None
    ts = 1_700_000_000_000
    one = RecordBatchBuilder(batch_size=limit)
    many = RecordBatchBuilder(batch_size=limit)
    # a record already in (or not): deltas continue from it
    for b in (one, many):
        if split % 2:
            b.append(ts - 5, b"k", b"v")
    expected = 0
    for i, v in enumerate(values):
        if one.append(ts, None if keys is None else keys[i], v, hdrs) is None:
            break
        expected += 1
    done = many.append_many(ts, keys, values, 0, len(values), hdrs)
    assert done == expected >= (1 if not split % 2 else 0)
    assert bytes(many.build()) == bytes(one.build())
    # and the Python fallback of append_many gives the same again
    fallback = RecordBatchBuilder(batch_size=limit)
    if split % 2:
        fallback.append(ts - 5, b"k", b"v")
    assert batch_v2._native is not None
    try:
        batch_v2._native = None
        assert fallback.append_many(ts, keys, values, 0, len(values), hdrs) == expected
    finally:
        batch_v2._native = native
    assert bytes(fallback.build()) == bytes(one.build())


def _section(recs: list[tuple[int, bytes | None, bytes | None, list[Any]]]) -> bytes:
    b = RecordBatchBuilder(batch_size=1 << 30)
    for td, k, v, h in recs:
        b.append(1_000 + td, k, v, h)
    return bytes(b.build())[HEADER_SIZE:]


def _both(buf: bytes, count: int) -> tuple[Any, Any]:
    """(python result or error type, native result or error type)."""
    try:
        py: Any = decode.decode_records(buf, count, 10, 1_000, ConsumerRecord, ("t", 3), (7,))
    except CorruptRecordError:
        py = CorruptRecordError
    try:
        c: Any = native.decode_records(buf, count, 10, 1_000, ConsumerRecord, ("t", 3), (7,))
    except ValueError:
        c = CorruptRecordError
    return py, c


@RECORDS
@given(recs=st.lists(record, min_size=1, max_size=25))
def test_decode_gives_the_records_python_gives(
    recs: list[tuple[int, bytes | None, bytes | None, list[Any]]],
) -> None:
    buf = _section(recs)
    py, c = _both(buf, len(recs))
    assert py is not CorruptRecordError
    assert c == py
    assert all(type(r) is ConsumerRecord for r in c)
    assert [r.headers for r in c] == [tuple(h) for _, _, _, h in recs]


@RECORDS
@given(
    recs=st.lists(record, min_size=1, max_size=8),
    data=st.data(),
)
def test_damaged_sections_fail_alike(
    recs: list[tuple[int, bytes | None, bytes | None, list[Any]]], data: st.DataObject
) -> None:
    """Flipped bytes, truncation, extra bytes and wrong counts: the compiled decoder
    accepts exactly what the Python one accepts and returns the same records."""
    buf = bytearray(_section(recs))
    kind = data.draw(st.sampled_from(["flip", "cut", "extend", "count"]))
    count = len(recs)
    if kind == "flip":
        for _ in range(data.draw(st.integers(1, 4))):
            i = data.draw(st.integers(0, len(buf) - 1))
            buf[i] = data.draw(st.integers(0, 255))
    elif kind == "cut":
        del buf[data.draw(st.integers(0, len(buf) - 1)) :]
    elif kind == "extend":
        buf += data.draw(st.binary(min_size=1, max_size=12))
    else:
        # negative too: Python returned [] for b"" and a negative count (issue 34)
        count = data.draw(st.integers(-(2**63), len(recs) + 3))
    py, c = _both(bytes(buf), count)
    assert c == py


@pytest.mark.parametrize(
    "section",
    [
        b"\x0e\x00\x00\x00\x81\x00\x00\x00",  # key length -1 in two bytes: not a null key
        b"\x0c\x00\x00\x00\x01\xff\xff\xff\xff\x0f\x00",  # over-long value length
        b"\x10\x00\x00\x00\x01\x02\x01\x04\x02\xff\xfe\x00",  # header key not UTF-8
        b"\x0a\x00\x00\x00\x01\x01\x7f",  # header count beyond the bytes
        b"\x14\x00\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f\x00\x01\x01\x00",  # varlong > 64 bits
    ],
)
def test_hostile_records_are_refused_by_both(section: bytes) -> None:
    py, c = _both(section, 1)
    assert py is CorruptRecordError and c is CorruptRecordError


def test_offsets_and_timestamps_beyond_int64_are_exact() -> None:
    b = RecordBatchBuilder()
    b.append(2**62, None, b"v")
    buf = bytes(b.build())[HEADER_SIZE:]
    base = 2**63 - 2
    got = native.decode_records(buf, 1, base, base, Record, (), ())
    want = decode.decode_records(buf, 1, base, base, Record, (), ())
    assert got == want and got[0].timestamp == base + 0


def test_record_batch_iteration_uses_the_same_records_either_way() -> None:
    b = RecordBatchBuilder()
    for i in range(50):
        b.append(5_000 + i, str(i).encode(), b"v" * i, [("h", b"x")] if i % 7 else None)
    batch = RecordBatch.parse(bytes(b.build()))
    compiled = batch.records()
    try:
        decode._native = None
        assert batch.records() == compiled
    finally:
        decode._native = native
    assert all(type(r) is Record for r in compiled)


def test_decoded_records_are_not_tracked_by_the_cyclic_gc() -> None:
    """Records hold no container, so none can be in a cycle: the compiled decoder takes
    them (and their headers) off the collector's lists, which never untracks a tuple
    subclass itself (every collection walked every live record: a third of the Spark
    source's CPU). With a container in the prefix they stay tracked."""
    b = RecordBatchBuilder()
    for i in range(20):
        b.append(1_000 + i, b"k" if i % 2 else None, b"v" * i, [("h", b"x"), ("n", None)] * (i % 3))
    buf = bytes(b.build())[HEADER_SIZE:]
    got = native.decode_records(buf, 20, 0, 1_000, ConsumerRecord, ("t", 3), (7,))
    assert not any(gc.is_tracked(r) for r in got)
    assert not any(gc.is_tracked(r.headers) for r in got)
    assert not any(gc.is_tracked(h) for r in got for h in r.headers)
    gc.collect()
    want = decode.decode_records(buf, 20, 0, 1_000, ConsumerRecord, ("t", 3), (7,))
    assert got == want
    held = native.decode_records(buf, 20, 0, 1_000, ConsumerRecord, ("t", [3]), (7,))
    assert all(gc.is_tracked(r) for r in held)


def test_records_holding_an_untracked_dict_stay_tracked() -> None:
    """An empty dict is off the collector's lists until a container goes in it, so
    "not tracked" does not mean "no container": records holding one were untracked, and
    the cycle made through the dict afterwards was never freed (review: a leak)."""
    b = RecordBatchBuilder()
    b.append(1_000, b"k", b"v", [("h", b"x")])
    buf = bytes(b.build())[HEADER_SIZE:]
    box: dict[str, Any] = {}
    assert not gc.is_tracked(box)
    recs = native.decode_records(buf, 1, 0, 1_000, ConsumerRecord, ("t", box), (7,))
    assert all(gc.is_tracked(r) for r in recs)
    canary = _Canary()
    box["cycle"] = recs  # box -> recs -> record -> box
    box["canary"] = canary
    gone = weakref.ref(canary)
    del recs, box, canary
    gc.collect()
    assert gone() is None


class _Canary:
    pass


class _WithDict(tuple):  # type: ignore[type-arg]
    pass


@pytest.mark.parametrize(
    "args",
    [
        (bytearray(b"\x00"), 1, 0, 0, Record, (), ()),  # not bytes
        (b"", 0, 0, 0, tuple, (), ()),  # not a NamedTuple
        (b"", 0, 0, 0, dict, (), ()),  # not a tuple class
        (b"", 0, 0, 0, Record, [], ()),  # prefix not a tuple
        # struct sequences free their items their own way (review: this crashed)
        (b"\x0c\x00\x00\x00\x01\x01\x00", 1, 0, 0, os.stat_result, (), ()),
        (b"", 0, 0, 0, _WithDict, (), ()),  # instances with a __dict__
    ],
)
def test_decode_records_checks_its_arguments(args: tuple[Any, ...]) -> None:
    with pytest.raises(TypeError):
        native.decode_records(*args)


def test_each_module_object_has_its_own_state() -> None:
    # multi-phase init (PEP 489): a second module object from the same spec is made and
    # run anew, and its decoder reads the NamedTuple probe from its own state (left
    # unfilled, it would refuse every record class)
    spec = importlib.util.find_spec("aiokproto._accel")
    assert spec is not None and spec.loader is not None
    other = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(other)
    assert other is not native
    section = bytes.fromhex("10 00 00 00 02 6b 02 76 00")  # one record: key b"k", value b"v"
    want = native.decode_records(section, 1, 5, 7, ConsumerRecord, ("t", 0), ())
    assert [(r.offset, r.timestamp, r.key, r.value) for r in want] == [(5, 7, b"k", b"v")]
    assert other.decode_records(section, 1, 5, 7, ConsumerRecord, ("t", 0), ()) == want
    with pytest.raises(TypeError):
        other.decode_records(section, 1, 0, 0, os.stat_result, (), ())


@pytest.mark.skipif(sys.version_info < (3, 12), reason="isolated sub-interpreters: 3.12+")
def test_the_codec_declares_it_cannot_run_in_an_isolated_subinterpreter() -> None:
    # the producer's types and bound classes are still process-wide statics, so the
    # module says so rather than share them across interpreters
    interpreters: Any = pytest.importorskip("_xxsubinterpreters")
    iid = interpreters.create(isolated=True)
    try:
        with pytest.raises(Exception, match="does not support loading in subinterpreters"):
            interpreters.run_string(iid, "import aiokproto._accel")
    finally:
        interpreters.destroy(iid)


def test_append_refuses_what_is_not_bytes_and_leaves_the_batch_alone() -> None:
    b = RecordBatchBuilder()
    b.append(1, None, b"ok")
    before = bytes(b.build())
    with pytest.raises(TypeError, match="value must be bytes"):
        b.append(2, None, "text")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        b.append_many(2, None, [b"a", 5], 0, 2)  # type: ignore[list-item]
    with pytest.raises(IndexError):
        b.append_many(2, None, [b"a"], 0, 3)
    # nothing of the refused calls stayed in: the batch is what it was
    assert b.record_count == 1
    assert bytes(b.build()) == before


def test_append_many_runs_no_python_code_midway() -> None:
    """A value whose buffer export is Python code (3.12+ ``__buffer__``) could empty the
    list or pin the batch buffer in the middle of the loop (review: a segfault and a
    corrupt batch): only bytes, bytearray and None are taken, read in place."""

    class Evil:
        def __buffer__(self, flags: int) -> memoryview:
            values.clear()
            return memoryview(b"x")

    values: list[Any] = [b"a", Evil(), *[b"v%d" % i for i in range(100)]]
    b = RecordBatchBuilder()
    with pytest.raises(TypeError, match="bytes, bytearray or None"):
        b.append_many(0, None, values, 0, len(values))
    assert b.record_count == 0 and b.estimated_size == HEADER_SIZE
    assert b.append_many(0, None, [b"k", bytearray(b"ba"), None], 0, 3) == 3
    assert [r.value for r in RecordBatch.parse(bytes(b.build())).records()] == [
        b"k",
        b"ba",
        None,
    ]


@pytest.mark.parametrize("first, second", [(-1, 2**63 - 1), (2**63 - 1, -1), (0, 2**63 - 1)])
def test_a_timestamp_delta_no_varlong_holds_starts_a_new_batch(first: int, second: int) -> None:
    """Timestamps the producer accepts ([-1, 2**63)) can be 2**63 apart: that record does
    not fit the batch (review: C raised, Python wrote a wrong timestamp)."""
    for pure in (False, True):
        b = RecordBatchBuilder()
        append = b._append_python if pure else b.append
        try:
            if pure:
                batch_v2._native = None
            assert append(first, None, b"a") == 0
            fits = -(2**63) <= second - first < 2**63
            assert (append(second, None, b"b") is not None) == fits
            assert b.append_many(second, None, [b"c"], 0, 1) == (1 if fits else 0)
        finally:
            batch_v2._native = native
        got = RecordBatch.parse(bytes(b.build())).records()
        assert got[0].timestamp == first
        assert all(r.timestamp == second for r in got[1:])


@pytest.mark.parametrize("ts", [2**63, -(2**63) - 1, 2**80])
def test_a_first_timestamp_outside_int64_is_refused_alike(ts: int) -> None:
    """The batch header holds int64 timestamps: both builds refuse the first record at
    append (not a struct error at build), and a later one starts a batch of its own."""
    for pure in (False, True):
        b = RecordBatchBuilder()
        append = b._append_python if pure else b.append
        with pytest.raises(OverflowError):
            append(ts, None, b"a")
        assert b.record_count == 0 and b.estimated_size == HEADER_SIZE
        assert append(0, None, b"a") == 0
        assert append(ts, None, b"b") is None
        assert b.record_count == 1


def test_the_compiled_append_keeps_its_state_where_python_reads_it() -> None:
    """RecordsBuilder (C) holds the fields build() and append_many() read in Python."""
    b = RecordBatchBuilder(batch_size=1 << 20)
    assert b.append(1_000, b"k", b"v", [("h", b"1"), ("n", None)]) == 0
    assert b.append(900, None, b"w") == 1
    assert b.append_many(1_005, None, [b"x", b"y"], 0, 2) == 2
    assert (b.record_count, b._base_ts, b.max_timestamp) == (4, 1_000, 1_005)
    records = RecordBatch.parse(bytes(b.build())).records()
    assert [(r.timestamp, r.key, r.value) for r in records] == [
        (1_000, b"k", b"v"),
        (900, None, b"w"),
        (1_005, None, b"x"),
        (1_005, None, b"y"),
    ]
    assert [tuple(h) for h in records[0].headers] == [("h", b"1"), ("n", None)]
    del b._buf
    with pytest.raises((TypeError, AttributeError)):
        b.append(1_000, None, b"v")
    with pytest.raises(TypeError):
        b.append(1.5, None, b"v")  # type: ignore[arg-type]


def test_a_batch_buffer_grows_with_its_records_by_half_up_to_its_limit() -> None:
    """A 1,000,000-byte batch reserves nothing up front (a partition holding one small
    record holds a small buffer), and big records grow it by half, not to the exact
    size at every append (a realloc that cannot extend in place copies the batch)."""
    b = RecordBatchBuilder(batch_size=1_000_000)
    b.append(0, None, b"v" * 100)
    assert sys.getsizeof(b._buf) < 1_024
    sizes = set()
    value = b"x" * 100_000
    while b.append(0, None, value) is not None:
        alloc = sys.getsizeof(b._buf)
        assert b.estimated_size < alloc <= max(1.5 * b.estimated_size + 100, 1_000_100)
        sizes.add(alloc)
    assert b.record_count == 10 and len(sizes) <= 6  # 9 appends, 5 or 6 reallocations
    assert sys.getsizeof(b._buf) <= 1_000_100  # capped by the batch's limit


@given(st.binary(max_size=300))
def test_murmur2_is_the_python_hash(data: bytes) -> None:
    assert native.murmur2(data) == murmur2_python(data)
    assert native.murmur2(memoryview(data)) == murmur2_python(data)


# Buffers whose items are wider than a byte: both builds write and hash their bytes
# (issue 34: Python counted items, and wrote a corrupt batch).
_words = st.lists(st.integers(0, 2**32 - 1), max_size=12)
odd_buffer = st.one_of(
    st.binary(max_size=40).map(bytearray),
    _words.map(lambda w: array.array("I", w)),
    _words.map(lambda w: memoryview(array.array("I", w).tobytes()).cast("I")),
    st.lists(st.integers(-(2**15), 2**15 - 1), max_size=12).map(lambda w: array.array("h", w)),
)
odd_field = st.one_of(maybe_bytes, odd_buffer)


@RECORDS
@given(
    recs=st.lists(
        st.tuples(
            st.integers(-10_000, 10_000),
            odd_field,
            odd_field,
            st.lists(st.tuples(st.text(max_size=4), st.one_of(st.none(), odd_buffer)), max_size=2),
        ),
        min_size=1,
        max_size=12,
    ),
    limit=st.sampled_from([0, 300, 1 << 20]),
)
def test_append_writes_any_buffer_as_its_bytes_as_python_does(
    recs: list[tuple[int, Any, Any, list[Any]]], limit: int
) -> None:
    py, py_deltas = _builder(recs, 1_000, limit, python=True)
    c, c_deltas = _builder(recs, 1_000, limit, python=False)
    assert c_deltas == py_deltas
    built = bytes(c.build())
    assert built == bytes(py.build())
    raw = [  # the records that went in (a later smaller one may fit where one did not)
        None if k is None else memoryview(k).tobytes()
        for (_, k, _, _), delta in zip(recs, c_deltas, strict=True)
        if delta is not None
    ]
    assert [r.key for r in RecordBatch.parse(built).records()] == raw


@given(odd_buffer)
def test_murmur2_hashes_any_buffer_as_its_bytes_as_python_does(data: Any) -> None:
    raw = memoryview(data).tobytes()
    assert native.murmur2(data) == murmur2_python(data) == murmur2_python(raw)


def test_the_environment_variable_selects_pure_python() -> None:
    code = "import aiokproto.accel as a; print(a.implementation())"
    env = {**os.environ, accel.ENV_VAR: "1"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "python"
    env[accel.ENV_VAR] = "0"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "compiled"


def test_append_takes_any_header_sequence_and_its_keywords_as_python_does() -> None:
    """headers is a Sequence (a tuple too) and append's arguments have names (review: a
    tuple was unpacked into _encode_headers' arguments, and keywords were refused)."""
    hdrs = (("h", b"1"), ("n", None))
    c, py = RecordBatchBuilder(), RecordBatchBuilder()
    assert c.append(1, b"k", b"v", hdrs) == py._append_python(1, b"k", b"v", hdrs) == 0
    assert c.append(2, None, b"w", (("a", b"b"),)) == 1
    assert py._append_python(2, None, b"w", (("a", b"b"),)) == 1
    assert c.append(3, None, b"x", headers=[("k", b"y")]) == 2
    assert py._append_python(3, None, b"x", headers=[("k", b"y")]) == 2
    assert c.append(timestamp_ms=4, key=None, value=b"z") == 3
    assert py._append_python(timestamp_ms=4, key=None, value=b"z") == 3
    assert bytes(c.build()) == bytes(py.build())
    with pytest.raises(TypeError):
        c.append(5, None, b"v", [], headers=[])  # type: ignore[misc]
    with pytest.raises(TypeError):
        c.append(5, None, value=b"v", colour=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        c.append(5, None)  # type: ignore[call-arg]
    assert c.record_count == 4


@pytest.mark.parametrize("pure", [False, True])
def test_headers_that_change_the_builder_cannot_break_it(pure: bool) -> None:
    """Encoding headers runs their code: a builder it changed is read afresh (review: a
    deleted or replaced buffer crashed the interpreter, and an append from inside gave
    two records the same offset delta)."""
    b = RecordBatchBuilder()
    append = b._append_python if pure else b.append
    assert append(0, None, b"a") == 0

    class Sneaky(list[Any]):
        def __init__(self, items: list[Any], act: Any) -> None:
            super().__init__(items)
            self.act = act

        def __iter__(self) -> Any:
            self.act()
            return super().__iter__()

    assert append(1, None, b"c", Sneaky([("h", b"1")], lambda: append(2, None, b"b"))) == 2
    assert [(r.offset, r.value) for r in RecordBatch.parse(bytes(b.build())).records()] == [
        (0, b"a"),
        (1, b"b"),
        (2, b"c"),
    ]
    if pure:
        return

    def drop() -> None:
        del b._buf

    with pytest.raises(TypeError, match="bytearray"):
        append(3, None, b"d", Sneaky([("h", b"1")], drop))
    b._buf = bytearray(HEADER_SIZE)

    def swap() -> None:
        b._buf = b"x" * 100  # type: ignore[assignment]

    with pytest.raises(TypeError, match="bytearray"):
        append(3, None, b"d", Sneaky([("h", b"1")], swap))


@pytest.mark.skipif(sys.version_info < (3, 12), reason="__buffer__ is Python 3.12+")
def test_a_key_whose_buffer_is_python_code_cannot_break_the_builder() -> None:
    b = RecordBatchBuilder()

    class Evil:
        def __buffer__(self, flags: int) -> memoryview:
            del b._buf
            return memoryview(b"x")

    assert b.append(0, None, b"a") == 0
    with pytest.raises(TypeError, match="bytearray"):
        b.append(1, Evil(), b"v")  # type: ignore[arg-type]


@pytest.mark.parametrize("ts", [2**63, -(2**63) - 1])
def test_a_later_timestamp_outside_int64_starts_a_new_batch_alike(ts: int) -> None:
    """The delta from the base may fit a varlong when the timestamp itself is no int64
    (review: Python wrote it, and build() then failed the whole batch on maxTimestamp)."""
    base = 2**62 if ts > 0 else -(2**62)
    for pure in (False, True):
        b = RecordBatchBuilder()
        append = b._append_python if pure else b.append
        with pytest.raises(TypeError):
            append(base, None, "text")  # type: ignore[arg-type]
        assert b.max_timestamp == -1  # a refused first record leaves no trace
        assert append(base, None, b"a") == 0
        assert append(ts, None, b"b") is None
        assert b.record_count == 1 and b.max_timestamp == base
        assert RecordBatch.parse(bytes(b.build())).records()[0].timestamp == base


def test_run_record_callbacks_holds_the_items_it_converts() -> None:
    """An item's __index__ may empty the list (review: a read past its end, a segfault)."""
    from aiokproto.producer.delivery import DeliveryFuture

    calls: list[Any] = []

    class Clearing:
        def __index__(self) -> int:
            calls.clear()
            return 5

    got: list[Any] = []
    calls += [got.append, 1, Clearing(), 2, 3, got.append, 4, 5, 6, 7]
    assert native.run_record_callbacks(DeliveryFuture, None, calls, got.append) is None
    assert [(h._delta, h._timestamp, h._ksize, h._vsize) for h in got] == [(1, 5, 2, 3)]


def test_a_cycle_through_a_builder_is_collected() -> None:
    """The builder's C fields are seen by the cyclic collector (as Python's slots are)."""

    class Marker:
        builder: Any

    def make_cycle() -> weakref.ref[Marker]:
        b = RecordBatchBuilder()
        marker = Marker()
        b._payload = marker  # type: ignore[assignment]
        marker.builder = b
        return weakref.ref(marker)

    gone = make_cycle()
    gc.collect()
    assert gone() is None


def test_a_builder_copies_and_pickles_with_its_records() -> None:
    """copy/pickle see the C fields (review: "cannot pickle 'RecordBatchBuilder'")."""
    b = RecordBatchBuilder(batch_size=1 << 20, producer_id=7)
    b.append(1_000, b"k", b"v", [("h", b"1")])
    b.append(1_005, None, b"w")
    for twin in (copy.deepcopy(b), pickle.loads(pickle.dumps(b))):
        assert type(twin) is RecordBatchBuilder
        assert bytes(twin.build()) == bytes(b.build())
        assert twin.append(1_010, None, b"x") == 2 and b.record_count == 2
    shallow = copy.copy(b)
    assert shallow._buf is b._buf and shallow.max_timestamp == 1_005


def test_now_ms_is_the_python_clock() -> None:
    """The compiled clock and its Python reference read the same wall clock, in ms."""
    for _ in range(5):
        before = accel._now_ms()
        compiled = native.now_ms()
        after = accel._now_ms()
        assert type(compiled) is int
        assert before - 1 <= compiled <= after + 1  # both truncate; a float may round


#: every public name of the compiled module, and the test that compares it with its
#: Python reference: a new native entry point fails the test below until it has one
NATIVE_TESTED = {
    "RecordsBuilder": "test_append_writes_the_bytes_python_writes",
    "append_records": "test_append_many_equals_appending_one_by_one",
    "decode_records": "test_decode_gives_the_records_python_gives",
    "murmur2": "test_murmur2_is_the_python_hash",
    "now_ms": "test_now_ms_is_the_python_clock",
    "DeliveryHandle": "tests/unit/producer/test_delivery.py",
    "append_to": "tests/producer/test_send_fast.py",
    "run_record_callbacks": "tests/unit/producer/test_delivery.py",
    "bind_send": "tests/producer/test_send_fast.py",
    "send_fast": "tests/producer/test_send_fast.py",
}


def test_every_native_entry_point_has_an_equality_test() -> None:
    public = {name for name in dir(native) if not name.startswith("_")}
    assert public == set(NATIVE_TESTED), public ^ set(NATIVE_TESTED)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for name, where in NATIVE_TESTED.items():
        if where.startswith("tests/"):
            assert os.path.exists(os.path.join(root, where)), (name, where)
        else:
            assert callable(globals().get(where)), (name, where)
