"""Is a run's number worth reporting? (pure): a run counts only if every record was
acknowledged or consumed.

Every run is checked against what the scenario asked for and what the broker saw, so
a client that drops, duplicates or truncates records cannot post a fast number: it is
reported as FAILED with these reasons instead.
"""

from __future__ import annotations

from typing import Any

from benchmarks.scenarios import Scenario


def check_run(
    scenario: Scenario,
    result: dict[str, Any],
    offsets_delta: int | None,
    committed_records: int | None = None,
) -> list[str]:
    """Reasons the run is invalid (empty when it is valid).

    ``offsets_delta``: how far the topic's end offsets (summed over partitions) moved
    during a produce or latency run, as the parent read them from the broker; None for
    consume runs (the topic is not written) or when it could not be read.
    ``committed_records``: for transactional runs, how many records a read_committed
    consumer read back from the topic afterwards (None: could not be read).
    """
    reasons: list[str] = []
    if result.get("error"):
        reasons.append(f"client error: {result['error']}")
        return reasons
    elapsed = result.get("elapsed_s")
    if not isinstance(elapsed, int | float) or elapsed <= 0:
        reasons.append("no measured time (the run did not finish its measured phase)")
    n = scenario.records
    if scenario.kind in ("produce", "latency"):
        reasons += _check_delivery(result, n)
    if scenario.txn_records:
        reasons += _check_transactions(scenario, result, offsets_delta, committed_records)
    elif scenario.kind in ("produce", "latency"):
        expected_delta = n + int(result.get("warmup_records", 0))
        if offsets_delta is None:
            reasons.append("the topic's end offsets could not be read")
        elif offsets_delta != expected_delta:
            reasons.append(
                f"the topic's end offsets grew by {offsets_delta}, expected {expected_delta}"
            )
    if scenario.kind == "consume":
        reasons += _check_consumed(scenario, result)
    if scenario.kind == "latency":
        reasons += _check_latency(result, n)
    return reasons


def _check_delivery(result: dict[str, Any], n: int) -> list[str]:
    out = []
    acked, failed = result.get("acked"), result.get("failed", 0)
    if acked != n:
        out.append(f"{acked} of {n} records acknowledged")
    if failed:
        first = result.get("delivery_error") or "?"
        out.append(f"{failed} delivery errors (first: {first})")
    if result.get("unflushed"):
        out.append(f"{result['unflushed']} records still queued after flush")
    return out


def _check_transactions(
    scenario: Scenario,
    result: dict[str, Any],
    offsets_delta: int | None,
    committed_records: int | None,
) -> list[str]:
    """Every transaction committed, and nothing else written: the records plus one
    commit marker per transaction and partition it wrote to (each transaction writes to
    at least one partition, at most to all), and a read_committed consumer sees every
    record (records of an aborted transaction also move the end offsets; it skips them)."""
    out = []
    n, txns = scenario.records, scenario.transactions
    if result.get("transactions") != txns:
        out.append(f"{result.get('transactions')} of {txns} transactions committed")
    low, high = n + txns, n + txns * scenario.partitions
    if offsets_delta is None:
        out.append("the topic's end offsets could not be read")
    elif not low <= offsets_delta <= high:
        expected = f"{low}" if low == high else f"{low} to {high}"
        out.append(
            f"the topic's end offsets grew by {offsets_delta}, expected {expected} "
            f"({n} records and a commit marker per transaction and partition)"
        )
    if committed_records is None:
        out.append("the committed records could not be read back")
    elif committed_records != n:
        out.append(f"a read_committed consumer read {committed_records} records, expected {n}")
    return out


def _check_consumed(scenario: Scenario, result: dict[str, Any]) -> list[str]:
    out = []
    n, expected_bytes = scenario.records, scenario.payload_bytes
    consumed = result.get("consumed")
    if consumed != n:
        out.append(f"consumed {consumed} records, expected exactly {n}")
    got = result.get("bytes")
    tolerance = int(result.get("bytes_resolution", 0))
    if not isinstance(got, int) or abs(got - expected_bytes) > tolerance:
        out.append(f"consumed {got} value bytes, expected {expected_bytes}")
    if result.get("bad_size"):
        out.append(f"{result['bad_size']} values not {scenario.value_size} bytes long")
    if result.get("consume_error"):
        out.append(f"consumer error: {result['consume_error']}")
    measured = result.get("measured_records")
    if measured is not None and measured <= 0:
        out.append("every record came in the first poll: too few records to time")
    return out


def _check_latency(result: dict[str, Any], n: int) -> list[str]:
    out = []
    if result.get("received") != n:
        out.append(f"received {result.get('received')} of {n} distinct records")
    if result.get("duplicates"):
        out.append(f"{result['duplicates']} duplicate records")
    if result.get("unknown"):
        out.append(f"{result['unknown']} records that were not sent by this run")
    if "latency" not in result:
        out.append("no latency samples")
    if result.get("consume_error"):
        out.append(f"consumer error: {result['consume_error']}")
    return out
