"""What the running pyspark's Python Data Source API offers: decided here, once.

The data source supports pyspark 4.0 to 4.3; ``make test-spark-matrix`` runs tests/spark
on each. Features are found by import, not by version number; tests/spark checks each
flag against the version that brought it:

- pyspark 4.0: readers yield Arrow batches; batch writers take Arrow batches
  (``DataSourceArrowWriter``); streaming writers take ``Row`` objects; stream readers
  have no admission control: ``latestOffset()`` takes no arguments, so the reader
  applies ``maxOffsetsPerTrigger`` itself, and Spark runs ``Trigger.AvailableNow`` as
  one micro-batch (capped by ``maxOffsetsPerTrigger`` when it is set).
- pyspark 4.1: streaming writers take Arrow batches (``STREAM_ARROW_WRITES``).
- pyspark 4.2: admission control, ``latestOffset(start, limit)`` with read limits, and
  ``Trigger.AvailableNow`` in as many micro-batches as the limit needs
  (``ADMISSION_CONTROL``).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import DataSourceStreamWriter

try:  # pyspark 4.2+: admission control (read limits) and Trigger.AvailableNow
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # pragma: no cover - pyspark 4.0 and 4.1
    ADMISSION_CONTROL = False
    ReadAllAvailable = ReadLimit = ReadMaxRows = None  # type: ignore[assignment,misc]
    SupportsTriggerAvailableNow = object  # type: ignore[assignment,misc]
else:
    ADMISSION_CONTROL = True

try:  # pyspark 4.1+: streaming writers that take Arrow batches instead of Rows
    from pyspark.sql.datasource import DataSourceStreamArrowWriter
except ImportError:  # pragma: no cover - pyspark 4.0
    STREAM_ARROW_WRITES = False
    DataSourceStreamArrowWriter = DataSourceStreamWriter  # type: ignore[misc,assignment]
else:
    STREAM_ARROW_WRITES = True


def features() -> dict[str, Any]:
    """The paths taken on this pyspark (tests/spark checks them; handy in bug reports)."""
    import pyspark

    return {
        "pyspark": pyspark.__version__,
        "admission_control": ADMISSION_CONTROL,
        "stream_arrow_writes": STREAM_ARROW_WRITES,
    }


__all__ = [
    "ADMISSION_CONTROL",
    "STREAM_ARROW_WRITES",
    "DataSourceStreamArrowWriter",
    "ReadAllAvailable",
    "ReadLimit",
    "ReadMaxRows",
    "SupportsTriggerAvailableNow",
    "features",
]
