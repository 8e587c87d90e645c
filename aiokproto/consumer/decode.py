"""The consumer's record decoder: one fetched v2 batch straight into ``ConsumerRecord``
tuples in one pass through ``records/decode.py``; legacy (v0/v1) batches converted.

``RecordBatch.records()`` gives ``Record`` tuples; the consumer would then build a second
tuple per record to add topic, partition and leader epoch. This module has the shared v2
decoder (``aiokproto.records.decode``) build the final tuple directly (one allocation per
record). Legacy (v0/v1) batches are rare and go through ``aiokproto.records`` and a
conversion.

Equality with ``aiokproto.records.read_batches`` output is tested with Hypothesis.
"""

from __future__ import annotations

from aiokproto.consumer.record import ConsumerRecord
from aiokproto.records import compression as _compression
from aiokproto.records.batch_v2 import HEADER_SIZE, RecordBatch
from aiokproto.records.decode import decode_batch
from aiokproto.records.legacy import LegacyBatch


def decode_v2(
    batch: RecordBatch,
    raw: memoryview,
    topic: str,
    partition: int,
    *,
    max_decompressed: int = _compression.DEFAULT_MAX_DECOMPRESSED,
) -> list[ConsumerRecord]:
    """Every record of a v2 data batch (whose bytes are ``raw``) as ``ConsumerRecord``
    (CorruptRecordError if bad, UnsupportedCompressionTypeError for an unknown codec)."""
    return decode_batch(
        raw[HEADER_SIZE:],
        batch.attributes,
        batch.record_count,
        batch.base_offset,
        batch.base_timestamp,
        batch.max_timestamp,
        max_decompressed,
        ConsumerRecord,
        (topic, partition),
        (batch.partition_leader_epoch,),
    )


def decode_legacy(batch: LegacyBatch, topic: str, partition: int) -> list[ConsumerRecord]:
    """Records of a MessageSet v0/v1 entry (or compressed wrapper)."""
    new = tuple.__new__
    cls = ConsumerRecord
    return [new(cls, (topic, partition, *r, -1)) for r in batch]
