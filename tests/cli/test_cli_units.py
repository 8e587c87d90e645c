"""The command line's pure parts: properties files, name mapping, formats, offset plans."""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import os
import pathlib
import socket
import subprocess
import sys
from typing import Any

import pytest

from aiokproto.cli.config_file import (
    PropertiesError,
    known_java_names,
    load_properties,
    map_java,
    parse_properties,
)
from aiokproto.cli.formats import FormatError, RecordFormatter, parse_headers, parse_line
from aiokproto.cli.plan import (
    PlanError,
    Target,
    choose_target,
    lag_rows,
    parse_datetime,
    parse_topic_spec,
    plan_reset,
)
from aiokproto.structs import TopicPartition

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


def test_properties_syntax() -> None:
    text = (
        "# comment\n! also a comment\n\n"
        "a=1\n  b : two words \nc value\nd=x\\\n   y\ne=tab\\there\nf=\\u0041\ng\n"
    )
    assert parse_properties(text) == {
        "a": "1", "b": "two words ", "c": "value", "d": "xy", "e": "tab\there", "f": "A", "g": "",
    }


def test_java_names_map_to_ours() -> None:
    opts = map_java({
        "bootstrap.servers": "h1:9092,h2:9092",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule '
        'required username="alice" password="s\\"cret";',
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/ca.pem",
        "ssl.endpoint.identification.algorithm": "",
        "request.timeout.ms": "5000",
        "acks": "all",
        "linger.ms": "10",
        "enable.idempotence": "false",
        "group.id": "g",
        "isolation.level": "read_committed",
        "key.serializer": "org.apache.kafka.common.serialization.StringSerializer",
    })
    assert opts.client == {
        "bootstrap_servers": "h1:9092,h2:9092",
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "alice",
        "sasl_plain_password": 's"cret',
        "ssl_cafile": "/ca.pem",
        "ssl_check_hostname": False,
        "request_timeout_ms": 5000,
    }
    assert opts.producer == {"acks": "all", "linger_ms": 10, "enable_idempotence": False}
    assert opts.consumer == {"group_id": "g", "isolation_level": "read_committed"}


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"foo.bar": "1", "bootstrap.servers": "h:1"}, "unknown property: foo.bar"),
        ({"ssl.truststore.location": "/ts.jks"}, "only PEM files"),
        ({"request.timeout.ms": "soon"}, "request.timeout.ms: expected a whole number"),
        ({"enable.idempotence": "yes"}, "expected true or false"),
        ({"sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required;"},
         "only PlainLoginModule"),
        ({"partitioner.class": "x"}, "unknown property: partitioner.class"),
    ],
)
def test_bad_properties_are_named(props: dict[str, str], message: str) -> None:
    with pytest.raises(PropertiesError, match=message):
        map_java(props)


def test_load_properties_names_the_file(tmp_path: object) -> None:
    with pytest.raises(PropertiesError, match="cannot read config file"):
        load_properties("/nonexistent/client.properties")
    assert "bootstrap.servers" in known_java_names()


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


def test_topic_specs_and_datetimes() -> None:
    assert parse_topic_spec("t") == ("t", None)
    assert parse_topic_spec("t:2,0") == ("t", (0, 2))
    for bad in ("t:x", ":1", "t:"):
        with pytest.raises(PlanError):
            parse_topic_spec(bad)
    utc = dt.UTC
    assert parse_datetime("1970-01-01T00:00:01Z") == 1000
    assert parse_datetime("1970-01-01T01:00:01+01:00") == 1000
    assert parse_datetime("1970-01-01T00:00:01.5", local=utc) == 1500
    assert parse_datetime("12345") == 12345
    with pytest.raises(PlanError):
        parse_datetime("yesterday")


def test_choose_target_needs_exactly_one() -> None:
    assert choose_target(True, False, None, None, None) == Target("earliest")
    assert choose_target(False, False, 5, None, None) == Target("offset", 5)
    for args in ((False, False, None, None, None), (True, True, None, None, None)):
        with pytest.raises(PlanError, match="exactly one"):
            choose_target(*args)
    with pytest.raises(PlanError):
        choose_target(False, False, -1, None, None)


def test_plan_reset_stays_within_the_log() -> None:
    earliest, latest = {TP0: 10, TP1: 0}, {TP0: 100, TP1: 5}
    committed = {TP0: 50}

    def plan(target: Target, by_time: dict[TopicPartition, int] | None = None) -> list[object]:
        moves = plan_reset(target, [TP1, TP0], committed, earliest, latest, by_time)
        return [(m.partition.partition, m.current, m.new) for m in moves]

    assert plan(Target("earliest")) == [(0, 50, 10), (1, None, 0)]
    assert plan(Target("latest")) == [(0, 50, 100), (1, None, 5)]
    assert plan(Target("offset", 3)) == [(0, 50, 10), (1, None, 3)]
    assert plan(Target("offset", 1000)) == [(0, 50, 100), (1, None, 5)]
    assert plan(Target("shift", -45)) == [(0, 50, 10), (1, None, 0)]
    assert plan(Target("shift", 2)) == [(0, 50, 52), (1, None, 2)]
    # no record at or after the time: the end, as Kafka's tool does
    assert plan(Target("datetime", 1), {TP0: 42, TP1: -1}) == [(0, 50, 42), (1, None, 5)]


def test_lag_rows() -> None:
    rows = lag_rows({TP0: 3}, {TP0: 10, TP1: 4}, {TP1: "m1"})
    assert [(r.partition, r.current, r.end, r.lag, r.member) for r in rows] == [
        (TP0, 3, 10, 7, None),
        (TP1, None, 4, None, "m1"),
    ]


def test_without_the_cli_extra_one_clear_line() -> None:
    # None in sys.modules makes `import rich` fail as if it were not installed
    code = (
        "import sys, runpy; sys.modules['rich'] = None; "
        "runpy.run_module('aiokproto', run_name='__main__')"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "aiokproto: the command line needs rich: pip install 'aiokproto[cli]'"
    ]


def test_the_console_script_without_the_cli_extra_gives_the_same_line(
    tmp_path: pathlib.Path,
) -> None:
    """The installed ``aiokproto`` script (the entry point pyproject names), with Click
    unimportable through a sitecustomize: the one line and status 1, no traceback."""
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.modules['click'] = None\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    (entry,) = importlib.metadata.entry_points(group="console_scripts", name="aiokproto")
    code = f"from {entry.module} import {entry.attr} as run; run()"
    runs = [[sys.executable, "-c", code]]
    script = pathlib.Path(sys.executable).with_name("aiokproto")
    if script.exists():  # the script pip wrote into this venv
        runs.append([str(script), "topics", "list"])
    for argv in runs:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr.strip().splitlines() == [
            "aiokproto: the command line needs click: pip install 'aiokproto[cli]'"
        ]


def test_verbose_works_after_the_command_too() -> None:
    with socket.socket() as s:  # a port nobody listens on: the client warns
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = [sys.executable, "-m", "aiokproto"]
    conn = ["-b", f"127.0.0.1:{port}", "--timeout", "0.5"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIOKPROTO_")}
    for argv, warns in (
        ([*base, "topics", "list", *conn], False),
        ([*base, "topics", "list", *conn, "-v"], True),
        ([*base, "-v", "topics", "list", *conn], True),
    ):
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
        assert proc.returncode == 1, proc.stderr
        assert ("WARNING aiokproto." in proc.stderr) is warns, (argv, proc.stderr)


def test_the_produce_bar_counts_bytes_in_units() -> None:
    from aiokproto.cli.common import progress

    def shown(bar: Any) -> str:
        task = bar.tasks[0]
        return " ".join(str(column.render(task)) for column in bar.columns[3:-2])

    bar = progress(in_bytes=True)
    bar.add_task("producing", total=18_888_890, rate="")
    bar.update(bar.task_ids[0], completed=1_234_567)
    assert shown(bar).startswith("1.2/18.9 MB") and "18888890" not in shown(bar)
    records = progress()
    records.add_task("consuming", total=100, rate="")
    records.update(records.task_ids[0], completed=12)
    assert shown(records).strip() == "12/100"


async def test_consume_timeout_counts_from_the_assignment() -> None:
    """--timeout in a group: the time spent joining (no partition yet) does not count,
    so a group whose first rebalance the broker delays is not given up on."""
    import asyncio
    import time

    from aiokproto.cli.io import _print_records

    class Joining:
        def __init__(self) -> None:
            self.assigned_at = time.monotonic() + 0.6

        def assignment(self) -> frozenset[TopicPartition]:
            joined = time.monotonic() >= self.assigned_at
            return frozenset({TopicPartition("t", 0)}) if joined else frozenset()

        async def getmany(self, timeout_ms: int, max_records: int) -> dict[Any, Any]:
            await asyncio.sleep(timeout_ms / 1000)
            return {}

    began = time.monotonic()
    seen = await _print_records(
        Joining(), RecordFormatter("{value}"), None, asyncio.Event(), {}, 0.3  # type: ignore[arg-type]
    )
    assert seen == 0 and time.monotonic() - began >= 0.85
