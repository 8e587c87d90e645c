"""Protocol fuzzing by replay: real request/response pairs recorded from a real broker,
answered back to the real clients by a fake broker with one mutation per case.

Pieces:

* ``record``: the recorder. ``python -m tests.faults.fuzz.record`` starts a local Kafka,
  runs the scenarios through a recording relay (``relay``) and writes
  ``corpus.json.gz`` (``corpus``). Re-record when a scenario or the client's requests
  change (``test_every_scenario_replays_unmutated`` says so).
* ``scenarios``: short Producer / Consumer / group / Admin sessions with small timeouts,
  the same for recording and replay, each with a time bound.
* ``plans``: case ``(seed, index)`` -> scenario, mutation, and which answer to mutate.
* ``replay``: the fake broker; ``mutations`` (using ``spots``, a spec walker that finds
  counts, lengths, integers, strings and record batches in an answer): what it sends
  instead of the good answer.
* ``vloop``: the event loop the cases run on; its clock jumps over idle time, so
  timeouts cost no wall time and a case is deterministic.
* ``runner``: runs a case and checks it (typed outcome, time bound, no pending task, no
  exception-handler call, bounded memory); ``shards``: many cases over processes;
  ``report``: the summary table; ``known``: known defects, listed in
  ``tests/faults/test_fuzz_replay.py``.

Replay one case: ``PYTHONHASHSEED=0 .venv/bin/python -m tests.faults.fuzz --seed 1
--case 1234`` (``--log`` shows the client's log). Run a range with the summary table:
``.venv/bin/python -m tests.faults.fuzz --seed 1 --cases 0:20000``.
"""
