"""What the client benchmarks run: scenarios, the quick and full matrices, run order.

Pure data: the runner turns a ``Scenario`` plus a client name into a ``Job`` (the JSON a
child process receives).
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Kind = Literal["produce", "consume", "latency"]
KINDS: tuple[Kind, ...] = ("produce", "consume", "latency")
COMPRESSIONS = ("none", "lz4", "zstd")
ACKS = ("1", "all")

# Producer settings every client gets, so the comparison is of clients, not of tuning.
LINGER_MS = 5
BATCH_SIZE = 64 * 1024
# records per transaction in the transactional produce scenarios
TXN_RECORDS = 1000


@dataclass(frozen=True)
class Scenario:
    kind: Kind
    value_size: int
    records: int
    partitions: int = 1
    acks: str = "1"
    compression: str = "none"
    rate: int = 0  # records/s for latency scenarios; 0 = as fast as possible
    # produce only: records per transaction (begin, send them, commit, next); 0 = none
    txn_records: int = 0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown scenario kind {self.kind!r}")
        if self.compression not in COMPRESSIONS:
            raise ValueError(f"unknown compression {self.compression!r}")
        if self.acks not in ACKS:
            raise ValueError(f"acks must be one of {ACKS}, not {self.acks!r}")
        if self.value_size < 16 or self.records < 1 or self.partitions < 1:
            raise ValueError(f"bad scenario sizes: {self}")
        if (self.kind == "latency") != (self.rate > 0):
            raise ValueError("a rate is given for latency scenarios and only for them")
        if self.txn_records < 0 or (self.txn_records and self.kind != "produce"):
            raise ValueError("transactions are for produce scenarios only")
        if self.txn_records and self.acks != "all":
            raise ValueError("transactions need idempotence, which needs acks=all")

    @property
    def id(self) -> str:
        """Stable, human-readable key used in results and tables."""
        size = f"{self.value_size}B" if self.value_size < 1000 else f"{self.value_size // 1000}KB"
        if self.kind == "consume":
            return f"consume {size} p{self.partitions} {self.compression}"
        if self.kind == "latency":
            return f"latency {size} {self.rate}/s p{self.partitions} acks={self.acks}"
        if self.txn_records:
            return f"produce txn {size} p{self.partitions} {self.compression}"
        return f"produce {size} acks={self.acks} p{self.partitions} {self.compression}"

    @property
    def entry(self) -> str:
        """The adapter function that runs this scenario: its kind, or ``produce_txn``."""
        return "produce_txn" if self.txn_records else self.kind

    @property
    def transactions(self) -> int:
        """How many transactions a transactional run commits (the last may be short)."""
        return -(-self.records // self.txn_records) if self.txn_records else 0

    @property
    def payload_bytes(self) -> int:
        return self.records * self.value_size

    @property
    def linger_ms(self) -> int:
        # latency runs measure the client, not the batching delay
        return 0 if self.kind == "latency" else LINGER_MS

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, **asdict(self)}


def _counts(quick: bool) -> dict[int, int]:
    # 1 KB records: 100,000 in both (50,000 ran for a quarter second: start-up noise)
    return {100: 200_000 if quick else 500_000, 1000: 100_000}


def quick_matrix() -> list[Scenario]:
    n = _counts(True)
    return [
        Scenario("produce", 100, n[100], partitions=1, acks="1", compression="none"),
        Scenario("produce", 100, n[100], partitions=1, acks="1", compression="zstd"),
        Scenario("produce", 1000, n[1000], partitions=8, acks="all", compression="none"),
        Scenario("produce", 100, n[100], partitions=1, acks="all", txn_records=TXN_RECORDS),
        Scenario("consume", 100, n[100], partitions=1, compression="none"),
        Scenario("latency", 100, 5_000, partitions=1, acks="1", rate=1_000),
    ]


def full_matrix() -> list[Scenario]:
    n = _counts(False)
    out: list[Scenario] = []
    for size, acks, parts, comp in itertools.product(n, ACKS, (1, 8), COMPRESSIONS):
        out.append(Scenario("produce", size, n[size], parts, acks, comp))
    for size, parts, comp in itertools.product(n, (1, 8), COMPRESSIONS):
        out.append(Scenario("consume", size, n[size], parts, compression=comp))
    out.append(Scenario("produce", 100, n[100], 1, "all", txn_records=TXN_RECORDS))
    out.append(Scenario("latency", 100, 10_000, 1, "1", rate=1_000))
    out.append(Scenario("latency", 1000, 20_000, 1, "all", rate=2_000))
    return out


def run_order(clients: list[str], run: int) -> list[str]:
    """Clients in the order of run ``run``: rotated by one each run (A B C, B C A, ...),
    so no client always goes first (cold page cache) or last (broker log compaction,
    a busier neighbour)."""
    if not clients:
        return []
    k = run % len(clients)
    return clients[k:] + clients[:k]


@dataclass
class Job:
    """One child process run: a client, a scenario and where to run it."""

    client: str
    scenario: Scenario
    bootstrap_servers: str
    topic: str
    run: int
    timeout_s: float
    group_id: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "client": self.client,
            "scenario": asdict(self.scenario),
            "bootstrap_servers": self.bootstrap_servers,
            "topic": self.topic,
            "run": self.run,
            "timeout_s": self.timeout_s,
            "group_id": self.group_id,
            "linger_ms": self.scenario.linger_ms,
            "batch_size": BATCH_SIZE,
            "extra": self.extra,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Job:
        return cls(
            client=data["client"],
            scenario=Scenario(**data["scenario"]),
            bootstrap_servers=data["bootstrap_servers"],
            topic=data["topic"],
            run=data["run"],
            timeout_s=data["timeout_s"],
            group_id=data.get("group_id", ""),
            extra=data.get("extra", {}),
        )


def job_timeout_s(scenario: Scenario) -> float:
    """Generous per-child limit: a stuck client is killed and reported, never waited on."""
    if scenario.kind == "latency":
        return 60.0 + 3 * scenario.records / scenario.rate
    # the slowest peer on this 2-core box does roughly 10k records/s or 10 MB/s
    return 60.0 + max(scenario.records / 10_000, scenario.payload_bytes / 10e6) * 3
