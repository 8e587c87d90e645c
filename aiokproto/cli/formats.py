"""Record text in and out (pure): consume's ``--format`` templates and ``json`` records
out, produce's input lines (``--key-separator``, ``--json``) in."""

from __future__ import annotations

import json
import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

FIELDS = ("topic", "partition", "offset", "timestamp", "key", "value", "headers")


class FormatError(ValueError):
    """A template or an input line that cannot be used; the message says why."""


def _text(data: bytes | None) -> str | None:
    # records are bytes; text output keeps undecodable bytes visible as \xNN
    return None if data is None else data.decode("utf-8", "backslashreplace")


def _unescape_template(template: str) -> str:
    # a shell passes '\t' as two characters; people mean the tab
    return template.replace("\\t", "\t").replace("\\n", "\n").replace("\\r", "\r")


class RecordFormatter:
    """Formats consumed records: ``json`` (one object per line) or a ``str.format``
    template over topic, partition, offset, timestamp, key, value and headers.
    A missing key or value prints as ``null``; headers as ``k1=v1,k2=v2``."""

    def __init__(self, template: str) -> None:
        self.json = template == "json"
        self.template = _unescape_template(template)
        if not self.json:
            try:
                for _, name, _, _ in string.Formatter().parse(self.template):
                    if name is not None and name.split(".")[0].split("[")[0] not in FIELDS:
                        raise FormatError(
                            f"--format: unknown field {{{name}}}; use {', '.join(FIELDS)}"
                        )
                    if name == "":
                        raise FormatError("--format: name each field, e.g. {key} {value}")
            except ValueError as exc:
                if isinstance(exc, FormatError):
                    raise
                raise FormatError(f"--format {template!r}: {exc}") from None

    def __call__(
        self,
        topic: str,
        partition: int,
        offset: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]],
    ) -> str:
        if self.json:
            return json.dumps(
                {
                    "topic": topic,
                    "partition": partition,
                    "offset": offset,
                    "timestamp": timestamp,
                    "key": _text(key),
                    "value": _text(value),
                    "headers": {k: _text(v) for k, v in headers},
                },
                ensure_ascii=False,
            )
        return self.template.format(
            topic=topic,
            partition=partition,
            offset=offset,
            timestamp=timestamp,
            key="null" if key is None else _text(key),
            value="null" if value is None else _text(value),
            headers=",".join(f"{k}={_text(v) or ''}" for k, v in headers),
        )


@dataclass(frozen=True, slots=True)
class InputRecord:
    value: bytes | None
    key: bytes | None = None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    partition: int | None = None


def parse_headers(text: str) -> tuple[tuple[str, bytes | None], ...]:
    """``k1=v1,k2=v2`` into record headers (a name without ``=`` has a null value)."""
    out: list[tuple[str, bytes | None]] = []
    for item in text.split(","):
        if not item:
            continue
        name, sep, value = item.partition("=")
        if not name:
            raise FormatError(f"--headers: a header needs a name: {item!r}")
        out.append((name, value.encode() if sep else None))
    return tuple(out)


def _json_bytes(value: Any, what: str, line_no: int) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, dict | list | int | float | bool):
        # structured values are sent as their compact JSON text
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    raise FormatError(f"line {line_no}: {what} must be a string, JSON value or null")


def parse_line(
    line: bytes,
    line_no: int,
    *,
    key_separator: bytes | None = None,
    json_input: bool = False,
    headers: tuple[tuple[str, bytes | None], ...] = (),
) -> InputRecord:
    """One input line (without its newline) as a record.

    ``json_input``: an object with ``value`` and optional ``key``, ``headers`` (an
    object or a list of [name, value] pairs) and ``partition``. Otherwise the line is
    the value, or ``key<separator>value`` with ``key_separator``.
    """
    if json_input:
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise FormatError(f"line {line_no}: not JSON: {exc}") from None
        if not isinstance(obj, dict):
            raise FormatError(f"line {line_no}: expected a JSON object with a 'value'")
        unknown = set(obj) - {"key", "value", "headers", "partition"}
        if unknown:
            raise FormatError(f"line {line_no}: unknown field(s) {', '.join(sorted(unknown))}")
        raw_headers = obj.get("headers") or {}
        pairs = raw_headers.items() if isinstance(raw_headers, dict) else raw_headers
        try:
            got = tuple(
                (str(k), None if v is None else _json_bytes(v, "a header", line_no))
                for k, v in pairs
            )
        except (TypeError, ValueError):
            raise FormatError(f"line {line_no}: headers must be an object or pairs") from None
        partition = obj.get("partition")
        if partition is not None and (not isinstance(partition, int) or partition < 0):
            raise FormatError(f"line {line_no}: partition must be an int >= 0")
        return InputRecord(
            _json_bytes(obj.get("value"), "value", line_no),
            _json_bytes(obj.get("key"), "key", line_no),
            headers + got,
            partition,
        )
    if key_separator is None:
        return InputRecord(line, None, headers)
    key, sep, value = line.partition(key_separator)
    if not sep:
        raise FormatError(f"line {line_no}: no key separator {key_separator.decode()!r}")
    return InputRecord(value, key, headers)
