"""aiokproto: an asyncio-native Apache Kafka client.

The curated public names are listed in ``__all__`` (a test keeps it honest); errors
live in ``aiokproto.errors``.
"""

from aiokproto.admin import Admin, AdminBatchError, NewPartitions, NewTopic, OffsetSpec
from aiokproto.errors import KafkaError
from aiokproto.structs import TopicPartition

__version__ = "0.1.0"

__all__ = [
    "Admin",
    "AdminBatchError",
    "KafkaError",
    "NewPartitions",
    "NewTopic",
    "OffsetSpec",
    "TopicPartition",
    "__version__",
]
