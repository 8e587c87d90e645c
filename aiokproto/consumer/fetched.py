"""One partition's data from one Fetch response (``FetchedData``), decoded batch by
batch as it is handed out.

Arrival costs nothing but keeping the response buffer: batches are split, CRC-checked,
decompressed and decoded only when the application asks for records, one batch at a
time. ``next_offset`` is the position after what was handed out so far; the consumer
copies it to the partition's position, so it also advances past control batches,
aborted transactions and offsets compacted away at the end of a batch.
"""

from __future__ import annotations

from aiokproto.consumer.budget import FetchBudget
from aiokproto.consumer.consumer_config import Deserializer
from aiokproto.consumer.decode import decode_legacy, decode_v2
from aiokproto.consumer.errors import RecordDeserializationError, UndecodableBatchError
from aiokproto.consumer.record import ConsumerRecord
from aiokproto.consumer.subscription import PartitionState
from aiokproto.consumer.transactions import AbortedFilter, is_abort_marker
from aiokproto.errors import CorruptRecordError, KafkaError, UnsupportedCompressionTypeError
from aiokproto.records.batch_v2 import RecordBatch
from aiokproto.records.reader import BatchReader
from aiokproto.structs import TopicPartition

_MAX_OFFSET = (1 << 63) - 1


def first_batch_size(view: memoryview) -> int | None:
    """Size of the first batch in ``view`` if it is cut off, else None (it is whole)."""
    if len(view) < 12:
        return 0
    size = int.from_bytes(view[8:12], "big", signed=True) + 12
    return size if size > len(view) else None


def scan_end(view: memoryview) -> tuple[int, int]:
    """(offset after the last whole batch, that batch's leader epoch) from the batch
    headers alone; (-1, -1) if there is no whole batch or a header is malformed (the
    reader reports that when the data is handed out)."""
    pos = 0
    end = len(view)
    next_offset = -1
    epoch = -1
    while end - pos >= 17:
        size = int.from_bytes(view[pos + 8 : pos + 12], "big", signed=True) + 12
        if size > end - pos:
            break
        base = int.from_bytes(view[pos : pos + 8], "big", signed=True)
        if view[pos + 16] == 2:
            if size < 61:
                return -1, -1
            last_delta = int.from_bytes(view[pos + 23 : pos + 27], "big", signed=True)
            next_offset = base + last_delta + 1
            epoch = int.from_bytes(view[pos + 12 : pos + 16], "big", signed=True)
        else:
            if size < 26:
                return -1, -1
            last_delta = 0
            next_offset = base + 1  # a legacy entry's offset is its (last) record's
            epoch = -1
        if base < 0 or last_delta < 0 or next_offset > _MAX_OFFSET:
            return -1, -1  # impossible offsets: reported when the data is handed out
        pos += size
    return next_offset, epoch


def batch_span(view: memoryview) -> tuple[int, int | None]:
    """(first offset, last offset or None) as the header of the batch at the start of
    ``view`` says, for naming a batch that could not be decoded; the last offset is
    None when the header is cut short or its magic or length is impossible."""
    base = int.from_bytes(view[0:8], "big", signed=True) if len(view) >= 8 else -1
    if len(view) < 27 or view[16] != 2:
        if len(view) >= 26 and view[16] in (0, 1) and base >= 0:
            size = int.from_bytes(view[8:12], "big", signed=True) + 12
            if 26 <= size <= len(view):
                return base, base  # a legacy entry: its offset is its last record's
        return base, None
    size = int.from_bytes(view[8:12], "big", signed=True) + 12
    last_delta = int.from_bytes(view[23:27], "big", signed=True)
    if size < 61 or size > len(view) or base < 0 or last_delta < 0:
        return base, None
    return base, min(base + last_delta, _MAX_OFFSET)


def undecodable(
    tp: TopicPartition,
    view: memoryview,
    position: int | None,
    cause: BaseException,
    *,
    at_least: int = 0,
) -> UndecodableBatchError:
    """The error naming the batch at the start of ``view`` that failed with ``cause``
    (``position``: the consumer's, None for the share consumer, which has none)."""
    first, last = batch_span(view)
    if first < 0:  # not even the base offset is readable
        first, last = (at_least if position is None else position), None
    return UndecodableBatchError(tp, first, last, position, cause)


#: what decoding a batch raises when its bytes are bad (anything else is a defect here)
DECODE_ERRORS = (CorruptRecordError, UnsupportedCompressionTypeError)


class SharedFrame:
    """One Fetch response whose partitions' data are buffered as zero-copy slices.

    A slice keeps the whole response alive, so once the data still buffered from it
    falls below a quarter of its size, the rest is copied out and the response is
    let go: buffered data never pins more than four times its own size. Constant
    time per member leaving (a running total of unread bytes), one pass to let go.
    With a ``budget``, the whole response is charged to it while it is kept alive
    (that is the memory held), and each member's copy once copied out; copying out
    waits while the copies would not fit beside the response.
    """

    __slots__ = ("budget", "charged", "members", "size", "unread")

    def __init__(self, size: int, budget: FetchBudget | None = None) -> None:
        self.size = size
        self.members: dict[FetchedData, None] = {}
        self.unread = 0  # undecoded bytes of the members, kept up to date by them
        self.budget = budget
        self.charged = 0
        if budget is not None:
            budget.charge(size)
            self.charged = size

    def join(self, fd: FetchedData) -> None:
        fd.frame = self
        self.members[fd] = None
        self.unread += fd.unread_bytes

    def leave(self, fd: FetchedData) -> None:
        """``fd`` is no longer buffered (consumed or dropped)."""
        if fd.frame is not self:
            return
        fd.frame = None
        del self.members[fd]
        self.unread -= fd.unread_bytes
        if self.members:
            self.settle()
        else:
            self._let_go()

    def settle(self) -> None:
        """Copy the remaining members out if they are a small part of the response,
        unless the copies would not fit in the budget beside it (the response is charged
        whole meanwhile, so the bound holds, and both would be held for an instant)."""
        if self.members and 4 * self.unread < self.size:
            if self.budget is not None and self.budget.free < self.unread:
                return  # tried again as the next member leaves
            for member in self.members:
                member.frame = None
                member.compact()
                member.charge(self.budget)
            self.members.clear()
            self.unread = 0
            self._let_go()

    def _let_go(self) -> None:
        """No member holds the response any more: its bytes leave the budget."""
        if self.budget is not None and self.charged:
            self.budget.release(self.charged)
        self.charged = 0


class FetchedData:
    """Records of one partition from one fetch, not yet handed out."""

    __slots__ = (
        "_batch_next",
        "_check_crc",
        "_deserialize",
        "_filter",
        "_index",
        "_key_deserializer",
        "_max_decompressed",
        "_pos",
        "_reader",
        "_records",
        "_value_deserializer",
        "_view",
        "budget",
        "charged",
        "end_epoch",
        "end_offset",
        "epoch",
        "error",
        "fetch_offset",
        "frame",
        "next_offset",
        "state",
        "tp",
    )

    def __init__(
        self,
        tp: TopicPartition,
        state: PartitionState,
        fetch_offset: int,
        view: memoryview,
        *,
        check_crc: bool = True,
        aborted: AbortedFilter | None = None,
        key_deserializer: Deserializer | None = None,
        value_deserializer: Deserializer | None = None,
        max_decompressed: int = 256 * 1024 * 1024,
    ) -> None:
        self.tp = tp
        self.state = state
        self.fetch_offset = fetch_offset
        self.next_offset = fetch_offset
        # where the next fetch may start while this is still being handed out
        self.end_offset, self.end_epoch = scan_end(view)
        self.epoch = -1
        self.error: KafkaError | None = None
        self._view = view
        self._pos = 0
        self._reader: BatchReader | None = BatchReader(
            view, check_crc=check_crc, max_decompressed_size=max_decompressed
        )
        self._max_decompressed = max_decompressed
        self._filter = aborted
        self._key_deserializer = key_deserializer
        self._value_deserializer = value_deserializer
        self._deserialize = key_deserializer is not None or value_deserializer is not None
        self._records: list[ConsumerRecord] = []
        self._index = 0
        self._batch_next = fetch_offset
        self._check_crc = check_crc
        #: the response this is a slice of, while that is shared with other partitions
        self.frame: SharedFrame | None = None
        #: bytes of its own charged to ``budget`` (0 while a frame's: the frame is)
        self.budget: FetchBudget | None = None
        self.charged = 0

    def charge(self, budget: FetchBudget | None) -> None:
        """Count the buffer this holds on its own (not a shared frame's) in ``budget``."""
        if budget is None:
            return
        self.release()
        self.budget = budget
        self.charged = len(self._view)
        budget.charge(self.charged)

    def release(self) -> None:
        """Take this out of its budget (handed out or dropped)."""
        if self.budget is not None and self.charged:
            self.budget.release(self.charged)
        self.charged = 0

    def discard(self) -> None:
        """No longer buffered (consumed or dropped): let go of its share of the
        response or its own buffer, and of the bytes charged for them."""
        if self.frame is not None:
            self.frame.leave(self)
        self.release()

    @property
    def unread_bytes(self) -> int:
        """Bytes of the buffer not decoded yet (a cut-off last batch included)."""
        return len(self._view) - self._pos

    def compact(self) -> None:
        """Hold only the batches not decoded yet, in a buffer of their own."""
        if self._reader is None:
            self._view, self._pos = memoryview(b""), 0
            return
        rest = memoryview(self._view[self._pos :].tobytes())
        self._view, self._pos = rest, 0
        self._reader = BatchReader(
            rest, check_crc=self._check_crc, max_decompressed_size=self._max_decompressed
        )

    @property
    def exhausted(self) -> bool:
        """Nothing left to hand out (an error, if any, is in ``error``)."""
        if self._index < len(self._records):
            return False
        reader = self._reader
        if reader is None or reader.partial_bytes == 0:
            return True
        try:
            return reader.truncated
        except CorruptRecordError:
            return False  # an unreadable header: the next take() reports it

    def take(self, n: int) -> list[ConsumerRecord]:
        """Up to ``n`` records of one batch; [] when exhausted. Advances ``next_offset``."""
        while True:
            recs = self._records
            i = self._index
            size = len(recs)
            if i < size:
                end = i + n
                chunk = recs if i == 0 and end >= size else recs[i:end]
                i += len(chunk)
                self._index = i
                if i >= size:
                    self.next_offset = self._batch_next
                else:
                    # never past a record still to hand out, even if a corrupt batch
                    # (valid CRC) has its offsets out of order
                    self.next_offset = min(chunk[-1][2] + 1, recs[i][2])
                return chunk
            if self._reader is None or not self._next_batch():
                return []

    def _next_batch(self) -> bool:
        """Decode the next batch that has records for the application."""
        reader = self._reader
        assert reader is not None
        tp = self.tp
        while True:
            start = self._pos
            try:
                batch = next(reader, None)
                if batch is None:
                    self._reader = None
                    return False
                self._pos = reader.consumed
                if self.frame is not None:
                    self.frame.unread -= self._pos - start
                batch_next = batch.next_offset
                if batch_next <= self.next_offset:
                    continue  # wholly before the position (the broker sends whole batches)
                if isinstance(batch, RecordBatch):
                    flt = self._filter
                    if flt is not None:
                        marker = batch.is_control and is_abort_marker(
                            c.type for c in batch.control_records()
                        )
                        if flt.skip(batch, marker):
                            self.next_offset = batch_next
                            continue
                    elif batch.is_control:
                        self.next_offset = batch_next
                        continue
                    self.epoch = batch.partition_leader_epoch
                    recs = decode_v2(
                        batch,
                        self._view[start : self._pos],
                        tp.topic,
                        tp.partition,
                        max_decompressed=self._max_decompressed,
                    )
                    low = batch.base_offset
                else:
                    self.epoch = -1
                    recs = decode_legacy(batch, tp.topic, tp.partition)
                    low = 0  # a compressed wrapper does not say where it starts
                if recs and not low <= recs[0][2] <= recs[-1][2] < batch_next:
                    # a record's offset delta points outside its batch: handed out,
                    # it would move the position over records not handed out (O(1):
                    # the first and last record; take() covers the ones between)
                    raise CorruptRecordError(
                        f"record batch at offset {batch.base_offset}: record offsets "
                        f"{recs[0][2]}..{recs[-1][2]} fall outside the batch's "
                        f"{low}..{batch_next - 1}"
                    )
            except DECODE_ERRORS as exc:
                # Stop in front of the batch: nothing after it is handed out and
                # next_offset stays where it is, so the position never passes records
                # that were not handed out; the fetcher raises this until a seek.
                self.error = undecodable(tp, self._view[start:], self.next_offset, exc)
                self._reader = None
                return False
            first = self.next_offset
            if recs and recs[0][2] < first:
                recs = [r for r in recs if r[2] >= first]
            self._batch_next = batch_next
            if recs and self._deserialize:
                recs = self._deserialized(recs)
            if not recs:
                if self.error is not None:
                    return False
                self.next_offset = batch_next
                continue
            self._records = recs
            self._index = 0
            return True

    def _deserialized(self, recs: list[ConsumerRecord]) -> list[ConsumerRecord]:
        kd = self._key_deserializer
        vd = self._value_deserializer
        new = tuple.__new__
        cls = ConsumerRecord
        out: list[ConsumerRecord] = []
        append = out.append
        for r in recs:
            try:
                key = r[5] if kd is None else kd(r[5])
                value = r[6] if vd is None else vd(r[6])
            except Exception as exc:
                # hand out what precedes it; the position then stops at this record
                self.error = RecordDeserializationError(self.tp, r[2], exc)
                self._batch_next = r[2]
                self._reader = None
                return out
            append(new(cls, (r[0], r[1], r[2], r[3], r[4], key, value, r[7], r[8])))
        return out
