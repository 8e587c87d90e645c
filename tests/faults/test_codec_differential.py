"""Differential fuzzing of the compiled codec against its Python reference (issue 34).

Every native entry point the client calls with bytes from the network or from the user
runs here next to the Python code it replaces, on the same seeded random input, and
both must give the same result or the same typed error:

- the decoder (``decode_records`` under ``RecordBatch.records()``, which the consumer
  uses) on valid batches mutated in their records section (bit flips, interesting
  bytes, extreme varints spliced in, slices inserted, cut or repeated, a wrong record
  count), re-compressed when the batch was compressed, and with the CRC recomputed so
  that the mutated bytes reach the record loop instead of failing the CRC check;
- the encoder (``append``/``append_many`` against ``_append_python`` and the
  record-by-record ``append_many``) on odd keys, values, headers and timestamps: wider
  item buffers, non-contiguous views, wrong types, int64 edges, a full batch;
- ``murmur2`` against ``murmur2_python`` on random bytes and odd buffers;
- the Spark source's Arrow builder (``spark/_arrow.c`` behind ``to_record_batch``)
  against ``to_record_batch_python`` on consumed records with odd field values (when
  the spark extra is installed).

``make test`` runs a slice; ``make faults`` runs at least 100,000 cases;
``make sanitize`` runs the slice on the ASan/UBSan build, where a memory error ends the
run. The seed is ``$AIOKPROTO_FUZZ_SEED`` (default 1); a failing case names its seed and
index, and ``AIOKPROTO_FUZZ_CASE=<kind>:<index>`` replays only it.
"""

from __future__ import annotations

import array
import os
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from crc32c import crc32c

from aiokproto.accel import native
from aiokproto.producer.partitioner import murmur2_python
from aiokproto.protocol.varint import encode_varint, encode_varlong
from aiokproto.records import batch_v2, compression, decode
from aiokproto.records.batch_v2 import HEADER, HEADER_SIZE, RecordBatch, RecordBatchBuilder
from tests.faults.conftest import FaultScale

SEED = int(os.environ.get("AIOKPROTO_FUZZ_SEED", "1"))
ONLY = os.environ.get("AIOKPROTO_FUZZ_CASE", "")

#: cases per kind: (slice in make test and make sanitize, full run in make faults)
SIZES = {"decode": (3_000, 60_000), "encode": (1_500, 30_000), "murmur2": (1_500, 20_000),
         "arrow": (500, 10_000)}

pytestmark = pytest.mark.skipif(native is None, reason="the compiled codec is not built "
                                "(AIOKPROTO_PURE_PYTHON=1 or no compiler): nothing to compare")

Outcome = tuple[str, Any]


def _outcome(call: Callable[..., Any], *args: Any) -> Outcome:
    try:
        return ("ok", call(*args))
    except Exception as exc:  # the class is compared; messages may differ
        return ("error", type(exc).__name__)


@contextmanager
def _python_codec() -> Iterator[None]:
    """Decode and append_many as the pure-Python build runs them."""
    saved = decode._native, batch_v2._native
    decode._native = batch_v2._native = None
    try:
        yield
    finally:
        decode._native, batch_v2._native = saved


def _indexes(kind: str, scale: FaultScale) -> range | list[int]:
    if ONLY:
        want, _, index = ONLY.partition(":")
        return [int(index)] if want == kind else []
    small, full = SIZES[kind]
    return range(scale.pick(small, full))


def _rng(kind: str, i: int) -> random.Random:
    return random.Random(f"{SEED}:{kind}:{i}")


@dataclass
class _Failures:
    kind: str
    found: list[str]

    def add(self, i: int, what: str) -> None:
        self.found.append(f"AIOKPROTO_FUZZ_SEED={SEED} AIOKPROTO_FUZZ_CASE={self.kind}:{i}"
                          f": {what}")

    def check(self, cases: int, detail: str = "") -> None:
        print(f"codec differential fuzz, {self.kind}: {cases} cases{detail}, seed {SEED}, "
              f"{len(self.found)} divergent")
        assert not self.found, "\n".join(self.found[:10])


# -- decoder ----------------------------------------------------------------------------

_INTERESTING = (0x00, 0x01, 0x7F, 0x80, 0xFF, 0xFE, 0x3F, 0x40)
_EXTREMES = (-1, -2, 0, 1, 2**31 - 1, 2**31, -(2**31), 2**63 - 1, -(2**63), 2**32)


def _random_bytes(rng: random.Random, most: int) -> bytes:
    return rng.randbytes(rng.randrange(most + 1))


def _random_batch(rng: random.Random) -> tuple[bytearray, int]:
    """A valid batch (records section uncompressed) and the codec to send it with."""
    b = RecordBatchBuilder(batch_size=1 << 20)
    ts = rng.choice((0, 1_700_000_000_000, 2**62))
    for _ in range(rng.randrange(1, 12)):
        key = None if rng.random() < 0.3 else _random_bytes(rng, 40)
        value = None if rng.random() < 0.1 else _random_bytes(rng, 200)
        headers = [(rng.choice(("h", "trace", "é", "")), None if rng.random() < 0.2
                    else _random_bytes(rng, 12)) for _ in range(rng.randrange(4))]
        b.append(ts + rng.randrange(-5, 5000), key, value, headers)
    codec = compression.NONE if rng.random() < 0.7 else \
        rng.choice((compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD))
    return bytearray(b.build()), codec


def _mutate(rng: random.Random, body: bytearray) -> None:
    for _ in range(rng.randrange(1, 5)):
        op = rng.randrange(7)
        pos = rng.randrange(len(body) + 1)
        if op == 0 and body:  # flip a bit
            pos = min(pos, len(body) - 1)
            body[pos] ^= 1 << rng.randrange(8)
        elif op == 1 and body:
            body[min(pos, len(body) - 1)] = rng.choice(_INTERESTING)
        elif op == 2:  # an extreme varint over what was there
            enc = rng.choice((encode_varint, encode_varlong))
            value = rng.choice(_EXTREMES)
            if enc is encode_varint and not -(2**31) <= value < 2**31:
                value = -1
            data = enc(value)
            body[pos:pos + rng.randrange(len(data) + 1)] = data
        elif op == 3:
            body[pos:pos] = _random_bytes(rng, 8)
        elif op == 4:
            del body[pos:pos + rng.randrange(1, 16)]
        elif op == 5 and body:
            start = rng.randrange(len(body))
            body[pos:pos] = body[start:start + rng.randrange(1, 32)]
        elif op == 6:
            del body[pos:]


def _mutated_batch(rng: random.Random) -> bytes:
    batch, codec = _random_batch(rng)
    fields = list(HEADER.unpack_from(batch))
    body = batch[HEADER_SIZE:]
    _mutate(rng, body)
    if rng.random() < 0.15:  # recordCount, the last field
        fields[-1] = rng.choice((0, 1, fields[-1] - 1, fields[-1] + 1, len(body),
                                 2**31 - 1, -1))
    if codec:
        payload: bytes | bytearray = compression.compress(codec, bytes(body))
        fields[5] = (fields[5] & ~batch_v2.CODEC_MASK) | codec
    else:
        payload = body
    out = bytearray(HEADER_SIZE) + payload
    fields[1] = len(out) - batch_v2.LOG_OVERHEAD
    HEADER.pack_into(out, 0, *fields)
    out[17:21] = crc32c(bytes(out[21:])).to_bytes(4, "big")
    return bytes(out)


def _records_of(data: bytes) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in RecordBatch.parse(data).records()]


def test_the_decoders_agree_on_mutated_batches(fault_scale: FaultScale) -> None:
    failures = _Failures("decode", [])
    cases = _indexes("decode", fault_scale)
    decoded = 0
    for i in cases:
        data = _mutated_batch(_rng("decode", i))
        compiled = _outcome(_records_of, data)
        with _python_codec():
            reference = _outcome(_records_of, data)
        decoded += compiled[0] == "ok"
        if compiled != reference:
            failures.add(i, f"compiled {compiled!r:.300} != python {reference!r:.300}; "
                            f"batch {data.hex()}")
    failures.check(len(cases), f" ({decoded} decoded, {len(cases) - decoded} refused)")
    if not ONLY:  # the mutations must leave some batches decodable, or little is tested
        assert decoded > len(cases) // 20, decoded


# -- encoder ----------------------------------------------------------------------------


def _odd_buffer(rng: random.Random) -> Any:
    raw = rng.randbytes(rng.choice((0, 4, 8, 16, 64)))
    pick = rng.randrange(12)
    if pick < 4:
        return raw
    if pick < 6:
        return None
    if pick == 6:
        return bytearray(raw)
    if pick == 7:
        return memoryview(raw)
    if pick == 8:
        return memoryview(raw).cast("I") if len(raw) % 4 == 0 else array.array("H", [7, 8])
    if pick == 9:
        return array.array("d", [1.5, -0.0])
    if pick == 10:
        return memoryview(raw + b"xy")[::2]  # not contiguous: a TypeError
    return rng.choice(("text", 5, [1, 2], 1.5))


def _odd_headers(rng: random.Random) -> Any:
    if rng.random() < 0.5:
        return None
    headers: list[Any] = []
    for _ in range(rng.randrange(4)):
        key: Any = rng.choice(("k", "ключ", "", "h" * 40))
        if rng.random() < 0.05:
            key = rng.choice((b"k", 3, None))
        headers.append((key, _odd_buffer(rng)))
    return headers if rng.random() < 0.9 else tuple(headers)


def _odd_timestamp(rng: random.Random) -> Any:
    pick = rng.randrange(20)
    if pick == 0:
        return rng.choice((2**63, -(2**63) - 1, 2**64, 1.5, True, "5", None))
    if pick == 1:
        return rng.choice((2**63 - 1, -(2**63), -1, 0))
    return 1_700_000_000_000 + rng.randrange(-10_000, 10_000)


def _state(b: RecordBatchBuilder) -> tuple[Any, ...]:
    built = bytes(b.build()) if b.record_count else b""
    return b.record_count, b.estimated_size, built


def _append_case(rng: random.Random) -> tuple[list[Outcome], list[Outcome]]:
    size = rng.choice((80, 200, 1000, 1 << 16))
    codec = rng.choice((compression.NONE, compression.NONE, compression.LZ4))
    compiled = RecordBatchBuilder(batch_size=size, compression=codec)
    python = RecordBatchBuilder(batch_size=size, compression=codec)
    got: list[Outcome] = []
    want: list[Outcome] = []
    for _ in range(rng.randrange(1, 8)):
        if rng.random() < 0.7:
            args = (_odd_timestamp(rng), _odd_buffer(rng), _odd_buffer(rng),
                    _odd_headers(rng))
            got.append(_outcome(compiled.append, *args))
            want.append(_outcome(python._append_python, *args))
        else:
            n = rng.randrange(6)
            keys = None if rng.random() < 0.3 else [_odd_buffer(rng) for _ in range(n)]
            values = [_odd_buffer(rng) for _ in range(n)]
            start, stop = rng.randrange(-1, n + 1), rng.randrange(-1, n + 2)
            many = (_odd_timestamp(rng), keys, values, start, stop, _odd_headers(rng))
            got.append(_outcome(compiled.append_many, *many))
            with _python_codec():
                want.append(_outcome(python.append_many, *many))
        got.append(_outcome(_state, compiled))
        want.append(_outcome(_state, python))
    return got, want


def test_the_encoders_agree_on_odd_input(fault_scale: FaultScale) -> None:
    failures = _Failures("encode", [])
    cases = _indexes("encode", fault_scale)
    for i in cases:
        got, want = _append_case(_rng("encode", i))
        if got != want:
            step = next(n for n, (a, b) in enumerate(zip(got, want, strict=True)) if a != b)
            failures.add(i, f"step {step}: compiled {got[step]!r:.300} != "
                            f"python {want[step]!r:.300}")
    failures.check(len(cases))


# -- murmur2 ----------------------------------------------------------------------------


def test_murmur2_agrees_with_its_reference(fault_scale: FaultScale) -> None:
    assert native is not None
    failures = _Failures("murmur2", [])
    cases = _indexes("murmur2", fault_scale)
    for i in cases:
        rng = _rng("murmur2", i)
        data = _odd_buffer(rng) if rng.random() < 0.3 else _random_bytes(rng, 300)
        got = _outcome(native.murmur2, data)
        want = _outcome(murmur2_python, data)
        if got != want:
            failures.add(i, f"compiled {got!r} != python {want!r} for {data!r:.200}")
    failures.check(len(cases))


# -- the Spark source's Arrow builder ---------------------------------------------------

_I64 = 2**63 - 1


def _odd_field(rng: random.Random, usual: Any, odd: tuple[Any, ...]) -> Any:
    return usual if rng.random() < 0.9 else rng.choice(odd)


def _odd_record(rng: random.Random) -> Any:
    from aiokproto.consumer.record import ConsumerRecord

    def blob() -> Any:
        return _odd_field(rng, None if rng.random() < 0.2 else _random_bytes(rng, 30),
                          (bytearray(b"v"), memoryview(b"v"), "text", 7, b""))

    headers: Any = tuple(
        (_odd_field(rng, rng.choice(("h", "é", "")), (b"h", "\ud800", 3)), blob())
        for _ in range(rng.randrange(3))
    )
    return ConsumerRecord(
        "t", 3,
        _odd_field(rng, rng.randrange(2**40), (-1, _I64, _I64 + 1, "10", None, True)),
        _odd_field(rng, 1_700_000_000_000 + rng.randrange(10**6),
                   (-1, _I64 // 1000 + 1, -(_I64 // 1000) - 1, _I64, 1.5, None)),
        _odd_field(rng, rng.randrange(2), (2**31, -1, True, None)),
        blob(), blob(),
        _odd_field(rng, headers, ((("h",),), [("h", b"v")], None, ((b"h", b"v"),))),
    )


def test_the_arrow_builders_agree_on_odd_records(fault_scale: FaultScale) -> None:
    arrow = pytest.importorskip("aiokproto.spark.arrow",
                                reason="the spark extra (pyarrow) is not installed")
    if arrow._arrow_columns is None:
        pytest.skip("aiokproto/spark/_arrow.c is not built")
    failures = _Failures("arrow", [])
    cases = _indexes("arrow", fault_scale)
    for i in cases:
        rng = _rng("arrow", i)
        recs = [_odd_record(rng) for _ in range(rng.randrange(1, 6))]
        headers = rng.random() < 0.5
        got = _outcome(arrow.to_record_batch, "t", 3, recs, headers)
        want = _outcome(arrow.to_record_batch_python, "t", 3, recs, headers)
        same = got == want if got[0] == "error" or want[0] == "error" else \
            got[1].equals(want[1])
        if not same:
            failures.add(i, f"compiled {got!r:.300} != python {want!r:.300} for {recs!r:.300}")
    failures.check(len(cases))
