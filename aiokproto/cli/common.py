"""What every command shares: connection and security options, ``--config``, environment
variables ``AIOKPROTO_*``, ``--timeout``, ``--output``; ``run()`` turns errors into one
line and exit codes 0/1/2; JSON and table output, progress bars.

Precedence of a setting: the command line, then its environment variable, then the
``--config`` file, then the default. Exit codes: 0 ok, 1 an error (the broker, the
network, a missing topic), 2 a usage error (bad options, a bad config file).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import functools
import json
import logging
import os
import signal
import sys
import uuid
from collections.abc import Callable, Coroutine, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TransferSpeedColumn,
)
from rich.table import Table

from aiokproto.admin import Admin, AdminBatchError
from aiokproto.cli.auth import (
    KERBEROS_FLAGS,
    OAUTH_FLAGS,
    FlagError,
    SaslFlags,
    env_name,
    param_name,
)
from aiokproto.cli.config_file import FileOptions, PropertiesError, map_java, read_properties
from aiokproto.errors import (
    BootstrapError,
    KafkaConfigError,
    KafkaError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
DEFAULT_TIMEOUT_S = 30.0

# stdout carries results (tables, JSON, records); stderr carries progress and messages
out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


class CliError(Exception):
    """An error worth one line to the user; ``code`` is the exit code."""

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.code = code


def usage(message: str) -> NoReturn:
    raise CliError(message, EXIT_USAGE)


@dataclass(slots=True)
class Settings:
    """The connection and output settings of one command run."""

    client: dict[str, Any]
    output: str = "table"
    file: FileOptions = field(default_factory=FileOptions)
    #: --timeout came from the command line or the environment, not the default
    timeout_given: bool = False

    @property
    def json(self) -> bool:
        return self.output == "json"

    @property
    def timeout_ms(self) -> int:
        return int(self.client["default_api_timeout_ms"])

    def admin(self) -> Admin:
        return Admin(**self.client)


def _settings(
    *,
    bootstrap_server: str | None,
    config: str | None,
    security_protocol: str | None,
    sasl_mechanism: str | None,
    sasl_username: str | None,
    sasl_password: str | None,
    ssl_cafile: str | None,
    ssl_certfile: str | None,
    ssl_keyfile: str | None,
    ssl_password: str | None,
    ssl_no_check_hostname: bool,
    client_id: str | None,
    timeout: float,
    output: str,
    sasl: SaslFlags | None = None,
) -> Settings:
    sasl = sasl or SaslFlags()
    try:
        props = read_properties(config) if config else {}
        mechanism = sasl_mechanism.upper() if sasl_mechanism else None
        mechanism = mechanism or props.get("sasl.mechanism", "").strip() or None
        protocol = security_protocol or props.get("security.protocol", "").strip()
        sasl = sasl.check(mechanism, protocol.upper() or None)
        # the OAuth flags are Java properties over the file's (auth.py)
        props.update(sasl.java_properties())
        sasl.check_oauth(mechanism, props)
    except (PropertiesError, FlagError) as exc:
        usage(str(exc))
    try:
        file = map_java(props)
    except PropertiesError as exc:
        usage(f"{config}: {exc}" if config else str(exc))
    client = dict(file.client)
    given = {
        "bootstrap_servers": bootstrap_server,
        "security_protocol": security_protocol.upper() if security_protocol else None,
        "sasl_mechanism": sasl_mechanism.upper() if sasl_mechanism else None,
        "sasl_plain_username": sasl_username,
        "sasl_plain_password": sasl_password,
        "ssl_cafile": ssl_cafile,
        "ssl_certfile": ssl_certfile,
        "ssl_keyfile": ssl_keyfile,
        "ssl_password": ssl_password,
        "client_id": client_id,
        **sasl.kerberos,
    }
    client.update({k: v for k, v in given.items() if v is not None})
    if ssl_no_check_hostname:
        client["ssl_check_hostname"] = False
    if not client.get("bootstrap_servers"):
        usage(
            "no bootstrap server: pass --bootstrap-server HOST:PORT, set "
            "AIOKPROTO_BOOTSTRAP_SERVERS, or put bootstrap.servers in --config FILE"
        )
    if timeout <= 0:
        usage(f"--timeout must be positive, not {timeout}")
    # --timeout bounds every call, connecting to the bootstrap servers included
    timeout_ms = max(1, int(timeout * 1000))
    client["default_api_timeout_ms"] = timeout_ms
    client["request_timeout_ms"] = min(int(client.get("request_timeout_ms", 30_000)), timeout_ms)
    client["socket_connection_setup_timeout_ms"] = min(
        int(client.get("socket_connection_setup_timeout_ms", 10_000)), timeout_ms
    )
    client.setdefault("client_id", "aiokproto-cli")
    return Settings(client=client, output=output, file=file)


_OPTIONS: list[Callable[[Callable[..., Any]], Callable[..., Any]]] = [
    click.option(
        "--bootstrap-server",
        "--bootstrap-servers",
        "-b",
        envvar="AIOKPROTO_BOOTSTRAP_SERVERS",
        metavar="HOST:PORT[,...]",
        help="Brokers to connect to first [env AIOKPROTO_BOOTSTRAP_SERVERS].",
    ),
    click.option(
        "--config",
        "--command-config",
        "-c",
        envvar="AIOKPROTO_CONFIG",
        metavar="FILE",
        help="Java client.properties file (bootstrap.servers, security.protocol, "
        "sasl.jaas.config, ssl.truststore.location...) [env AIOKPROTO_CONFIG].",
    ),
    click.option(
        "--security-protocol",
        envvar="AIOKPROTO_SECURITY_PROTOCOL",
        type=click.Choice(["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"], case_sensitive=False),
        help="[env AIOKPROTO_SECURITY_PROTOCOL]",
    ),
    click.option(
        "--sasl-mechanism",
        envvar="AIOKPROTO_SASL_MECHANISM",
        type=click.Choice(
            ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER"],
            case_sensitive=False,
        ),
        help="[env AIOKPROTO_SASL_MECHANISM]",
    ),
    click.option("--sasl-username", envvar="AIOKPROTO_SASL_USERNAME", help="[env ...]"),
    click.option("--sasl-password", envvar="AIOKPROTO_SASL_PASSWORD", help="[env ...]"),
    *(
        click.option(
            flag, envvar=env_name(flag), metavar=metavar, help=f"GSSAPI: {text} [env ...]"
        )
        for flag, (metavar, text) in KERBEROS_FLAGS.items()
    ),
    *(
        click.option(
            flag, envvar=env_name(flag), metavar=metavar, help=f"OAUTHBEARER: {text} [env ...]"
        )
        for flag, (_, metavar, text) in OAUTH_FLAGS.items()
    ),
    click.option("--ssl-cafile", envvar="AIOKPROTO_SSL_CAFILE", help="CA bundle (PEM)."),
    click.option("--ssl-certfile", envvar="AIOKPROTO_SSL_CERTFILE", help="Client cert (PEM)."),
    click.option("--ssl-keyfile", envvar="AIOKPROTO_SSL_KEYFILE", help="Client key (PEM)."),
    click.option("--ssl-password", envvar="AIOKPROTO_SSL_PASSWORD", help="Key password."),
    click.option(
        "--ssl-no-check-hostname",
        is_flag=True,
        default=False,
        help="Do not match the broker's certificate against its host name.",
    ),
    click.option("--client-id", envvar="AIOKPROTO_CLIENT_ID", help="[env AIOKPROTO_CLIENT_ID]"),
    click.option(
        "--timeout",
        envvar="AIOKPROTO_TIMEOUT",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        show_default=True,
        metavar="SECONDS",
        help="Give up on the cluster after this long [env AIOKPROTO_TIMEOUT].",
    ),
    click.option(
        "--verbose",
        "-v",
        count=True,
        help="Show the client's warnings (-vv: info, -vvv: debug); also before the command.",
    ),
    click.option(
        "--output",
        "-o",
        envvar="AIOKPROTO_OUTPUT",
        type=click.Choice(["table", "json"]),
        default="table",
        show_default=True,
        help="table for people, json for scripts [env AIOKPROTO_OUTPUT].",
    ),
]

_NAMES = (
    "bootstrap_server",
    "config",
    "security_protocol",
    "sasl_mechanism",
    "sasl_username",
    "sasl_password",
    "ssl_cafile",
    "ssl_certfile",
    "ssl_keyfile",
    "ssl_password",
    "ssl_no_check_hostname",
    "client_id",
    "timeout",
    "output",
)
#: the SASL flags SaslFlags reads, besides --sasl-username and --sasl-password
_SASL_FLAGS = (*KERBEROS_FLAGS, *OAUTH_FLAGS)


def command(
    group: click.Group | None, name: str, **attrs: Any
) -> Callable[[Callable[..., Coroutine[Any, Any, None]]], click.Command]:
    """An async function as a command (of ``group`` if given) with the shared options.

    The function gets ``settings`` (a ``Settings``) first, then its own parameters.
    """

    def decorate(fn: Callable[..., Coroutine[Any, Any, None]]) -> click.Command:
        @functools.wraps(fn)
        def wrapper(**kwargs: Any) -> None:
            shared = {k: kwargs.pop(k) for k in _NAMES}
            params = {**shared, **{param_name(f): kwargs.pop(param_name(f)) for f in _SASL_FLAGS}}
            ctx = click.get_current_context()
            from_env = frozenset(
                f
                for f in ("--sasl-username", "--sasl-password", *_SASL_FLAGS)
                if ctx.get_parameter_source(param_name(f)) is click.core.ParameterSource.ENVIRONMENT
            )
            shared["sasl"] = SaslFlags.of(params, from_env, os.environ)
            verbose = kwargs.pop("verbose")
            if verbose:  # -v after the command adds to any before it
                configure_logging(verbose + ctx.find_root().params.get("verbose", 0))
            source = ctx.get_parameter_source("timeout")
            given = source is not None and source is not click.core.ParameterSource.DEFAULT

            def make() -> Coroutine[Any, Any, None]:
                settings = _settings(**shared)
                settings.timeout_given = given
                if given:  # a broker still starting: --timeout also waits for it to answer
                    settings.client["bootstrap_timeout_ms"] = settings.timeout_ms
                return fn(settings, **kwargs)

            # config-file errors are usage errors too: handled inside run()
            run(make)

        decorated: Callable[..., Any] = wrapper
        for option in reversed(_OPTIONS):
            decorated = option(decorated)
        made: click.Command = (click.command if group is None else group.command)(
            name, **attrs
        )(decorated)
        return made

    return decorate


# -- running and errors ---------------------------------------------------------------


def _describe(exc: BaseException) -> str:
    if isinstance(exc, AdminBatchError):
        return "; ".join(_describe(e) for e in exc.errors.values())
    text = str(exc).strip()
    if isinstance(exc, BootstrapError):  # name the option the command line sets them with
        text = text.replace("(bootstrap_timeout_ms;", "(--timeout;")
        text = text.replace("(default_api_timeout_ms)", "(--timeout)")
    if isinstance(exc, UnknownTopicOrPartitionError | UnknownTopicIdError):
        return f"unknown topic: {text}"
    name = type(exc).__name__
    # broker errors name their class already ("[Error 69] GroupIdNotFoundError: ...")
    return text if name in text else f"{name}: {text}" if text else name


def fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    err.print(f"[bold red]error:[/] {message}", highlight=False, markup=True)
    sys.exit(code)


def run(make: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run a command's coroutine; every failure becomes one line and an exit code."""
    try:
        asyncio.run(make())
    except CliError as exc:
        fail(str(exc), exc.code)
    except KafkaConfigError as exc:
        fail(str(exc), EXIT_USAGE)
    except KafkaError as exc:
        fail(_describe(exc))
    except OSError as exc:
        fail(f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else ""))
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)


@contextlib.contextmanager
def stop_on_signals(stop: Callable[[], object]) -> Iterator[None]:
    """Within the block, the first Ctrl-C (or SIGTERM) calls ``stop`` (the command ends
    cleanly: it finishes what it holds and reports); a second Ctrl-C interrupts at once
    (exit 130). Call inside the event loop."""
    loop = asyncio.get_running_loop()
    signals = (signal.SIGINT, signal.SIGTERM)

    def first() -> None:
        # the next Ctrl-C is Python's KeyboardInterrupt again: see run()
        for sig in signals:
            loop.remove_signal_handler(sig)
        stop()

    for sig in signals:
        loop.add_signal_handler(sig, first)
    try:
        yield
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)


# -- output ---------------------------------------------------------------------------


def plain(value: Any) -> Any:
    """A value as JSON-ready data: dataclasses, named tuples, enums, UUIDs, sets."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple) and hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = [plain(v) for v in value]
        return sorted(items, key=str) if isinstance(value, set | frozenset) else items
    return value


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(plain(data), indent=2) + "\n")
    sys.stdout.flush()


def table(title: str | None, columns: list[str], rows: list[list[Any]]) -> Table:
    t = Table(title=title, title_justify="left", header_style="bold")
    for name in columns:
        numeric = name.lower() in {"partition", "partitions", "offset", "lag", "end", "start",
                                   "current", "leader", "id", "port", "replicas", "members",
                                   "new", "committed", "rf"}
        t.add_column(name, justify="right" if numeric else "left")
    for row in rows:
        t.add_row(*("-" if v is None else str(v) for v in row))
    return t


def configure_logging(verbose: int) -> None:
    """Quiet by default: the client's retry warnings are noise on a terminal and an
    error reaches the user as one line anyway."""
    level = {0: logging.CRITICAL + 1, 1: logging.WARNING, 2: logging.INFO}.get(verbose, 10)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger().setLevel(level)


def progress(transient: bool = True, *, in_bytes: bool = False) -> Progress:
    """A progress bar on stderr; off when stderr is not a terminal (pipes, scripts).

    Counts are of records (``12/100``), or with ``in_bytes`` of bytes in units
    (``1.2/18.9 MB`` and ``MB/s``)."""
    counted: list[ProgressColumn] = (
        [DownloadColumn(), TransferSpeedColumn()] if in_bytes else [MofNCompleteColumn()]
    )
    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        *counted,
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        console=err,
        transient=transient,
        disable=not err.is_terminal,
    )
