"""Record text in and out: consume's ``--format`` templates and JSON, produce's input lines."""

from __future__ import annotations

import pytest

from aiokproto.cli.formats import FormatError, RecordFormatter, parse_headers, parse_line


def test_record_formatter_template_and_json() -> None:
    fmt = RecordFormatter("{partition}:{offset}\\t{key}={value} [{headers}]")
    line = fmt("t", 1, 7, 1000, b"k", b"v\xff", (("h", b"1"), ("n", None)))
    assert line == "1:7\tk=v\\xff [h=1,n=]"
    assert RecordFormatter("{key}")("t", 0, 0, 0, None, None, ()) == "null"
    as_json = RecordFormatter("json")("t", 0, 3, 5, None, b"x", (("h", b"1"),))
    assert as_json == (
        '{"topic": "t", "partition": 0, "offset": 3, "timestamp": 5, "key": null, '
        '"value": "x", "headers": {"h": "1"}}'
    )
    for bad in ("{nope}", "{}", "{value"):
        with pytest.raises(FormatError):
            RecordFormatter(bad)


def test_input_lines() -> None:
    hdrs = parse_headers("a=1,b")
    assert hdrs == (("a", b"1"), ("b", None))
    assert parse_line(b"k:v:w", 1, key_separator=b":").key == b"k"
    assert parse_line(b"k:v:w", 1, key_separator=b":").value == b"v:w"
    with pytest.raises(FormatError, match="line 3: no key separator"):
        parse_line(b"novalue", 3, key_separator=b":")
    rec = parse_line(
        b'{"key": "k", "value": {"n": 1}, "headers": {"h": "x"}, "partition": 2}',
        1, json_input=True, headers=hdrs,
    )
    assert (rec.key, rec.value, rec.partition) == (b"k", b'{"n":1}', 2)
    assert rec.headers == (("a", b"1"), ("b", None), ("h", b"x"))
    for bad in (b"[1]", b"{oops", b'{"value": 1, "extra": 2}', b'{"partition": -1}'):
        with pytest.raises(FormatError, match="line 9"):
            parse_line(bad, 9, json_input=True)
