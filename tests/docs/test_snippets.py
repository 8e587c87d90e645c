"""Every code block of the documentation site's guides runs against a real broker, so
the guides cannot drift from the API.

Conventions for the Markdown under ``docs/`` (``index.md`` and ``guides/*.md``):

* Every ```` ```python ```` block is one test, run on its own in a fresh namespace,
  compiled as ``python -m asyncio`` compiles its input: top-level ``await`` works (the
  block then runs in ``asyncio.run``), and a block that calls ``asyncio.run(main())``
  itself works too. A block that defines ``test_*`` functions has each called, with
  the fixtures its parameters name (``topic_name`` gets a fresh name; the testing
  guide).
* Placeholders that a reader changes for their own cluster are changed here for the
  session's broker: ``localhost:9092`` (PLAINTEXT), ``localhost:9093``
  (SASL_PLAINTEXT), ``localhost:9094`` (SSL), ``localhost:9095`` (SASL_SSL) and the
  TLS files ``/etc/kafka/ca.pem``, ``/etc/kafka/client.pem``, ``/etc/kafka/client.key``.
  The SASL users are the harness's own (``alice``/``alice-secret``).
  Kerberos: ``localhost:9096`` is the GSSAPI listener of the ``gssapi_kafka`` broker
  (tests/kerberos/fixtures.py), ``/etc/security/keytabs/app.keytab`` and
  ``app@EXAMPLE.COM`` are alice's keytab and principal in the test realm, and a block
  that uses GSSAPI finds alice's ticket in the realm's default cache (as after kinit).
  ``http://localhost:8081`` is the session's schema registry (the ``schema_registry``
  fixture). ``localhost:9096`` (SASL_PLAINTEXT, OAUTHBEARER validated against a JWKS)
  and ``https://idp.example.com/oauth2/token`` are the ``kafka_oauth`` broker and its
  ``oidc_server`` (their client ``kafka-client`` / ``kafka-client-secret``).
* Topic, group and transactional-id names listed in ``NAMES`` get a suffix unique to
  the block wherever a string literal is exactly that name, so no two blocks (and no
  two runs against one cluster) share a topic or a group.
* ```` ```console ```` blocks are shell sessions: the lines starting with ``$ `` of all
  of a page's console blocks run in order in one ``bash -e`` (as a reader following
  the page in one terminal), with the page's own unique suffix on the ``NAMES``; a
  command with ``--sasl-mechanism GSSAPI`` or the token endpoint gets the Kerberos or
  OAuth placeholders' values (left out where those servers cannot run). Other
  lines in them are example output and are not checked. ```` ```sh ```` blocks
  (installing, ``make`` targets) are shown only.
* A share group's new member gets its partitions one ``share.heartbeat.interval.ms``
  (5 s, the broker's floor too) after it joins. Before a block that uses
  ``ShareConsumer`` runs, the test sets that group config to 1 s for the block's
  ``workers`` group (the harness's broker allows it), which only saves time.
* A block that cannot run here is preceded by ``<!-- not-run: the reason -->``.
  ``test_not_run_blocks_are_few_and_explained`` keeps them few.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import io
import os
import re
import shutil
import signal
import subprocess
import sys
import tokenize
import types
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = [DOCS / "index.md", *sorted((DOCS / "guides").glob("*.md"))]

#: names the guides use for topics, groups and transactional ids (each is made unique)
NAMES = frozenset(
    {
        "audit",
        "billing",
        "clicks",
        "events",
        "fees",
        "fees-0",
        "greetings",
        "invoices",
        "jobs",
        "metrics.eu",
        "metrics.us",
        "orders",
        "payments",
        "reports",
        "workers",
        "words",
    }
)
PLAINTEXT_PLACEHOLDER = "localhost:9092"
REGISTRY_PLACEHOLDER = "http://localhost:8081"
SECURE_PLACEHOLDERS = {
    "localhost:9093": "SASL_PLAINTEXT",
    "localhost:9094": "SSL",
    "localhost:9095": "SASL_SSL",
}
KERBEROS_PLACEHOLDERS = ("localhost:9096", "/etc/security/keytabs/app.keytab", "app@EXAMPLE.COM")
OAUTH_BROKER_PLACEHOLDER = "localhost:9096"
OAUTH_TOKEN_PLACEHOLDER = "https://idp.example.com/oauth2/token"
TLS_PLACEHOLDERS = {
    "/etc/kafka/ca.pem": "ca_file",
    "/etc/kafka/client.pem": "client_cert",
    "/etc/kafka/client.key": "client_key",
}
#: a block should take a few seconds; this is the limit past which it fails
BLOCK_TIMEOUT_S = 30
MAX_NOT_RUN = 5

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>```+)(?P<lang>[\w-]*)(?P<attrs>.*)$")
_NOT_RUN = re.compile(r"<!--\s*not-run:(?P<reason>.*?)-->")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    not_run: str | None  # the reason, if marked

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(DOCS)}:{self.line}"


def blocks_of(page: Path) -> Iterator[Block]:
    """The fenced blocks of a page (also indented ones, in tabs and admonitions)."""
    lines = page.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = m["indent"], m["fence"], m["lang"].lower()
        body: list[str] = []
        j = i + 1
        while j < len(lines) and lines[j].strip() != fence:
            line = lines[j]
            body.append(line[len(indent) :] if line.startswith(indent) else line.lstrip())
            j += 1
        before = [ln for ln in lines[max(0, i - 3) : i] if ln.strip()]
        marker = _NOT_RUN.search(before[-1]) if before else None
        yield Block(
            page=page,
            line=i + 1,
            lang=lang,
            code="\n".join(body) + "\n",
            not_run=marker["reason"].strip() if marker else None,
        )
        i = j + 1


ALL_BLOCKS = [b for page in PAGES for b in blocks_of(page)]
PYTHON = [b for b in ALL_BLOCKS if b.lang == "python"]
CONSOLE_PAGES = sorted({b.page for b in ALL_BLOCKS if b.lang == "console"})


def unique_names(suffix: str) -> dict[str, str]:
    return {name: f"{name}-{suffix}" for name in NAMES}


def substitute_python(code: str, values: dict[str, str]) -> str:
    """``code`` with each plain string literal equal to a key of ``values`` replaced."""
    out: list[str] = []
    lines = code.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    at = 0
    for tok in tokenize.generate_tokens(io.StringIO(code).readline):
        if tok.type != tokenize.STRING:
            continue
        try:
            value = ast.literal_eval(tok.string)
        except (ValueError, SyntaxError):  # an f-string
            continue
        if not isinstance(value, str) or value not in values:
            continue
        begin = starts[tok.start[0] - 1] + tok.start[1]
        end = starts[tok.end[0] - 1] + tok.end[1]
        out += [code[at:begin], repr(values[value])]
        at = end
    out.append(code[at:])
    return "".join(out)


def placeholder_values(code: str, request: pytest.FixtureRequest) -> dict[str, str]:
    """Placeholder -> this session's value, for the placeholders ``code`` uses."""
    kafka = request.getfixturevalue("kafka")
    values = {PLAINTEXT_PLACEHOLDER: kafka.bootstrap_servers}
    if REGISTRY_PLACEHOLDER in code:
        values[REGISTRY_PLACEHOLDER] = request.getfixturevalue("schema_registry").url
    secure = [p for p in [*SECURE_PLACEHOLDERS, *TLS_PLACEHOLDERS] if p in code]
    if secure:
        local = request.getfixturevalue("kafka_secure")  # skips on an external cluster
        for placeholder, protocol in SECURE_PLACEHOLDERS.items():
            values[placeholder] = local.bootstrap(protocol)
        assert local.tls is not None
        for placeholder, attr in TLS_PLACEHOLDERS.items():
            values[placeholder] = str(getattr(local.tls, attr))
    if '"GSSAPI"' in code:
        values.update(kerberos_values(request))
    if OAUTH_TOKEN_PLACEHOLDER in code:  # its broker address is the Kerberos one too
        values.update(oauth_values(request))
    return values


def kerberos_values(request: pytest.FixtureRequest) -> dict[str, str]:
    """The Kerberos placeholders' values; alice's ticket in the realm's default cache."""
    realm = request.getfixturevalue("realm")  # skips without MIT Kerberos
    gssapi_kafka = request.getfixturevalue("gssapi_kafka")
    keytab = realm.keytab("alice")
    realm.kdc.kinit("alice", keytab, realm.kdc.default_ccache)
    return dict(
        zip(
            KERBEROS_PLACEHOLDERS,
            (gssapi_kafka.bootstrap("SASL_PLAINTEXT"), str(keytab), realm.kdc.principal("alice")),
            strict=True,
        )
    )


def oauth_values(request: pytest.FixtureRequest) -> dict[str, str]:
    oauth = request.getfixturevalue("kafka_oauth")
    return {
        OAUTH_BROKER_PLACEHOLDER: oauth.bootstrap("SASL_PLAINTEXT"),
        OAUTH_TOKEN_PLACEHOLDER: request.getfixturevalue("oidc_server").token_url,
    }


async def quick_share_heartbeats(bootstrap: str, group: str) -> None:
    from aiokproto.admin import Admin, AlterConfigOp, ConfigResource, ConfigResourceType

    async with Admin(bootstrap_servers=bootstrap) as admin:
        resource = ConfigResource(ConfigResourceType.GROUP, group)
        await admin.incremental_alter_configs(
            {resource: [AlterConfigOp("share.heartbeat.interval.ms", "1000")]}
        )


class BlockTimeout(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise BlockTimeout(f"the block ran for more than {BLOCK_TIMEOUT_S} s")


def run_with_alarm(fn: Callable[[], None]) -> None:
    """``fn()`` in this (the main) thread, failing it after ``BLOCK_TIMEOUT_S``."""
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, BLOCK_TIMEOUT_S)
    try:
        fn()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


async def _bounded(awaitable: Any) -> Any:
    async with asyncio.timeout(BLOCK_TIMEOUT_S - 2):
        return await awaitable


def execute(code: str, filename: str, fixture: Callable[[str], Any]) -> None:
    """Run ``code`` as a module would run (top-level ``await`` allowed), then the
    ``test_*`` functions it defines."""
    compiled = compile(code, filename, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    module = types.ModuleType("__docs_snippet__")
    namespace = module.__dict__
    namespace["__name__"] = "__docs_snippet__"  # so an `if __name__ == "__main__"` stays off
    sys.modules["__docs_snippet__"] = module  # dataclasses and pickling look it up
    try:
        result = eval(compiled, namespace)
        if inspect.iscoroutine(result):
            asyncio.run(_bounded(result))
        for name, value in list(namespace.items()):
            if not (name.startswith("test_") and inspect.isfunction(value)):
                continue
            if value.__code__.co_filename != filename:
                continue  # imported, not defined by the block
            params = inspect.signature(value).parameters
            outcome = value(**{p: fixture(p) for p in params})
            if inspect.iscoroutine(outcome):
                asyncio.run(_bounded(outcome))
    finally:
        sys.modules.pop("__docs_snippet__", None)


@pytest.mark.parametrize("block", PYTHON, ids=[b.id for b in PYTHON])
def test_python_block_runs(block: Block, request: pytest.FixtureRequest) -> None:
    if block.not_run is not None:
        pytest.skip(f"not run: {block.not_run}")
    suffix = uuid.uuid4().hex[:8]
    values = {**unique_names(suffix), **placeholder_values(block.code, request)}
    code = substitute_python(block.code, values)
    for placeholder in [
        PLAINTEXT_PLACEHOLDER,
        REGISTRY_PLACEHOLDER,
        *SECURE_PLACEHOLDERS,
        *TLS_PLACEHOLDERS,
        OAUTH_BROKER_PLACEHOLDER,
        OAUTH_TOKEN_PLACEHOLDER,
    ]:
        assert placeholder not in code, f"{placeholder} is left in a string the test missed"

    if "ShareConsumer(" in code:
        asyncio.run(quick_share_heartbeats(values[PLAINTEXT_PLACEHOLDER], values["workers"]))

    def fixture(name: str) -> Any:
        return f"t-docs-{suffix}" if name == "topic_name" else request.getfixturevalue(name)

    run_with_alarm(lambda: execute(code, f"<{block.id}>", fixture))


def console_script(
    page: Path,
    values: dict[str, str],
    more: Callable[[str], dict[str, str] | None] = lambda command: {},
) -> str:
    """The ``$ `` commands of a page's console blocks (continuation lines included),
    ``values`` and ``more(command)``'s put in for their placeholders (a command for
    which ``more`` returns None is left out)."""
    commands: list[str] = []
    for block in blocks_of(page):
        if block.lang != "console" or block.not_run is not None:
            continue
        lines = block.code.splitlines()
        i = 0
        while i < len(lines):
            if not lines[i].startswith("$ "):
                i += 1
                continue
            command = [lines[i][2:]]
            while command[-1].rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                command.append(lines[i])
            text = "\n".join(command)
            i += 1
            extra = more(text)
            if extra is None:
                continue
            for name, value in sorted({**values, **extra}.items(), key=lambda kv: -len(kv[0])):
                text = re.sub(rf"(?<![\w.-]){re.escape(name)}(?![\w-]|\.\w)", value, text)
            commands.append(f"# {block.id}\n{text}")
    return "\n".join(commands)


def console_values(command: str, request: pytest.FixtureRequest) -> dict[str, str] | None:
    """The Kerberos or OAuth placeholders' values for a CLI command that logs in so
    (``localhost:9096`` is either broker); None to leave out a command whose servers
    cannot run here."""
    try:
        if "--sasl-mechanism GSSAPI" in command:
            return kerberos_values(request)
        if OAUTH_TOKEN_PLACEHOLDER in command:
            return oauth_values(request)
    except pytest.skip.Exception:  # the rest of the page still runs
        return None
    return {}


@pytest.mark.parametrize(
    "page", CONSOLE_PAGES, ids=[str(p.relative_to(DOCS)) for p in CONSOLE_PAGES]
)
def test_console_blocks_run(page: Path, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    kafka = request.getfixturevalue("kafka")
    values = {**unique_names(uuid.uuid4().hex[:8]), PLAINTEXT_PLACEHOLDER: kafka.bootstrap_servers}
    script = console_script(page, values, lambda command: console_values(command, request))
    assert script.strip(), f"{page.name} has console blocks but no $ commands"
    bin_dir = str(Path(sys.executable).parent)
    assert shutil.which("aiokproto", path=bin_dir), "the aiokproto command is not installed"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}"}
    env.pop("AIOKPROTO_BOOTSTRAP_SERVERS", None)
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        env=env,
        cwd=tmp_path,  # files the commands write stay out of the checkout
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, (
        f"{page.name}: the console commands failed (exit {done.returncode})\n"
        f"--- script\n{script}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    )


# -- the conventions themselves --------------------------------------------------------


def test_the_guides_have_code() -> None:
    assert len(PAGES) >= 10
    assert len(PYTHON) >= 40
    for page in PAGES:
        assert any(b.page == page for b in ALL_BLOCKS), f"{page.name} has no code block"


def test_not_run_blocks_are_few_and_explained() -> None:
    not_run = [b for b in ALL_BLOCKS if b.not_run is not None]
    assert len(not_run) <= MAX_NOT_RUN, [b.id for b in not_run]
    for b in not_run:
        assert len(b.not_run or "") >= 15, f"{b.id}: say why the block cannot run"


def test_every_block_has_a_known_language() -> None:
    # a misspelt "pyhton" fence would silently escape the runner
    for b in ALL_BLOCKS:
        assert b.lang in {"python", "console", "sh", "text", "toml", "ini", "yaml", "properties"}, (
            f"{b.id}: unknown fence language {b.lang!r}"
        )


def test_every_name_is_used() -> None:
    # a name no guide uses any more should leave NAMES
    text = "\n".join(b.code for b in ALL_BLOCKS)
    unused = {n for n in NAMES if not re.search(rf"[\"' ]{re.escape(n)}[\"' \n]", text)}
    assert not unused


def test_substitution_changes_only_exact_string_literals() -> None:
    code = 'x = "orders"  # orders\ny = f"{x}-orders"\nz = "orders2"\nw = b"orders"\n'
    assert substitute_python(code, {"orders": "orders-1"}) == (
        'x = \'orders-1\'  # orders\ny = f"{x}-orders"\nz = "orders2"\nw = b"orders"\n'
    )
