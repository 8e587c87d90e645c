"""A share session with one broker (KIP-932), without I/O.

The first ShareFetch opens the session (epoch 0) and names every partition; later
requests carry the next epoch and name only the partitions added or being
acknowledged (the broker keeps fetching the others) plus the ones to forget. Any
session error starts a new one at epoch 0; ``ShareAcknowledge`` needs an open session
(epoch > 0), and epoch -1 closes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiokproto.structs import TopicPartition

CLOSE_EPOCH = -1
_MAX_EPOCH = 2**31 - 1


@dataclass(frozen=True, slots=True)
class SessionStep:
    epoch: int
    add: frozenset[TopicPartition]  # named in Topics (new, or carrying acknowledgements)
    forget: frozenset[TopicPartition]


class ShareSession:
    def __init__(self) -> None:
        self.epoch = 0
        self.partitions: frozenset[TopicPartition] = frozenset()  # as the broker holds them

    @property
    def is_open(self) -> bool:
        return self.epoch > 0

    def plan(
        self, wanted: frozenset[TopicPartition], acking: frozenset[TopicPartition]
    ) -> SessionStep:
        """The next request: fetch ``wanted``, acknowledge on ``acking``."""
        if self.epoch == 0:
            return SessionStep(0, wanted, frozenset())
        add = (wanted - self.partitions) | (acking & (self.partitions | wanted))
        # a partition leaving the session is forgotten once its acknowledgements are out
        return SessionStep(self.epoch, frozenset(add), self.partitions - wanted - acking)

    def succeeded(self, step: SessionStep) -> None:
        """The broker accepted ``step``: the session holds the new set, next epoch."""
        if step.epoch == 0:
            self.partitions = step.add
        else:
            self.partitions = (self.partitions | step.add) - step.forget
        self.epoch = 1 if self.epoch >= _MAX_EPOCH else self.epoch + 1

    def acknowledged(self) -> None:
        """A ShareAcknowledge went through: only the epoch moves."""
        self.epoch = 1 if self.epoch >= _MAX_EPOCH else self.epoch + 1

    def reset(self) -> None:
        self.epoch = 0
        self.partitions = frozenset()
