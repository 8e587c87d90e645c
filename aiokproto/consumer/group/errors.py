"""Errors raised by the group layer on top of the generated broker-code classes."""

from __future__ import annotations

from aiokproto.errors import KafkaError


class CommitFailedError(KafkaError):
    """A commit cannot succeed: the group rebalanced and some partitions moved.

    The member no longer owns (some of) the partitions whose offsets it tried to
    commit, so another member may already be consuming them. Retrying the same
    commit cannot help; re-read from the committed offsets after the rebalance.
    """

    retriable = False
