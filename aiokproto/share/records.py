"""Share fetch answers into ``ShareRecord``s: only the acquired offsets, the rest of
the acquired ranges as gaps, and the acquired offsets of batches that cannot be decoded
(pure, no I/O)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Generic, NamedTuple

from aiokproto._generic import K, V
from aiokproto.consumer.decode import decode_legacy, decode_v2
from aiokproto.consumer.errors import UndecodableBatchError
from aiokproto.consumer.fetched import DECODE_ERRORS, undecodable
from aiokproto.consumer.record import ConsumerRecord
from aiokproto.records.batch_v2 import RecordBatch
from aiokproto.records.reader import BatchReader
from aiokproto.records.record import Headers
from aiokproto.structs import TopicPartition


class ShareRecord(NamedTuple, Generic[K, V]):
    """A record acquired by a share consumer; ``delivery_count`` is 1 on the first
    delivery and grows each time the record comes back (released, or its lock
    expired). The other fields are ``ConsumerRecord``'s (``ShareRecord[K, V]``: the
    types the deserializers return)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: K
    value: V
    headers: Headers
    leader_epoch: int = -1
    delivery_count: int = 1


class Undecodable(NamedTuple):
    """A batch the member could not decode, and the acquired offsets in it."""

    error: UndecodableBatchError
    offsets: list[int]


class Acquired(NamedTuple):
    first: int
    last: int
    delivery_count: int


def acquired_records(
    data: bytes | memoryview | None,
    ranges: Iterable[Acquired],
    topic: str,
    partition: int,
    *,
    check_crc: bool = True,
) -> tuple[list[ShareRecord], list[int], list[Undecodable]]:
    """(records in acquired ranges, acquired offsets with no record: the gaps, the
    batches that could not be decoded with their acquired offsets: to be rejected)."""
    counts: dict[int, int] = {}
    for first, last, delivery_count in ranges:
        for offset in range(first, last + 1):
            counts[offset] = delivery_count
    if not counts:
        return [], [], []
    out: list[ShareRecord] = []
    # undecodable stretches: (error, first offset it may hold, end or None if unknown).
    # A bad batch's own offsets are not trusted (its base offset is outside the CRC):
    # it holds what lies between the last good batch before it and the next good one.
    spans: list[tuple[UndecodableBatchError, int, int | None]] = []
    if data:
        view = memoryview(data)
        reader = BatchReader(view, check_crc=check_crc)
        low, high = min(counts), max(counts)
        next_ok = low  # the offset after the last batch read whole
        open_span: tuple[UndecodableBatchError, int] | None = None
        while True:
            start, before = reader.consumed, next_ok
            recs: list[ConsumerRecord]
            try:
                batch = next(reader, None)
                if batch is None:
                    break
                base, following = batch.base_offset, batch.next_offset
                if open_span is not None:
                    spans.append((*open_span, base))
                    open_span = None
                next_ok = max(next_ok, following)
                if isinstance(batch, RecordBatch):
                    if following <= low or base > high:
                        continue  # nothing acquired in it
                    if batch.is_control:
                        continue  # a transaction marker: its offset stays a gap
                    recs = decode_v2(batch, view[start : reader.consumed], topic, partition)
                else:
                    recs = decode_legacy(batch, topic, partition)
            except DECODE_ERRORS as exc:
                if open_span is None:
                    tp = TopicPartition(topic, partition)
                    error = undecodable(tp, view[start:], None, exc, at_least=low)
                    open_span = (error, before)
                if open_span[0].last_offset is None:
                    break  # where it ends is unknown: nothing after it can be found
                if reader.consumed == start:  # it failed in the reader: step over it
                    size = int.from_bytes(view[start + 8 : start + 12], "big") + 12
                    view = view[start + size :]
                    reader = BatchReader(view, check_crc=check_crc)
                continue
            for r in recs:
                count = counts.get(r.offset)
                if count is not None:
                    out.append(ShareRecord(*r, count))
        if open_span is not None:
            spans.append((*open_span, None))
    seen = {r.offset for r in out}
    bad: list[Undecodable] = []
    for error, first, stop in spans:
        offsets = sorted(
            o for o in counts if o >= first and (stop is None or o < stop) and o not in seen
        )
        if offsets:
            seen.update(offsets)
            end = None if error.last_offset is None else offsets[-1]
            named = UndecodableBatchError(error.tp, offsets[0], end, None, error.cause)
            bad.append(Undecodable(named, offsets))
    gaps = sorted(o for o in counts if o not in seen)
    return out, gaps, bad
