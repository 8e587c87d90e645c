"""``ShareConfig``: the share consumer's own options, checked when it is built (the
connection options are ``ClientConfig``'s); read by the consumer and its fetcher."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from aiokproto.errors import KafkaConfigError
from aiokproto.serialization import refuse_async_plain
from aiokproto.structs import TopicPartition

#: ``acknowledgement_commit_callback(offsets, error)``: per partition, the offsets whose
#: acknowledgements the broker answered, and None or the error it answered with
AckCallback = Callable[[Mapping[TopicPartition, frozenset[int]], Exception | None], None]
Mode = Literal["implicit", "explicit"]


@dataclass(slots=True)
class ShareConfig:
    group_id: str
    acknowledgement_mode: Mode = "implicit"
    acknowledgement_commit_callback: AckCallback | None = None
    max_poll_records: int = 500
    fetch_max_wait_ms: int = 500
    fetch_min_bytes: int = 1
    fetch_max_bytes: int = 52_428_800
    client_rack: str | None = None
    check_crcs: bool = True
    key_deserializer: Callable[[bytes | None], Any] | None = None
    value_deserializer: Callable[[bytes | None], Any] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.group_id, str) or not self.group_id:
            raise KafkaConfigError(
                f"ShareConsumer needs group_id, a non-empty str: {self.group_id!r}"
            )
        if self.acknowledgement_mode not in ("implicit", "explicit"):
            raise KafkaConfigError(
                "acknowledgement_mode must be 'implicit' or 'explicit', "
                f"not {self.acknowledgement_mode!r}"
            )
        for name in ("max_poll_records", "fetch_max_bytes", "fetch_min_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value < 2**31:
                raise KafkaConfigError(f"{name} must be an int in [1, 2**31), not {value!r}")
        wait = self.fetch_max_wait_ms
        if not isinstance(wait, int) or isinstance(wait, bool) or not 0 <= wait < 2**31:
            raise KafkaConfigError(f"fetch_max_wait_ms must be an int >= 0, not {wait!r}")
        for name in ("acknowledgement_commit_callback", "key_deserializer", "value_deserializer"):
            value = getattr(self, name)
            if value is not None and not callable(value):
                raise KafkaConfigError(f"{name} must be callable or None, not {value!r}")
            if name != "acknowledgement_commit_callback":
                refuse_async_plain(name, value)
        if self.client_rack is not None and not isinstance(self.client_rack, str):
            raise KafkaConfigError(f"client_rack must be a str or None, not {self.client_rack!r}")
