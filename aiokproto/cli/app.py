"""The root ``aiokproto`` command group: the sub-commands and process-wide settings
(``--verbose``, ``--version``)."""

from __future__ import annotations

import sys

import click

from aiokproto import __version__
from aiokproto.cli.acls import acls
from aiokproto.cli.common import EXIT_USAGE, configure_logging
from aiokproto.cli.groups import groups
from aiokproto.cli.io import consume, produce
from aiokproto.cli.perf import perf
from aiokproto.cli.topics import cluster, topics


@click.group(
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
    configure_logging(verbose)


for _command in (topics, groups, cluster, acls, produce, consume, perf):
    cli.add_command(_command)


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
        sys.exit(EXIT_USAGE if exc.exit_code == 2 else exc.exit_code)
