"""Control records: the commit/abort markers (transaction markers) brokers write into
transactional logs.

A control record's key is ``version int16, type int16`` (0 abort, 1 commit); an end-txn
marker's value is ``version int16, coordinator_epoch int32``. Consumers never hand
control records to applications; they use them to drop aborted transactions.
"""

from __future__ import annotations

import enum
import struct
from typing import NamedTuple

from aiokproto.errors import CorruptRecordError

_KEY = struct.Struct(">hh")
_MARKER_VALUE = struct.Struct(">hi")


class ControlType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1


class ControlRecord(NamedTuple):
    """A decoded control record. ``type`` is a ``ControlType`` when known, else the
    raw int (newer brokers may add types; consumers should skip those)."""

    offset: int
    timestamp: int
    version: int
    type: ControlType | int
    coordinator_epoch: int | None

    @property
    def is_commit(self) -> bool:
        return self.type == ControlType.COMMIT

    @property
    def is_abort(self) -> bool:
        return self.type == ControlType.ABORT


def decode_control_record(offset: int, timestamp: int, key: bytes | None,
                          value: bytes | None) -> ControlRecord:
    """Decode a control record's key and value (raise CorruptRecordError if malformed)."""
    if key is None or len(key) < 4:
        raise CorruptRecordError(f"control record at offset {offset} has a key shorter "
                                 "than 4 bytes")
    version, raw_type = _KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(f"control record at offset {offset} has negative version")
    ctype: ControlType | int
    try:
        ctype = ControlType(raw_type)
    except ValueError:
        ctype = raw_type
    epoch: int | None = None
    if ctype in (ControlType.ABORT, ControlType.COMMIT):
        if value is None or len(value) < 6:
            raise CorruptRecordError(f"end-transaction marker at offset {offset} has a "
                                     "value shorter than 6 bytes")
        _, epoch = _MARKER_VALUE.unpack_from(value)
    return ControlRecord(offset, timestamp, version, ctype, epoch)


def encode_end_txn_marker(commit: bool, coordinator_epoch: int) -> tuple[bytes, bytes]:
    """(key, value) of a commit or abort marker (used by tests and tools)."""
    ctype = ControlType.COMMIT if commit else ControlType.ABORT
    return _KEY.pack(0, ctype), _MARKER_VALUE.pack(0, coordinator_epoch)
