"""Split a fetched partition's ``records`` bytes into batches (``read_batches``): whole
batches only, stopping at a last batch the broker cut off.

A fetch response may hold many batches of any magic, and the broker may cut the last
one at the fetch size limit. ``BatchReader`` yields each whole batch (header parsed,
CRC checked, records still encoded) and stops cleanly at a partial trailing batch;
``consumed`` then says how many bytes were whole batches and ``partial_bytes`` how
many were left over.
"""

from __future__ import annotations

from collections.abc import Iterator

from aiokproto.errors import CorruptRecordError
from aiokproto.records import batch_v2, legacy
from aiokproto.records.batch_v2 import RecordBatch
from aiokproto.records.compression import DEFAULT_MAX_DECOMPRESSED
from aiokproto.records.legacy import LegacyBatch

Batch = RecordBatch | LegacyBatch

_MAGIC_POS = 16  # same place in v0, v1 and v2: after offset, size and crc/leader epoch
_MIN_LENGTH = {0: legacy.MIN_SIZE[0], 1: legacy.MIN_SIZE[1],
               2: batch_v2.HEADER_SIZE - batch_v2.LOG_OVERHEAD}


class BatchReader:
    """Iterator over the batches of one partition's fetched ``records`` field."""

    __slots__ = ("_check_crc", "_end", "_max_decompressed", "_view", "consumed")

    def __init__(self, data: bytes | bytearray | memoryview, *, check_crc: bool = True,
                 max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED) -> None:
        view = memoryview(data)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        self._view = view
        self._end = len(self._view)
        self._check_crc = check_crc
        self._max_decompressed = max_decompressed_size
        #: bytes of whole batches yielded so far
        self.consumed = 0

    def __iter__(self) -> Iterator[Batch]:
        return self

    @property
    def partial_bytes(self) -> int:
        """Bytes not yet yielded; after iteration ends, the size of a cut-off batch."""
        return self._end - self.consumed

    @property
    def truncated(self) -> bool:
        """True once iteration stopped at an incomplete trailing batch."""
        return self.consumed < self._end and self._next_size() is None

    def _next_size(self) -> int | None:
        view, pos, end = self._view, self.consumed, self._end
        if end - pos < _MAGIC_POS + 1:
            return None
        length = int.from_bytes(view[pos + 8:pos + 12], "big", signed=True)
        magic = view[pos + _MAGIC_POS]
        offset = int.from_bytes(view[pos:pos + 8], "big", signed=True)
        if magic not in _MIN_LENGTH:
            raise CorruptRecordError(f"record batch at offset {offset} has unknown magic "
                                     f"{magic}")
        if length < _MIN_LENGTH[magic]:
            raise CorruptRecordError(f"record batch at offset {offset} has impossible "
                                     f"length {length}")
        size = length + batch_v2.LOG_OVERHEAD
        if size > end - pos:
            return None
        return size

    def __next__(self) -> Batch:
        size = self._next_size()
        if size is None:
            raise StopIteration
        pos = self.consumed
        view = self._view[pos:pos + size]
        batch: Batch
        if view[_MAGIC_POS] == 2:
            batch = RecordBatch(view, check_crc=self._check_crc,
                                max_decompressed_size=self._max_decompressed)
        else:
            batch = LegacyBatch(view, check_crc=self._check_crc,
                                max_decompressed_size=self._max_decompressed)
        self.consumed = pos + size
        return batch


def read_batches(data: bytes | bytearray | memoryview, *, check_crc: bool = True,
                 max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED) -> BatchReader:
    """Batches of a fetched ``records`` field; see ``BatchReader``."""
    return BatchReader(data, check_crc=check_crc, max_decompressed_size=max_decompressed_size)
