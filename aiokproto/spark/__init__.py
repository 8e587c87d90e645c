"""PySpark data source ``aiokproto`` (Spark 4.0+): Kafka topics as DataFrames.
``register(spark)``; ``KafkaDataSource`` and ``FORMAT`` (defined in ``options.py``,
where ``datasource.py`` takes it) load lazily, so this imports without pyspark.

    from aiokproto.spark import register
    register(spark)                      # or spark.dataSource.register(KafkaDataSource)
    df = (spark.read.format("aiokproto")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events").load())

Options, schema and sink columns mirror Spark's built-in Kafka source. The pure parts
(options, offsets, planning) import without pyspark; the Spark classes load lazily.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from aiokproto.spark.datasource import KafkaDataSource
    from aiokproto.spark.options import FORMAT

__all__ = ["FORMAT", "KafkaDataSource", "register"]


def register(spark: SparkSession) -> None:
    """Register the data source with a session, making ``format("aiokproto")`` available."""
    from aiokproto.spark.datasource import KafkaDataSource

    spark.dataSource.register(KafkaDataSource)


def __getattr__(name: str) -> Any:
    if name == "FORMAT":
        # defined with the options (datasource.py takes it from there, not from this
        # package); loaded on use so ``import aiokproto.spark`` stays as cheap as before
        from aiokproto.spark.options import FORMAT

        return FORMAT
    if name == "KafkaDataSource":
        from aiokproto.spark.datasource import KafkaDataSource

        return KafkaDataSource
    raise AttributeError(f"module 'aiokproto.spark' has no attribute {name!r}")
