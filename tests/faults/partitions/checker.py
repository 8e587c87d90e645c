"""The checker of a partition run's history (pure logic: no sockets, no broker).

Like Jepsen's Kafka workload, it judges what clients saw against what the log holds
once every fault has healed. The history is JSON-able (the workload process writes it,
the test reads it back):

- ``sends``: the idempotent producer's writes to the input topic, in send order per
  partition: value, partition, and the offset it was acknowledged at (None: it failed
  or its outcome is unknown).
- ``txns``: the consume-transform-produce transactions: the input records they consumed,
  the output values they wrote, when ``commit_transaction()`` was called and the outcome
  the client saw ("committed", "aborted" or "unknown").
- ``reads``: what the group consumers (read_committed) of the output topic were handed,
  with the time and the member's assignment session.
- ``final``: the log of each topic read with read_committed after the heal
  (partition -> [(offset, value)]), and the offsets the groups committed at the end.

Anomalies (each must be zero): ``lost`` (an acknowledged write, a committed
transaction's record, or an input below the service's committed offset missing from the
output), ``duplicated`` (a value at two offsets, an input transformed twice into the
committed output), ``reordered`` (a partition's log not in send order, an acknowledged
offset that holds another value, a consumer handed a partition's records out of offset
order), ``aborted_reads`` (a consumer handed a record that is not in the committed log or
whose transaction the client aborted), ``premature_reads`` (a record handed out before its
transaction's commit was even called) and ``skipped`` (a consumer moved past a committed
record without handing it out, or the group committed past a record nobody read).
"""

from __future__ import annotations

import bisect
import itertools
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

ANOMALIES = ("lost", "duplicated", "reordered", "aborted_reads", "premature_reads", "skipped")


@dataclass(frozen=True)
class Send:
    partition: int
    value: str
    offset: int | None  # None: failed, or the outcome is unknown


@dataclass(frozen=True)
class Txn:
    number: int
    inputs: tuple[tuple[int, int, str], ...]  # (partition, offset, value) consumed
    outputs: tuple[tuple[int, str], ...]  # (partition, value) written
    commit_called: float | None  # monotonic time commit_transaction() was called
    outcome: str  # "committed", "aborted" or "unknown"


@dataclass(frozen=True)
class Read:
    member: str
    session: int  # a new session starts at each assignment (positions may go back)
    partition: int
    offset: int
    value: str
    at: float  # monotonic time the record was handed out (same clock as commit_called)


@dataclass
class History:
    sends: list[Send] = field(default_factory=list)
    txns: list[Txn] = field(default_factory=list)
    reads: list[Read] = field(default_factory=list)
    input_log: dict[int, list[tuple[int, str]]] = field(default_factory=dict)
    output_log: dict[int, list[tuple[int, str]]] = field(default_factory=dict)
    service_committed: dict[int, int] = field(default_factory=dict)  # input partition -> offset
    readers_committed: dict[int, int] = field(default_factory=dict)  # output partition -> offset

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> History:
        def log(raw: dict[str, list[list[Any]]]) -> dict[int, list[tuple[int, str]]]:
            return {int(p): [(int(o), str(v)) for o, v in rows] for p, rows in raw.items()}

        return cls(
            sends=[Send(s["partition"], s["value"], s["offset"]) for s in data["sends"]],
            txns=[
                Txn(
                    t["number"],
                    tuple((int(p), int(o), str(v)) for p, o, v in t["inputs"]),
                    tuple((int(p), str(v)) for p, v in t["outputs"]),
                    t["commit_called"],
                    t["outcome"],
                )
                for t in data["txns"]
            ],
            reads=[Read(**r) for r in data["reads"]],
            input_log=log(data["input_log"]),
            output_log=log(data["output_log"]),
            service_committed={int(p): int(o) for p, o in data["service_committed"].items()},
            readers_committed={int(p): int(o) for p, o in data["readers_committed"].items()},
        )


@dataclass
class Report:
    counts: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    figures: dict[str, int] = field(default_factory=dict)

    def add(self, kind: str, example: str) -> None:
        assert kind in ANOMALIES, kind
        self.counts[kind] += 1
        if len(self.examples[kind]) < 5:
            self.examples[kind].append(example)

    @property
    def clean(self) -> bool:
        return not any(self.counts[k] for k in ANOMALIES)

    def summary(self) -> str:
        anomalies = ", ".join(f"{k} {self.counts[k]}" for k in ANOMALIES)
        figures = ", ".join(f"{k} {v}" for k, v in self.figures.items())
        lines = [f"anomalies: {anomalies}", f"history: {figures}"]
        for kind, examples in self.examples.items():
            lines += [f"  {kind}: {e}" for e in examples]
        return "\n".join(lines)


def check(history: History) -> Report:
    report = Report()
    _check_input(history, report)
    committed_outputs = _check_transactions(history, report)
    _check_reads(history, report, committed_outputs)
    report.figures = {
        "sends": len(history.sends),
        "acknowledged": sum(1 for s in history.sends if s.offset is not None),
        "input records": sum(len(rows) for rows in history.input_log.values()),
        "transactions": len(history.txns),
        "committed": sum(1 for t in history.txns if t.outcome == "committed"),
        "aborted": sum(1 for t in history.txns if t.outcome == "aborted"),
        "unknown": sum(1 for t in history.txns if t.outcome == "unknown"),
        "output records": sum(len(rows) for rows in history.output_log.values()),
        "reads": len(history.reads),
        "distinct reads": len({(r.partition, r.offset) for r in history.reads}),
    }
    return report


def _duplicates(log: dict[int, list[tuple[int, str]]], topic: str, report: Report) -> None:
    where: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for partition, rows in log.items():
        for offset, value in rows:
            where[value].append((partition, offset))
    for value, places in where.items():
        for partition, offset in places[1:]:
            report.add("duplicated", f"{topic} {value!r} at {places[0]} and {(partition, offset)}")


def _check_input(history: History, report: Report) -> None:
    """The idempotent producer's writes: every acknowledged one in the log once, at the
    offset it was acknowledged at, each partition in send order."""
    _duplicates(history.input_log, "input", report)
    at: dict[tuple[int, str], int] = {}
    for partition, rows in history.input_log.items():
        for offset, value in rows:
            at.setdefault((partition, value), offset)
    order = {s.value: i for i, s in enumerate(history.sends)}
    for send in history.sends:
        if send.offset is None:
            continue
        found = at.get((send.partition, send.value))
        if found is None:
            report.add(
                "lost", f"input {send.value!r} acknowledged at {send.offset}, not in the log"
            )
        elif found != send.offset:
            report.add(
                "reordered", f"input {send.value!r} acknowledged at {send.offset}, found at {found}"
            )
    for partition, rows in history.input_log.items():
        sent = [(offset, order[v]) for offset, v in rows if v in order]
        for (o1, i1), (o2, i2) in itertools.pairwise(sent):
            if i2 < i1:
                report.add(
                    "reordered", f"input partition {partition}: offset {o2} sent before {o1}"
                )


def _check_transactions(history: History, report: Report) -> dict[str, Txn]:
    """Consume-transform-produce: each input below the service's committed offset is in
    the committed output exactly once, every committed transaction's records are there,
    no aborted transaction's record is, and each output partition follows input order."""
    _duplicates(history.output_log, "output", report)
    writer: dict[str, Txn] = {}
    for txn in history.txns:
        for _, value in txn.outputs:
            if value in writer:  # the workload names each attempt's values apart
                raise ValueError(
                    f"history: {value!r} written by transactions "
                    f"{writer[value].number} and {txn.number}"
                )
            writer[value] = txn
    in_output = {value for rows in history.output_log.values() for _, value in rows}
    for txn in history.txns:
        for _, value in txn.outputs:
            if txn.outcome == "committed" and value not in in_output:
                report.add("lost", f"output {value!r} of committed transaction {txn.number}")
            if txn.outcome == "aborted" and value in in_output:
                report.add(
                    "aborted_reads",
                    f"output {value!r} of aborted transaction {txn.number} is in the log",
                )
    # every output value names its input: "<input value>@<transaction number>"
    input_at = {(p, v): o for p, rows in history.input_log.items() for o, v in rows}
    made_from: Counter[str] = Counter()
    for partition, rows in history.output_log.items():
        last = -1
        for offset, value in rows:
            source = value.rpartition("@")[0]
            made_from[source] += 1
            position = input_at.get((partition, source))
            if position is None:
                continue
            if position < last:
                report.add(
                    "reordered", f"output partition {partition}: offset {offset} out of order"
                )
            last = max(last, position)
    for partition, rows in history.input_log.items():
        end = history.service_committed.get(partition, 0)
        for offset, value in rows:
            if offset >= end:
                continue
            copies = made_from[value]
            if copies == 0:
                report.add(
                    "lost", f"input {value!r} (partition {partition} offset {offset}) has no output"
                )
            elif copies > 1:
                report.add("duplicated", f"input {value!r} transformed {copies} times")
    return writer


def _check_reads(history: History, report: Report, writer: dict[str, Txn]) -> None:
    """The group consumers of the output: only committed records, none before its
    commit was called, each partition in offset order within an assignment session, no
    committed record stepped over, nothing below the group's committed offset unread."""
    committed_at = {(p, o): v for p, rows in history.output_log.items() for o, v in rows}
    offsets_of = {p: sorted(o for o, _ in rows) for p, rows in history.output_log.items()}
    last: dict[tuple[str, int, int], int] = {}
    read_any: set[tuple[int, int]] = set()
    for read in history.reads:
        read_any.add((read.partition, read.offset))
        txn = writer.get(read.value)
        if committed_at.get((read.partition, read.offset)) != read.value:
            report.add(
                "aborted_reads",
                f"{read.member} read {read.value!r} at {read.partition}/{read.offset}, "
                "not in the committed log",
            )
        elif txn is not None and txn.outcome == "aborted":
            report.add(
                "aborted_reads", f"{read.member} read {read.value!r} of aborted txn {txn.number}"
            )
        if txn is not None and (txn.commit_called is None or read.at < txn.commit_called):
            report.add(
                "premature_reads",
                f"{read.member} read {read.value!r} before transaction {txn.number} committed",
            )
        key = (read.member, read.session, read.partition)
        previous = last.get(key)
        if previous is not None:
            if read.offset <= previous:
                report.add(
                    "reordered",
                    f"{read.member} read {read.partition}/{read.offset} after {previous}",
                )
            else:
                offsets = offsets_of.get(read.partition, [])
                lo = bisect.bisect_right(offsets, previous)
                stepped = offsets[lo : bisect.bisect_left(offsets, read.offset)]
                if stepped:
                    report.add(
                        "skipped",
                        f"{read.member} went from {read.partition}/{previous} to {read.offset} "
                        f"past committed offsets {stepped[:3]}",
                    )
        last[key] = max(read.offset, previous if previous is not None else -1)
    for partition, end in history.readers_committed.items():
        for offset in offsets_of.get(partition, ()):
            if offset < end and (partition, offset) not in read_any:
                report.add(
                    "skipped", f"group committed {partition}/{end} but nobody read offset {offset}"
                )
