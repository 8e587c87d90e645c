"""The rebalance listener users implement to act when partitions move
(``ConsumerRebalanceListener``: callbacks around a rebalance)."""

from __future__ import annotations

from aiokproto.structs import TopicPartition


class ConsumerRebalanceListener:
    """Callbacks around a group rebalance; subclass and override what you need.

    All three run on the group task, in order, and a rebalance waits for them: commit
    or flush state in ``on_partitions_revoked``. They may be coroutines or plain
    methods. Newly assigned partitions are neither fetched nor handed out until
    ``on_partitions_assigned`` has returned, so it can seek them (offsets kept outside
    Kafka). An exception raised by a callback is logged and re-raised to the consumer's
    next ``getone``/``getmany``.
    """

    async def on_partitions_revoked(self, revoked: frozenset[TopicPartition]) -> None:
        """Partitions this member gives up (it still owns them while this runs)."""

    async def on_partitions_assigned(self, assigned: frozenset[TopicPartition]) -> None:
        """Partitions newly owned (cooperative: only the added ones)."""

    async def on_partitions_lost(self, lost: frozenset[TopicPartition]) -> None:
        """Partitions already owned by someone else (session expired, fenced).

        Committing for them would fail; the default treats them as revoked.
        """
        await self.on_partitions_revoked(lost)
