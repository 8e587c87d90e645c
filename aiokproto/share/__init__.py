"""Share groups (KIP-932): ``ShareConsumer``, records acquired one member at a time and
acknowledged one by one."""

from aiokproto.share.acks import AcknowledgeType
from aiokproto.share.consumer import ShareConsumer
from aiokproto.share.records import ShareRecord

__all__ = ["AcknowledgeType", "ShareConsumer", "ShareRecord"]
