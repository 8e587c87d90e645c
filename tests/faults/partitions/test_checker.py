"""The partition run's checker on hand-made histories (no broker, no sockets): a clean
history passes, and each anomaly it exists to find is found and counted.

These live beside the suite rather than in tests/unit, which mirrors aiokproto/'s
modules only (tests/test_layout.py)."""

from __future__ import annotations

import json

import pytest

from tests.faults.partitions.checker import ANOMALIES, History, Read, Send, Txn, check


def clean_history() -> History:
    """Two inputs on partition 0, one on 1; two transactions (one aborted and
    redone); a reader that read the committed output in order."""
    return History(
        sends=[Send(0, "a", 0), Send(1, "b", 0), Send(0, "c", 1), Send(0, "d", None)],
        txns=[
            Txn(1, ((0, 0, "a"),), ((0, "a@1"),), 10.0, "aborted"),
            Txn(2, ((0, 0, "a"), (1, 0, "b")), ((0, "a@2"), (1, "b@2")), 11.0, "committed"),
            Txn(3, ((0, 1, "c"),), ((0, "c@3"),), 12.0, "committed"),
        ],
        reads=[
            Read("r1", 1, 0, 1, "a@2", 11.5),
            Read("r1", 1, 0, 4, "c@3", 12.5),
            Read("r2", 1, 1, 0, "b@2", 11.2),
        ],
        # offset 0: the aborted record, 2 and 3: transaction markers
        input_log={0: [(0, "a"), (1, "c")], 1: [(0, "b")]},
        output_log={0: [(1, "a@2"), (4, "c@3")], 1: [(0, "b@2")]},
        service_committed={0: 2, 1: 1},
        readers_committed={0: 5, 1: 1},
    )


def only(history: History, kind: str, count: int = 1) -> None:
    report = check(history)
    assert report.counts[kind] == count, report.summary()
    assert all(report.counts[k] == 0 for k in ANOMALIES if k != kind), report.summary()
    assert not report.clean


def test_a_clean_history_is_clean_and_counted() -> None:
    report = check(clean_history())
    assert report.clean, report.summary()
    assert report.figures["acknowledged"] == 3
    assert (report.figures["committed"], report.figures["aborted"]) == (2, 1)
    assert "lost 0" in report.summary()


def test_an_acknowledged_write_missing_from_the_log_is_lost() -> None:
    h = clean_history()
    h.input_log[0] = [(0, "a")]
    h.service_committed[0] = 1  # c never reached the service: only the producer lost it
    h.txns.pop()
    h.output_log[0] = [(1, "a@2")]
    h.reads = h.reads[:1] + h.reads[2:]
    h.readers_committed[0] = 2
    only(h, "lost")


def test_a_committed_transactions_record_missing_is_lost() -> None:
    h = clean_history()
    h.txns.append(Txn(4, ((1, 0, "b"),), ((1, "x@4"),), 13.0, "committed"))
    only(h, "lost")


def test_an_input_below_the_committed_offset_without_output_is_lost() -> None:
    h = clean_history()
    h.input_log[1].append((1, "e"))
    h.sends.append(Send(1, "e", 1))
    h.service_committed[1] = 2
    only(h, "lost")


def test_a_value_twice_in_the_log_is_duplicated() -> None:
    h = clean_history()
    h.input_log[0].append((2, "c"))  # a retried batch written again
    only(h, "duplicated")


def test_an_input_transformed_twice_is_duplicated() -> None:
    h = clean_history()
    h.output_log[1].append((1, "b@3"))
    h.txns[2] = Txn(3, ((0, 1, "c"), (1, 0, "b")), ((0, "c@3"), (1, "b@3")), 12.0, "committed")
    only(h, "duplicated")


def test_a_log_out_of_send_order_is_reordered() -> None:
    h = clean_history()
    h.sends[0], h.sends[2] = Send(0, "c", 0), Send(0, "a", 1)  # sent c first, log has a first
    h.readers_committed = {}
    only(h, "reordered", 3)  # two offsets acknowledged wrong, one order inversion


def test_a_consumer_going_back_in_one_session_is_reordered() -> None:
    h = clean_history()
    h.reads.append(Read("r1", 1, 0, 1, "a@2", 13.0))
    only(h, "reordered")
    h = clean_history()
    h.reads.append(Read("r1", 2, 0, 1, "a@2", 13.0))  # after a new assignment: allowed
    assert check(h).clean


def test_reading_an_aborted_record_is_an_aborted_read() -> None:
    h = clean_history()
    h.reads.append(Read("r2", 1, 0, 0, "a@1", 13.0))
    only(h, "aborted_reads")


def test_an_aborted_transactions_record_in_the_log_is_reported() -> None:
    h = clean_history()
    h.output_log[0].insert(0, (0, "a@1"))
    h.readers_committed = {}
    report = check(h)
    assert report.counts["aborted_reads"] == 1, report.summary()


def test_a_read_before_the_commit_was_called_is_premature() -> None:
    h = clean_history()
    h.reads[1] = Read("r1", 1, 0, 4, "c@3", 11.9)
    only(h, "premature_reads")


def test_stepping_over_a_committed_record_is_a_skip() -> None:
    h = clean_history()
    h.reads.pop(0)
    h.reads.insert(0, Read("r1", 1, 0, 0, "zz", 11.4))
    h.output_log[0].insert(0, (0, "zz"))
    h.reads.pop(1)  # r1 read 0, then nothing: the group still committed 5
    h.reads.insert(1, Read("r1", 1, 0, 4, "c@3", 12.5))
    only(h, "skipped", 2)  # stepped over 1, and the group committed past it unread


def test_the_history_survives_json() -> None:
    h = clean_history()
    data = {
        "sends": [vars(s) for s in h.sends],
        "txns": [
            {
                "number": t.number,
                "inputs": t.inputs,
                "outputs": t.outputs,
                "commit_called": t.commit_called,
                "outcome": t.outcome,
            }
            for t in h.txns
        ],
        "reads": [vars(r) for r in h.reads],
        "input_log": h.input_log,
        "output_log": h.output_log,
        "service_committed": h.service_committed,
        "readers_committed": h.readers_committed,
    }
    again = History.from_json(json.loads(json.dumps(data)))
    assert again == h


def test_a_history_naming_two_writes_alike_is_refused() -> None:
    h = clean_history()
    h.txns.append(Txn(4, ((0, 1, "c"),), ((0, "c@3"),), 13.0, "aborted"))
    with pytest.raises(ValueError, match="written by transactions 3 and 4"):
        check(h)
