"""aiokafka code moves over by renaming: each file in ``aiokafka_snippets/`` is aiokafka
code written from aiokafka's documented API; the test renames it mechanically (the
README's "Migrating from aiokafka" rename table, applied in order) and runs it against
the broker. The same file also runs unchanged on aiokafka, which proves each snippet is
aiokafka code that works, not code bent to fit aiokproto.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import io
import re
import tokenize
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from aiokproto.testing import LocalKafka
from tests.consumer.conftest import create_topic

HERE = Path(__file__).parent
SNIPPETS = sorted(p.stem for p in (HERE / "aiokafka_snippets").glob("*.py") if p.stem != "__init__")
README = HERE.parents[1] / "README.md"

# The rename table, as (pattern, replacement) in the order applied. The README shows
# the same rows; test_the_readme_shows_the_rename_table keeps the two in step.
RENAMES: list[tuple[str, str]] = [
    (r"aiokafka\.coordinator\.assignors(?:\.\w+)*", "aiokproto.consumer.group.assignors"),
    (r"\bAIOKafkaProducer\b", "Producer"),
    (r"\bAIOKafkaConsumer\b", "Consumer"),
    (r"\bAIOKafkaAdminClient\b", "Admin"),
    (r"\baiokafka\b", "aiokproto"),
]
README_ROWS = [
    "| `aiokafka.coordinator.assignors…` (any submodule) | `aiokproto.consumer.group.assignors` |",
    "| `AIOKafkaProducer` | `Producer` |",
    "| `AIOKafkaConsumer` | `Consumer` |",
    "| `AIOKafkaAdminClient` | `Admin` |",
    "| `aiokafka` (every other module: `.errors`, `.structs`, `.abc`, `.helpers`, `.admin`) "
    "| `aiokproto` |",
]


def rename(source: str) -> str:
    """``source`` with the rename table applied to its code (comments and strings,
    which may talk about aiokafka, are left as they are)."""
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    prose: list[tuple[int, int]] = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in (tokenize.STRING, tokenize.COMMENT):
            prose.append(
                (starts[tok.start[0] - 1] + tok.start[1], starts[tok.end[0] - 1] + tok.end[1])
            )
    out, at = [], 0
    for begin, end in [*prose, (len(source), len(source))]:
        code = source[at:begin]
        for pattern, replacement in RENAMES:
            code = re.sub(pattern, replacement, code)
        out += [code, source[begin:end]]
        at = end
    return "".join(out)


def code_of(source: str) -> str:
    """``source`` without its comments and strings (what renaming must have changed)."""
    return "".join(
        tok.string
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type not in (tokenize.STRING, tokenize.COMMENT)
    )


def load_renamed(name: str, tmp_path: Path) -> ModuleType:
    source = (HERE / "aiokafka_snippets" / f"{name}.py").read_text()
    renamed = rename(source)
    assert "aiokafka" not in code_of(renamed).lower()
    path = tmp_path / f"renamed_{name}.py"
    path.write_text(renamed)
    spec = importlib.util.spec_from_file_location(f"renamed_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_original(name: str) -> ModuleType:
    pytest.importorskip("aiokafka")
    return importlib.import_module(f"tests.migration.aiokafka_snippets.{name}")


async def run(main: Callable[..., Awaitable[None]], *args: Any) -> None:
    async with asyncio.timeout(120):
        await main(*args)


def test_renaming_is_mechanical() -> None:
    src = (
        "from aiokafka import AIOKafkaConsumer\n"
        "from aiokafka.coordinator.assignors.sticky.sticky_assignor import "
        "StickyPartitionAssignor\n"
        "from aiokafka.admin import AIOKafkaAdminClient\n"
    )
    assert rename(src) == (
        "from aiokproto import Consumer\n"
        "from aiokproto.consumer.group.assignors import StickyPartitionAssignor\n"
        "from aiokproto.admin import Admin\n"
    )


def test_the_readme_shows_the_rename_table() -> None:
    text = README.read_text()
    for row in README_ROWS:
        assert row in text, f"README lacks the rename row {row}"


@pytest.mark.parametrize("name", [s for s in SNIPPETS if s != "ssl_context"])
async def test_renamed_aiokafka_snippet_runs(
    kafka: Any, topic_name: str, name: str, tmp_path: Path
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=2)
    module = load_renamed(name, tmp_path)
    await run(module.main, kafka.bootstrap_servers, topic_name)


async def test_renamed_ssl_snippet_runs(
    kafka_secure: LocalKafka, topic_name: str, tmp_path: Path
) -> None:
    await create_topic(kafka_secure.bootstrap_servers, topic_name, partitions=2)
    tls = kafka_secure.tls
    assert tls is not None
    module = load_renamed("ssl_context", tmp_path)
    await run(module.main, kafka_secure.bootstrap("SSL"), topic_name, str(tls.ca_file))


@pytest.mark.parametrize("name", [s for s in SNIPPETS if s != "ssl_context"])
async def test_the_snippet_is_working_aiokafka_code(kafka: Any, topic_name: str, name: str) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=2)
    module = load_original(name)
    await run(module.main, kafka.bootstrap_servers, topic_name)


def test_every_snippet_is_collected() -> None:
    assert len(SNIPPETS) >= 20


def test_the_readme_examples_are_renamed_snippets() -> None:
    # Each README block marked `<!-- snippet: NAME -->` is NAME renamed (without its
    # docstring), so the guide shows code the tests above run.
    text = README.read_text()
    marked = re.findall(r"<!-- snippet: (\w+) -->\n```python\n(.*?)```", text, re.S)
    assert marked, "the migration guide shows no renamed snippet"
    for name, block in marked:
        renamed = rename((HERE / "aiokafka_snippets" / f"{name}.py").read_text())
        body = renamed[renamed.index('"""', 3) + 3 :].strip("\n")
        assert block.strip("\n") == body, f"README's {name} differs from the renamed snippet"
