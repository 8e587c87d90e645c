"""A Spark Structured Streaming job on aiokproto's data source: run with
``.venv/bin/python examples/spark_pipeline.py`` (needs the ``spark`` extra).

Starts a local single-node Kafka (unless KAFKA_BOOTSTRAP_SERVERS names a cluster),
writes purchase events as JSON with aiokproto's Producer, then a streaming query reads
them with ``format("aiokproto")`` (a few micro-batches, ``maxOffsetsPerTrigger``),
totals them per user and writes the totals to a second topic (complete output mode: a
Python streaming sink takes append and complete, not update), also with
``format("aiokproto")``. The query uses ``Trigger.AvailableNow`` so it ends by itself;
the script then reads the totals back with the Consumer and prints them.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import tempfile
import uuid

from aiokproto.admin import Admin, NewTopic
from aiokproto.consumer import Consumer
from aiokproto.producer import Producer
from aiokproto.structs import TopicPartition

USERS = [f"user-{i}" for i in range(5)]
EVENTS = 1_000


async def make_topics(bootstrap: str, events: str, totals: str) -> None:
    async with Admin(bootstrap_servers=bootstrap) as admin:
        await admin.create_topics(
            [
                NewTopic(events, num_partitions=3, replication_factor=1),
                NewTopic(totals, num_partitions=1, replication_factor=1),
            ]
        )
        async with asyncio.timeout(30):
            while not {events, totals} <= set(await admin.list_topics()):  # noqa: ASYNC110
                await asyncio.sleep(0.1)


async def write_events(bootstrap: str, topic: str) -> dict[str, int]:
    """Send the events; return the totals the pipeline should arrive at."""
    rng = random.Random(7)
    expected = dict.fromkeys(USERS, 0)
    async with Producer(bootstrap_servers=bootstrap, linger_ms=10) as producer:
        handles = []
        for _ in range(EVENTS):
            user, amount = rng.choice(USERS), rng.randint(1, 100)
            expected[user] += amount
            event = {"user": user, "item": rng.choice(["book", "pen", "lamp"]), "amount": amount}
            handles.append(
                await producer.send(topic, json.dumps(event).encode(), key=user.encode())
            )
        await producer.flush()
        for handle in handles:
            await handle
    return expected


def run_pipeline(bootstrap: str, events: str, totals: str) -> None:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from aiokproto.spark import register

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("aiokproto-spark-pipeline")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    try:
        source = (
            spark.readStream.format("aiokproto")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", events)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "400")  # three micro-batches for 1000 events
            .load()
        )
        schema = "user string, item string, amount int"
        per_user = (
            source.select(F.from_json(F.col("value").cast("string"), schema).alias("e"))
            .groupBy("e.user")
            .agg(F.count("*").alias("events"), F.sum("e.amount").alias("total"))
        )
        query = (
            per_user.select(
                F.col("user").alias("key"),
                F.to_json(F.struct("user", "events", "total")).alias("value"),
            )
            .writeStream.format("aiokproto")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", totals)
            .option("checkpointLocation", tempfile.mkdtemp(prefix="aiokproto-pipeline-"))
            .outputMode("complete")  # each micro-batch writes every total so far
            .trigger(availableNow=True)  # process what is there now, then stop
            .start()
        )
        if not query.awaitTermination(300):
            query.stop()
            raise SystemExit("the streaming query did not finish within 5 minutes")
        batches = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
        print(f"streaming query read {sum(batches)} events in micro-batches of {batches}")
    finally:
        spark.stop()


async def read_totals(bootstrap: str, topic: str) -> dict[str, dict[str, int]]:
    """The latest total per user (later updates replace earlier ones)."""
    latest: dict[str, dict[str, int]] = {}
    tp = TopicPartition(topic, 0)
    async with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        end = (await consumer.end_offsets([tp]))[tp]
        async with asyncio.timeout(30):
            while await consumer.position(tp) < end:
                for record in (await consumer.getmany(timeout_ms=500)).get(tp, []):
                    latest[record.key.decode()] = json.loads(record.value)
    return latest


def demo(bootstrap: str) -> None:
    run_id = uuid.uuid4().hex[:6]
    events, totals = f"pipeline-events-{run_id}", f"pipeline-totals-{run_id}"
    asyncio.run(make_topics(bootstrap, events, totals))
    expected = asyncio.run(write_events(bootstrap, events))
    print(f"wrote {EVENTS} events to {events}")
    run_pipeline(bootstrap, events, totals)
    got = asyncio.run(read_totals(bootstrap, totals))
    print(f"totals read back from {totals}:")
    for user in sorted(got):
        row = got[user]
        print(f"  {user}: {row['events']} events, total {row['total']}")
    if {u: r["total"] for u, r in got.items()} != {u: t for u, t in expected.items() if t}:
        raise SystemExit(f"totals differ from what was sent: expected {expected}")
    print("totals match the events that were sent")


def main() -> None:
    external = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if external:
        demo(external)
        return
    from aiokproto.testing import PLAINTEXT_ONLY, LocalKafka

    with LocalKafka(security=PLAINTEXT_ONLY) as kafka:
        print(f"started Kafka {kafka.version} at {kafka.bootstrap_servers}")
        demo(kafka.bootstrap_servers)
    print("broker stopped")


if __name__ == "__main__":
    main()
