"""The package's public names are exactly the curated ``__all__``."""

from __future__ import annotations

import types

import aiokproto
import aiokproto.errors

EXPECTED = {
    "Admin",
    "AdminBatchError",
    "Consumer",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    # aiokafka exports it from its package too (``from aiokafka import ConsumerStoppedError``)
    "ConsumerStoppedError",
    # aiokafka's top-level name for commit()/committed() without group_id (NoGroupError)
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
}


def test_all_is_curated_and_importable() -> None:
    assert set(aiokproto.__all__) == EXPECTED
    for name in aiokproto.__all__:
        assert getattr(aiokproto, name) is not None
    # subpackages appear as attributes once imported; they are not public names
    public = {
        n
        for n, v in vars(aiokproto).items()
        if not n.startswith("_") and not isinstance(v, types.ModuleType)
    }
    assert public <= EXPECTED, public - EXPECTED


def test_every_error_is_a_kafka_error_with_a_message() -> None:
    for code, cls in aiokproto.errors.ERROR_CLASSES.items():
        assert issubclass(cls, aiokproto.errors.KafkaError)
        assert cls.errno == code
        assert cls.description and len(cls.description) > 20
    err = aiokproto.errors.for_code(3)("topic 'x'")
    assert "topic 'x'" in str(err) and err.retriable and err.invalid_metadata
