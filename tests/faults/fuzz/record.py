"""Record the corpus: ``python -m tests.faults.fuzz.record [--bootstrap host:port]``.

Starts a local single-node Kafka (PLAINTEXT only) unless ``--bootstrap`` names one,
puts a recording relay in front of it, runs a setup (topic, seed records in every
codec) and then every scenario of ``scenarios.py`` in order, and writes every
request/response pair to ``corpus.json.gz``. Commit the new file with the change that
needed it; the names of the session (random suffix) are stored in it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import uuid
from pathlib import Path

from aiokproto import Admin, NewTopic, Producer
from aiokproto.protocol.messages.metadata import MetadataResponse
from aiokproto.testing.jars import DEFAULT_VERSION
from tests.faults.fuzz.corpus import CORPUS_PATH, Corpus, Exchange, dump
from tests.faults.fuzz.relay import Relay
from tests.faults.fuzz.scenarios import (
    BATCH,
    COMMON,
    PARTITIONS,
    PRODUCER,
    SCENARIOS,
    Names,
)
from tests.faults.fuzz.wire import response_body

# Seed records written before the scenarios, one codec per partition, so the fetch
# answers carry every codec (the scenarios add gzip and zstd).
_SEED_CODECS = ("lz4", "snappy", "none")
_SEED_PER_PARTITION = 4


async def _setup(bootstrap: str, names: Names) -> None:
    async with Admin(bootstrap_servers=bootstrap, **COMMON) as admin:
        await admin.create_topics(
            [NewTopic(names.topic, num_partitions=PARTITIONS, replication_factor=1)]
        )
    for partition, codec in enumerate(_SEED_CODECS):
        async with Producer(bootstrap_servers=bootstrap, compression_type=codec, **PRODUCER) as p:
            for i in range(_SEED_PER_PARTITION):
                await p.send_and_wait(
                    names.topic,
                    None if i == 1 else b"seed-%d-%d" % (partition, i),  # one tombstone
                    key=None if i == 2 else b"seed-key-%d" % i,
                    partition=partition,
                    headers=[("seed", b"%d" % i)] if i % 2 else None,
                )


async def record(upstream: str, kafka_version: str) -> Corpus:
    host, _, port = upstream.rpartition(":")
    suffix = uuid.uuid4().hex[:8]
    names = Names(
        topic=f"fz-main-{suffix}",
        new_topic=f"fz-new-{suffix}",
        group=f"fz-group-{suffix}",
        records=len(_SEED_CODECS) * _SEED_PER_PARTITION + PARTITIONS + BATCH,
    )
    async with Relay(host, int(port)) as relay:
        relay.scenario = "setup"
        await _setup(relay.bootstrap, names)
        await asyncio.sleep(0.5)  # let the topic settle before the scenarios look at it
        for name, scenario in SCENARIOS.items():
            relay.scenario = name
            await scenario(relay.bootstrap, names)
            print(f"recorded {name}: {len(relay.of(name))} exchanges", file=sys.stderr)
        exchanges = list(relay.exchanges)
    return Corpus(kafka_version, _node_id(exchanges), names.as_corpus(), tuple(exchanges))


def _node_id(exchanges: list[Exchange]) -> int:
    """The one broker's node id, from the first Metadata answer."""
    first = next(e for e in exchanges if e.api_key == MetadataResponse.API_KEY)
    body = response_body(first.api_key, first.version, first.response)
    brokers = MetadataResponse.decode(body, first.version).brokers
    if len(brokers) != 1:
        raise SystemExit(f"record against a single-node cluster, not {len(brokers)} brokers")
    return brokers[0].node_id


def main(argv: list[str] | None = None) -> int:
    if os.environ.get("PYTHONHASHSEED") != "0":
        # The replay runs with a fixed hash seed; record the same set orders.
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        command = [sys.executable, "-m", "tests.faults.fuzz.record", *(argv or sys.argv[1:])]
        os.execve(sys.executable, command, env)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", help="record against this broker instead")
    parser.add_argument("--kafka-version", default=DEFAULT_VERSION)
    parser.add_argument("--out", type=Path, default=CORPUS_PATH)
    args = parser.parse_args(argv)
    if args.bootstrap:
        corpus = asyncio.run(record(args.bootstrap, args.kafka_version))
    else:
        from aiokproto.testing import PLAINTEXT_ONLY, LocalKafka

        with LocalKafka(version=args.kafka_version, security=PLAINTEXT_ONLY) as kafka:
            corpus = asyncio.run(record(kafka.bootstrap_servers, kafka.version))
    size = dump(corpus, args.out)
    print(f"wrote {len(corpus.exchanges)} exchanges, {size} bytes, to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
