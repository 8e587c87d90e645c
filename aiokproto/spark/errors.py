"""Errors the Spark data source raises on top of the client's own."""

from __future__ import annotations

from aiokproto.errors import KafkaError


class DataLossError(KafkaError):
    """Offsets the query needed are gone (retention, topic deleted or recreated).

    Raised when ``failOnDataLoss`` is true (the default); set it to ``false`` to skip
    the lost range and go on.
    """
