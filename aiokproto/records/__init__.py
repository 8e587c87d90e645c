"""Record codecs: RecordBatch v2, legacy MessageSet v0/v1, compression.

Producer side -- one ``RecordBatchBuilder`` per partition::

    from aiokproto.records import RecordBatchBuilder, compression

    builder = RecordBatchBuilder(batch_size=16384, compression=compression.ZSTD)
    if builder.append(timestamp_ms, b"key", b"value", [("h", b"v")]) is None:
        ...  # full: drain this builder, start a new one (the first record always fits)
    # at drain time (idempotent producer); cheap to redo after an epoch bump:
    builder.set_producer_state(producer_id, producer_epoch, base_sequence)
    payload = builder.build()  # bytes for ProduceRequest ... partition records

Consumer side -- a fetch response partition's ``records`` field::

    from aiokproto.records import read_batches

    reader = read_batches(records_field)  # bytes or memoryview; nothing decoded yet
    for batch in reader:                  # RecordBatch (v2) or LegacyBatch (v0/v1)
        if batch.is_control:
            for marker in batch.control_records():  # ControlRecord(type=COMMIT/ABORT)
                ...
            continue
        for record in batch:               # decoded (and decompressed) here
            record.offset, record.timestamp, record.key, record.value, record.headers
    # reader.consumed: bytes of whole batches; reader.partial_bytes: a batch cut off by
    # the fetch size limit (fetch again from the next offset, or with more bytes when
    # consumed == 0 and the first batch is larger than the fetch limit).
    next_fetch_offset = batch.next_offset

Errors: malformed bytes raise ``CorruptRecordError`` (naming the batch offset); a codec
id this client does not know raises ``UnsupportedCompressionTypeError``. Records are
``Record`` named tuples ``(offset, timestamp, timestamp_type, key, value, headers)``
with ``bytes`` keys/values and headers as a tuple of ``(str, bytes | None)`` pairs
(``()`` when none). The builders take headers as any sequence of such pairs.
"""

from aiokproto.records import compression
from aiokproto.records.batch_v2 import RecordBatch, RecordBatchBuilder
from aiokproto.records.control import (
    ControlRecord,
    ControlType,
    decode_control_record,
    encode_end_txn_marker,
)
from aiokproto.records.legacy import LegacyBatch, LegacyMessageSetBuilder
from aiokproto.records.reader import Batch, BatchReader, read_batches
from aiokproto.records.record import CREATE_TIME, LOG_APPEND_TIME, NO_TIMESTAMP_TYPE, Record

__all__ = [
    "CREATE_TIME",
    "LOG_APPEND_TIME",
    "NO_TIMESTAMP_TYPE",
    "Batch",
    "BatchReader",
    "ControlRecord",
    "ControlType",
    "LegacyBatch",
    "LegacyMessageSetBuilder",
    "Record",
    "RecordBatch",
    "RecordBatchBuilder",
    "compression",
    "decode_control_record",
    "encode_end_txn_marker",
    "read_batches",
]
