"""aiokproto: an asyncio-native Apache Kafka client. The curated public names; the
clients (``Producer``, ``Consumer``, ``ShareConsumer``, ``Admin`` and their types) are
imported on first use of their name (module ``__getattr__``, ``TYPE_CHECKING`` imports
for mypy): ``import aiokproto`` loads no client and no message codec, and the console
script answers ``--version`` before importing Click (tests/test_import_cost.py).

The curated public names are listed in ``__all__`` (a test keeps it honest); errors
live in ``aiokproto.errors`` (``ConsumerStoppedError`` and ``IllegalOperation``, the
alias of ``NoGroupError``, are here too, where aiokafka has them).

``from aiokproto import Producer`` imports the producer, not the admin client, so
``import aiokproto`` stays cheap for the command line and for programs that use one
client.
"""

# private aliases: vars(aiokproto) holds only public names (tests/test_public_api.py)
import importlib as _importlib
import typing as _typing

from aiokproto.errors import ConsumerStoppedError, IllegalOperation, KafkaError
from aiokproto.structs import OffsetAndMetadata, TopicPartition

if _typing.TYPE_CHECKING:
    from aiokproto.admin import Admin, AdminBatchError, NewPartitions, NewTopic, OffsetSpec
    from aiokproto.consumer import (
        Consumer,
        ConsumerRebalanceListener,
        ConsumerRecord,
        OffsetAndTimestamp,
    )
    from aiokproto.parallel import ParallelConsumer
    from aiokproto.producer import Producer, RecordMetadata
    from aiokproto.share import ShareConsumer, ShareRecord

__version__ = "0.1.0"

# name -> the module that defines it, imported by __getattr__ on first access
_LAZY = {
    "Admin": "aiokproto.admin",
    "AdminBatchError": "aiokproto.admin",
    "NewPartitions": "aiokproto.admin",
    "NewTopic": "aiokproto.admin",
    "OffsetSpec": "aiokproto.admin",
    "Consumer": "aiokproto.consumer",
    "ConsumerRebalanceListener": "aiokproto.consumer",
    "ConsumerRecord": "aiokproto.consumer",
    "OffsetAndTimestamp": "aiokproto.consumer",
    "ParallelConsumer": "aiokproto.parallel",
    "Producer": "aiokproto.producer",
    "RecordMetadata": "aiokproto.producer",
    "ShareConsumer": "aiokproto.share",
    "ShareRecord": "aiokproto.share",
}


def __getattr__(name: str) -> _typing.Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


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
    "ParallelConsumer",
    "Producer",
    "RecordMetadata",
    "ShareConsumer",
    "ShareRecord",
    "TopicPartition",
    "__version__",
]
