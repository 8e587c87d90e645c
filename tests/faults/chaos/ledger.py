"""Sequenced records and the audits that judge a run (pure: no I/O).

A sequenced record's value is ``(partition, sequence)`` packed big-endian plus padding,
so the independent reader can tell, per partition, what was lost, written twice or
written out of send order.
"""

from __future__ import annotations

import struct
from array import array
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

_VALUE = struct.Struct(">HQ")
VALUE_PREFIX = _VALUE.size
_EXAMPLES = 8


def encode(partition: int, sequence: int, padding: bytes = b"") -> bytes:
    return _VALUE.pack(partition, sequence) + padding


def decode(value: bytes) -> tuple[int, int] | None:
    if len(value) < VALUE_PREFIX:
        return None
    partition, sequence = _VALUE.unpack_from(value)
    return partition, sequence


@dataclass
class Failure:
    """One send that ended in an error."""

    partition: int
    sequence: int
    error: str  # type name
    message: str
    after_s: float  # from send() until the error was known
    at: float = 0.0  # monotonic time the error was known
    batch: int = -1  # which producer batch it was in (-1: not known)


def failure_groups(failures: Iterable[Failure], gap_s: float = 0.05) -> list[list[Failure]]:
    """Failures that were one batch: consecutive sequences of a partition in the same
    batch (or, when the batch is not known, that failed at the same moment). A batch
    expires ``delivery_timeout_ms`` after its creation, so its oldest record's
    ``after_s`` is the figure to compare with the timeout; records that joined the
    batch later fail sooner after their own send (as in Java)."""
    groups: list[list[Failure]] = []
    for f in sorted(failures, key=lambda f: (f.partition, f.sequence)):
        last = groups[-1][-1] if groups else None
        if (
            last is not None
            and last.partition == f.partition
            and last.sequence + 1 == f.sequence
            and (
                last.batch == f.batch
                if last.batch != -1 and f.batch != -1
                else abs(last.at - f.at) <= gap_s
            )
        ):
            groups[-1].append(f)
        else:
            groups.append([f])
    return groups


@dataclass
class Ledger:
    """What a sequenced producer sent and what the client said about each record."""

    partitions: int
    # per partition, indexed by sequence: the offset the producer reported, -1 while
    # unsettled or failed
    offsets: list[array[int]] = field(init=False)
    failures: list[Failure] = field(default_factory=list)
    settled: int = 0

    def __post_init__(self) -> None:
        self.offsets = [array("q") for _ in range(self.partitions)]

    @property
    def sent(self) -> int:
        return sum(len(o) for o in self.offsets)

    @property
    def acknowledged(self) -> int:
        return self.sent - sum(o.count(-1) for o in self.offsets)

    def sent_in(self, partition: int) -> int:
        return len(self.offsets[partition])


@dataclass
class PartitionAudit:
    partition: int
    sent: int = 0
    acknowledged: int = 0
    failed: int = 0
    in_log: int = 0
    lost: int = 0  # acknowledged, not in the log
    duplicated: int = 0  # extra copies of a sequence in the log
    reordered: int = 0  # first copies that come after a higher sequence
    misreported: int = 0  # acknowledged with an offset other than where it is
    failed_but_written: int = 0  # an error was reported, yet the record is in the log
    unsettled: int = 0  # neither acknowledged nor failed when the run ended
    foreign: int = 0  # undecodable, wrong partition, or a sequence never sent
    examples: dict[str, list[str]] = field(default_factory=dict)

    def example(self, kind: str, text: str) -> None:
        items = self.examples.setdefault(kind, [])
        if len(items) < _EXAMPLES:
            items.append(text)


def audit_partition(
    partition: int,
    offsets: Sequence[int],
    failed: Iterable[int],
    log: Sequence[tuple[int, bytes]],
) -> PartitionAudit:
    """Compare what the producer reported (``offsets[seq]``, -1 unacknowledged;
    ``failed`` sequences) with the partition's log ``[(offset, value), ...]``."""
    failed_set = set(failed)
    out = PartitionAudit(partition, sent=len(offsets), failed=len(failed_set))
    first_at: dict[int, int] = {}
    copies: Counter[int] = Counter()
    highest = -1
    for offset, value in log:
        decoded = decode(value)
        if decoded is None or decoded[0] != partition or not 0 <= decoded[1] < len(offsets):
            out.foreign += 1
            out.example("foreign", f"offset {offset}: {value[:32]!r}")
            continue
        seq = decoded[1]
        copies[seq] += 1
        if copies[seq] > 1:
            out.duplicated += 1
            out.example("duplicated", f"seq {seq} again at offset {offset} (first {first_at[seq]})")
            continue
        first_at[seq] = offset
        if seq < highest:
            out.reordered += 1
            out.example("reordered", f"seq {seq} at offset {offset} after seq {highest}")
        highest = max(highest, seq)
    out.in_log = len(first_at)
    for seq, reported in enumerate(offsets):
        if reported >= 0:
            out.acknowledged += 1
            found = first_at.get(seq)
            if found is None:
                out.lost += 1
                out.example("lost", f"seq {seq} (acknowledged at offset {reported})")
            elif found != reported:
                out.misreported += 1
                out.example("misreported", f"seq {seq} acknowledged at {reported}, is at {found}")
        elif seq in failed_set:
            if seq in first_at:
                out.failed_but_written += 1
        else:
            out.unsettled += 1
            out.example("unsettled", f"seq {seq}")
    return out


@dataclass
class Audit:
    partitions: list[PartitionAudit]

    def total(self, name: str) -> int:
        return sum(int(getattr(p, name)) for p in self.partitions)

    @property
    def clean(self) -> bool:
        """Nothing lost, duplicated, reordered, misreported, unsettled or foreign."""
        return not any(
            self.total(k)
            for k in ("lost", "duplicated", "reordered", "misreported", "unsettled", "foreign")
        )

    def summary(self) -> dict[str, int]:
        keys = (
            "sent", "acknowledged", "failed", "in_log", "lost", "duplicated", "reordered",
            "misreported", "failed_but_written", "unsettled", "foreign",
        )  # fmt: skip
        return {k: self.total(k) for k in keys}

    def evidence(self) -> str:
        lines = []
        for p in self.partitions:
            for kind, items in p.examples.items():
                lines.append(f"  partition {p.partition} {kind}: {'; '.join(items)}")
        return "\n".join(lines)


def audit(ledger: Ledger, log: Mapping[int, Sequence[tuple[int, bytes]]]) -> Audit:
    failed: dict[int, list[int]] = {}
    for f in ledger.failures:
        failed.setdefault(f.partition, []).append(f.sequence)
    return Audit(
        [
            audit_partition(p, ledger.offsets[p], failed.get(p, ()), log.get(p, ()))
            for p in range(ledger.partitions)
        ]
    )


# -- consumer groups ---------------------------------------------------------------------


@dataclass
class Coverage:
    """How the processed offsets of a group cover the log."""

    processed: int = 0  # distinct (partition, offset) processed
    skipped: int = 0  # offsets in the log that no member processed
    duplicated: int = 0  # extra processings of an offset
    beyond: int = 0  # processed offsets at or past the high watermark
    examples: list[str] = field(default_factory=list)


def coverage(
    processed: Mapping[int, Counter[int]], marks: Mapping[int, tuple[int, int]]
) -> Coverage:
    """``processed[partition][offset]`` = times processed; ``marks`` = (low, high)."""
    out = Coverage()
    for p, (low, high) in sorted(marks.items()):
        seen = processed.get(p, Counter())
        missing = [o for o in range(low, high) if o not in seen]
        out.skipped += len(missing)
        if missing and len(out.examples) < _EXAMPLES:
            out.examples.append(f"partition {p}: skipped {_ranges(missing)}")
        for offset, times in seen.items():
            if offset >= high:
                out.beyond += 1
            elif offset >= low:
                out.processed += 1
                out.duplicated += times - 1
    return out


def _ranges(offsets: list[int], limit: int = 6) -> str:
    """``[3, 4, 5, 9]`` as ``3-5, 9``."""
    spans: list[str] = []
    start = prev = offsets[0]
    for o in [*offsets[1:], None]:
        if o is not None and o == prev + 1:
            prev = o
            continue
        spans.append(str(start) if start == prev else f"{start}-{prev}")
        if o is not None:
            start = prev = o
    more = f" (+{len(spans) - limit} more)" if len(spans) > limit else ""
    return ", ".join(spans[:limit]) + more


def parse_processed(text: str) -> list[tuple[int, int]]:
    """Lines ``"<partition> <offset>"``; a last line without its newline was cut by a
    SIGKILL mid-write and is ignored (its commit never happened)."""
    lines = text.split("\n")
    complete = lines[:-1]  # the part after the last "\n" is empty or cut
    out = []
    for line in complete:
        if line:
            p, o = line.split()
            out.append((int(p), int(o)))
    return out
