"""The root ``aiokproto`` command group: the sub-commands and process-wide settings
(``--verbose``, ``--version``).

Each sub-command's module is imported when that command runs (or shows its own help):
the root's ``--help`` lists them from ``COMMANDS`` without importing Rich and every
client (0.3-0.4 s), and ``aiokproto produce`` does not import the consumer's command.
"""

from __future__ import annotations

import importlib
import sys

import click

from aiokproto import __version__

#: sub-command -> (its module, the first paragraph of its help, as the root's --help
#: lists it); tests/cli/test_cli_units.py checks the text against the command's own
COMMANDS: dict[str, tuple[str, str]] = {
    "acls": ("aiokproto.cli.acls", "Access control lists: list, create and delete ACLs."),
    "cluster": ("aiokproto.cli.topics", "The cluster's id, controller and brokers."),
    "consume": (
        "aiokproto.cli.io",
        "Print records of TOPICs until --count or Ctrl-C (which stops cleanly and, in a\n"
        "group, commits the offsets of the records printed).",
    ),
    "groups": (
        "aiokproto.cli.groups",
        "Consumer groups: list, describe, lag, delete, reset offsets.",
    ),
    "perf": ("aiokproto.cli.perf", "Measure producing and consuming throughput and latency."),
    "produce": (
        "aiokproto.cli.io",
        "Send one record per line of stdin (or --file) to TOPIC; prints a summary.",
    ),
    "topics": ("aiokproto.cli.topics", "List, describe, create, delete and alter topics."),
}


class _LazyGroup(click.Group):
    """A group whose ``COMMANDS`` are imported on first lookup."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.commands) | set(COMMANDS))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            module = importlib.import_module(COMMANDS[cmd_name][0])
            command = getattr(module, cmd_name)
            assert isinstance(command, click.Command), command
            self.add_command(command, cmd_name)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Click's listing; a command not imported yet is shortened from ``COMMANDS``
        by Click, as a bare ``click.Command`` with that help."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = []
        for name in names:
            command = self.commands.get(name) or click.Command(name, help=COMMANDS[name][1])
            if not command.hidden:
                rows.append((name, command.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _configure_logging(verbose: int) -> None:
    from aiokproto.cli.common import configure_logging  # Rich, with the commands

    configure_logging(verbose)


@click.group(
    cls=_LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, prog_name="aiokproto")
@click.option(
    "--verbose", "-v", count=True, help="Show the client's warnings (-vv: info, -vvv: debug)."
)
def cli(verbose: int) -> None:
    """aiokproto: a Kafka client on the command line.

    Connection options go after the command, e.g.
    `aiokproto topics list -b localhost:9092 --output json`.
    """
    _configure_logging(verbose)


def main() -> None:
    try:
        cli.main(prog_name="aiokproto", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except click.exceptions.Exit as exc:  # --help, --version
        sys.exit(exc.exit_code)
    except click.ClickException as exc:  # bad options: usage errors
        exc.show()
        from aiokproto.cli.common import EXIT_USAGE

        sys.exit(EXIT_USAGE if exc.exit_code == 2 else exc.exit_code)
