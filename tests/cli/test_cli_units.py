"""The command line as a whole, without a broker: the missing ``cli`` extra, option
order, progress bars, consume's timeout."""

from __future__ import annotations

import importlib.metadata
import os
import pathlib
import socket
import subprocess
import sys
from typing import Any

from aiokproto.cli.formats import RecordFormatter
from aiokproto.structs import TopicPartition


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


def test_the_root_help_lists_each_command_as_its_own_help_would() -> None:
    """``aiokproto --help`` lists the sub-commands from ``COMMANDS`` without importing
    them (tests/test_import_cost.py): the text kept there is each command's first help
    paragraph, and the listing is Click's own for the loaded commands, at any width."""
    import inspect

    import click

    from aiokproto.cli import app

    lazy = app._LazyGroup("aiokproto")  # nothing loaded yet
    eager = click.Group("aiokproto")
    loader = app._LazyGroup("loader")
    for name, (_module, text) in app.COMMANDS.items():
        command = loader.get_command(click.Context(loader), name)
        assert command is not None and command.help is not None
        assert inspect.cleandoc(command.help).split("\n\n")[0] == text, name
        eager.add_command(command, name)
    assert not lazy.commands
    for width in (50, 80, 100):
        listings = []
        for group in (lazy, eager):
            formatter = click.HelpFormatter(width=width)
            group.format_commands(click.Context(group), formatter)
            listings.append(formatter.getvalue())
        assert listings[0] == listings[1], width
        assert all(f"  {name} " in listings[0] for name in app.COMMANDS)
    assert lazy.get_command(click.Context(lazy), "no-such-command") is None
