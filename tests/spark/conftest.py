"""Spark test fixtures: one local[2] SparkSession per test session, topic helpers.

pyspark is imported only by the ``spark`` fixture, so the pure tests in this folder
run where the ``spark`` extra is not installed.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from aiokproto.testing.discovery import KafkaService


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    pytest.importorskip("pyspark", reason="the spark extra (pyspark) is not installed")
    pytest.importorskip("pyarrow", reason="the spark extra (pyarrow) is not installed")
    from pyspark.sql import SparkSession

    from aiokproto.spark import register

    # Executors' Python workers must be this venv's interpreter (aiokproto is installed).
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("aiokproto-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "768m")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.streaming.stopTimeout", "30s")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture
def bootstrap(kafka: KafkaService) -> str:
    return kafka.bootstrap_servers
