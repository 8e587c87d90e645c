"""Client-side pieces of the Admin's group and ACL answers, without a broker."""

from __future__ import annotations

from aiokproto.admin.base import _operations
from aiokproto.admin.groups import _assignment
from aiokproto.admin.types import AclOperation, TopicPartition
from aiokproto.protocol.messages.consumer_protocol_assignment import (
    ConsumerProtocolAssignment,
    ConsumerProtocolAssignmentTopicPartition,
)


def test_consumer_assignment_and_operation_bits() -> None:
    body = ConsumerProtocolAssignment(
        assigned_partitions=[ConsumerProtocolAssignmentTopicPartition(topic="t", partitions=[0, 2])]
    ).encode(1)
    assert _assignment(b"\x00\x01" + body) == (TopicPartition("t", 0), TopicPartition("t", 2))
    assert _assignment(b"\x00\x01garbage") == ()
    assert _assignment(None) == ()
    bits = (1 << AclOperation.READ) | (1 << AclOperation.DESCRIBE)
    assert _operations(bits, True) == frozenset({AclOperation.READ, AclOperation.DESCRIBE})
    assert _operations(bits, False) is None
    assert _operations(-(2**31), True) is None
