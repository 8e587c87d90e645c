"""aiokproto: an asyncio-native Apache Kafka client.

The curated public names are listed in ``__all__`` (a test keeps it honest); errors
live in ``aiokproto.errors`` (``ConsumerStoppedError`` and ``IllegalOperation``, the
alias of ``NoGroupError``, are here too, where aiokafka has them).
"""

from aiokproto.admin import Admin, AdminBatchError, NewPartitions, NewTopic, OffsetSpec
from aiokproto.consumer import (
    Consumer,
    ConsumerRebalanceListener,
    ConsumerRecord,
    OffsetAndTimestamp,
)
from aiokproto.errors import ConsumerStoppedError, IllegalOperation, KafkaError
from aiokproto.producer import Producer, RecordMetadata
from aiokproto.share import ShareConsumer, ShareRecord
from aiokproto.structs import OffsetAndMetadata, TopicPartition

__version__ = "0.1.0"

__all__ = [
    "Admin",
    "AdminBatchError",
    "Consumer",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "ConsumerStoppedError",
    "IllegalOperation",
    "KafkaError",
    "NewPartitions",
    "NewTopic",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "OffsetSpec",
    "Producer",
    "RecordMetadata",
    "ShareConsumer",
    "ShareRecord",
    "TopicPartition",
    "__version__",
]
