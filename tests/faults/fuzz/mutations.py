"""Every mutation by name, and what each needs in an answer to be planned on it."""

from __future__ import annotations

from collections.abc import Callable

from tests.faults.fuzz.field_mutations import (
    array_count,
    array_element,
    endless_varint,
    error_code,
    int_extreme,
    length_lie,
    overlong_varint,
    string_swap,
    tag_garbage,
    throttle,
    throttle_huge,
    uuid_swap,
)
from tests.faults.fuzz.frame_mutations import (
    bit_flip,
    byte_set,
    close_after,
    close_instead,
    close_midway,
    delete_bytes,
    dribble,
    duplicate,
    garbage_body,
    insert_bytes,
    late,
    length_bigger,
    length_huge,
    length_smaller,
    length_tiny,
    missing,
    stall,
    truncate,
    truncate_raw,
    unsolicited,
    wrong_correlation,
)
from tests.faults.fuzz.record_mutations import records
from tests.faults.fuzz.target import Step, Target, framed

__all__ = ["MUTATIONS", "NEEDS", "Mutation", "Step", "Target", "framed"]

Mutation = Callable[[Target], list[Step]]

MUTATIONS: dict[str, Mutation] = {
    "bit_flip": bit_flip,
    "byte_set": byte_set,
    "insert_bytes": insert_bytes,
    "delete_bytes": delete_bytes,
    "truncate": truncate,
    "truncate_raw": truncate_raw,
    "length_bigger": length_bigger,
    "length_huge": length_huge,
    "length_smaller": length_smaller,
    "length_tiny": length_tiny,
    "wrong_correlation": wrong_correlation,
    "duplicate": duplicate,
    "missing": missing,
    "stall": stall,
    "close_instead": close_instead,
    "close_after": close_after,
    "close_midway": close_midway,
    "late": late,
    "dribble": dribble,
    "garbage_body": garbage_body,
    "unsolicited": unsolicited,
    "array_count": array_count,
    "length_lie": length_lie,
    "endless_varint": endless_varint,
    "overlong_varint": overlong_varint,
    "int_extreme": int_extreme,
    "error_code": error_code,
    "throttle": throttle,
    "throttle_huge": throttle_huge,
    "tag_garbage": tag_garbage,
    "records": records,
    "array_element": array_element,
    "string_swap": string_swap,
    "uuid_swap": uuid_swap,
}

# What a mutation needs in the recorded answer to be worth planning on it.
NEEDS: dict[str, tuple[str, str | None]] = {
    "array_count": ("count", None),
    "length_lie": ("length", None),
    "endless_varint": ("tags", None),
    "overlong_varint": ("tags", None),
    "error_code": ("int", "ErrorCode"),
    "throttle": ("int", "ThrottleTimeMs"),
    "throttle_huge": ("int", "ThrottleTimeMs"),
    "tag_garbage": ("tags", None),
    "records": ("records", None),
    "array_element": ("element", None),
    "string_swap": ("string", None),
    "uuid_swap": ("uuid", None),
}
