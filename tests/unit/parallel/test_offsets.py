"""The safe commit offset of ``PartitionOffsets`` (pure): a commit never passes a
record that has not finished, whatever the completion order."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiokproto.parallel.offsets import PartitionOffsets


def test_safe_is_the_lowest_unfinished_offset() -> None:
    p = PartitionOffsets()
    assert p.safe is None and p.to_commit() is None
    for offset in (5, 6, 8, 9):  # 7 is a gap (compaction, a transaction marker)
        p.add(offset)
    assert p.safe == 5 and p.in_progress == 4
    p.finish(6)
    p.finish(9)
    assert p.safe == 5 and p.finished_above_safe() == [6, 9]
    p.finish(5)
    assert p.safe == 8 and p.finished_above_safe() == [9]
    p.finish(8)
    assert p.safe == 10 and p.in_progress == 0 and p.finished_above_safe() == []


def test_to_commit_only_moves_forward() -> None:
    p = PartitionOffsets()
    p.add(0)
    assert p.to_commit() == 0
    p.committed = 0
    assert p.to_commit() is None
    p.finish(0)
    assert p.to_commit() == 1


def test_bad_offsets_are_refused() -> None:
    p = PartitionOffsets()
    p.add(3)
    with pytest.raises(ValueError, match="must increase"):
        p.add(2)
    with pytest.raises(ValueError, match="not a record in progress"):
        p.finish(4)
    p.add(5)
    p.finish(5)
    with pytest.raises(ValueError, match="finished twice"):
        p.finish(5)
    p.finish(3)
    with pytest.raises(ValueError, match="not a record in progress"):
        p.finish(3)
    with pytest.raises(ValueError, match="must increase"):
        p.add_many([5, 6])  # 5 taken already
    with pytest.raises(ValueError, match="must increase"):
        p.add_many([8, 7, 6])
    p.add_many([])
    p.add_many([6, 9])
    assert p.safe == 6 and p.next_offset == 10


def test_oldest_age_follows_the_lowest_unfinished_record() -> None:
    p = PartitionOffsets()
    assert p.oldest_age(10.0) == 0.0
    p.add(0, now=1.0)
    p.add_many([1, 2], now=2.0)
    p.finish(1)
    assert p.oldest_age(10.0) == 9.0
    p.finish(0)
    assert p.oldest_age(10.0) == 8.0
    p.finish(2)
    assert p.oldest_age(10.0) == 0.0


@settings(max_examples=300, deadline=None)
@given(
    gaps=st.lists(st.integers(1, 3), min_size=1, max_size=60),
    data=st.data(),
)
def test_commit_never_passes_an_unfinished_record(gaps: list[int], data: st.DataObject) -> None:
    """Records are added in offset order (with gaps) interleaved with completions in a
    random order, some never finishing: after every step the safe offset is exactly the
    lowest unfinished offset (or one past the highest taken), never above one."""
    offsets = []
    offset = data.draw(st.integers(0, 1000))
    for gap in gaps:
        offsets.append(offset)
        offset += gap
    never = set(data.draw(st.lists(st.sampled_from(offsets), max_size=3)))
    p = PartitionOffsets()
    taken: list[int] = []
    finished: set[int] = set()
    pending = list(offsets)
    while pending or len(finished) < len(set(taken) - never):
        can_finish = [o for o in taken if o not in finished and o not in never]
        if pending and (not can_finish or data.draw(st.booleans())):
            n = data.draw(st.integers(1, 3))  # a fetched batch (add_many), or one
            batch, pending = pending[:n], pending[n:]
            if len(batch) == 1 and data.draw(st.booleans()):
                p.add(batch[0])
            else:
                p.add_many(batch)
            taken.extend(batch)
        else:
            o = data.draw(st.sampled_from(can_finish))
            p.finish(o)
            finished.add(o)
        unfinished = [t for t in taken if t not in finished]
        want = min(unfinished) if unfinished else taken[-1] + 1
        assert p.safe == want
        assert all(t < p.safe for t in finished if t < want)
        assert p.in_progress == len(unfinished)
        assert p.finished_above_safe() == sorted(t for t in finished if t > want)


def test_rewind_takes_records_again_and_in_flight_ones_hold_the_commit() -> None:
    """The consumer's position moved back (a seek): the offsets from there on are taken
    again; one still in flight from before holds the safe offset until it ends too."""
    p = PartitionOffsets()
    for offset in range(10):
        p.add(offset)
    for offset in range(5):
        p.finish(offset)
    p.committed = 5
    p.finish(7)  # 5 and 6 in flight, 8 and 9 queued (dropped by the caller)
    p.rewind(3, queued={8, 9})
    assert p.next_offset == 3 and p.safe == 3 and p.to_commit() == 3  # the commit goes back
    for offset in range(3, 10):
        p.add(offset)
    for offset in range(3, 10):
        p.finish(offset)
    assert p.safe == 5 and p.in_progress == 2  # the old 5 and 6 have not ended
    p.finish(6)
    assert p.safe == 5
    p.finish(5)
    assert p.safe == 10 and p.in_progress == 0
