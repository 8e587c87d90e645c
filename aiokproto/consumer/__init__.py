"""The consumer: fetcher, subscription state, the ``Consumer`` API and the group task."""

from aiokproto.consumer.consumer import Consumer
from aiokproto.consumer.listener import ConsumerRebalanceListener
from aiokproto.consumer.record import ConsumerRecord, OffsetAndTimestamp

__all__ = ["Consumer", "ConsumerRebalanceListener", "ConsumerRecord", "OffsetAndTimestamp"]
