"""The asyncio Kafka producer.

``Producer`` buffers records into per-partition v2 record batches (``accumulator``),
and one sender task drains them into per-broker Produce requests (``sender``), with
idempotence (``batch``: sequence and epoch bookkeeping) and Java-compatible
partitioning (``partitioner``).
"""

from aiokproto.producer.checks import SerializationError
from aiokproto.producer.delivery import (
    BatchDelivery,
    DeliveryFuture,
    wait_delivered,
)
from aiokproto.producer.producer import Producer
from aiokproto.structs import RecordMetadata

__all__ = [
    "BatchDelivery",
    "DeliveryFuture",
    "Producer",
    "RecordMetadata",
    "SerializationError",
    "wait_delivered",
]
