"""The Python blocks of README.md and the guides pass ``mypy --strict`` as they are
written, so a reader who copies one into a type-checked project gets no error from the
API's own types (a record's value is ``bytes | None``, a deserializer gets ``None``
for a null key or value).

Blocks with top-level ``await`` are checked inside an ``async def``. Missing
annotations on the reader's own helpers (``def charge(record):``) and third-party
packages without types are not the API's business, so those codes are off. A block
whose point is a mistake mypy also sees holds a text listed in ``WRONG_ON_PURPOSE``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.docs.test_snippets import PYTHON, Block
from tests.test_readme import README, python_blocks

ROOT = Path(__file__).resolve().parents[2]
_OFF = ("no-untyped-def", "no-untyped-call", "var-annotated", "import-untyped", "import-not-found")
_ERROR = re.compile(r"^(?P<file>[^:]+):\d+: error: (?P<message>.+)$")
#: a text in the block -> why mypy rightly rejects the block
WRONG_ON_PURPOSE = {
    "linger_msec=10": "getting-started shows the KafkaConfigError for a misspelt option",
    # aiokafka code renamed (tests/migration/test_aiokafka_snippets.py): its listener
    # is a plain def taking a set, where aiokproto's methods are typed as coroutines
    # taking a frozenset (plain methods run too)
    "# a plain def": "README's aiokafka recipe, renamed",
    # code for the other clients, shown beside aiokproto's
    "from confluent_kafka import": "confluent-kafka's code",
    "from aiokafka import": "aiokafka's code",
}


def _as_module(code: str) -> str:
    try:
        compile(code, "<block>", "exec")
    except SyntaxError:  # top-level await: the guides say to put it in an async def
        return "async def _block() -> None:\n" + textwrap.indent(code, "    ")
    return code


def _stem(block: Block) -> str:
    page = block.page.relative_to(ROOT / "docs").with_suffix("")
    return f"{str(page).replace('/', '_')}_{block.line}"


def _write_blocks(directory: Path) -> dict[str, str]:
    """Each block as its own module; file name -> where it is in the docs."""
    readme = python_blocks(README.read_text(encoding="utf-8"))
    blocks = [(f"README_{line}", f"README.md:{line}", code) for line, code in readme]
    blocks += [(_stem(b).replace("-", "_"), b.id, b.code) for b in PYTHON]
    where: dict[str, str] = {}
    for stem, place, code in blocks:
        if not any(text in code for text in WRONG_ON_PURPOSE):
            (directory / f"{stem}.py").write_text(_as_module(code), encoding="utf-8")
            where[f"{stem}.py"] = place
    return where


#: a block mypy must reject: proof that it read aiokproto's own types (an editable
#: install's import hook is invisible to mypy, and with imports it cannot find off,
#: every name from aiokproto would be Any and every block would pass)
CANARY = """from aiokproto import Producer

Producer(bootstrap_servers="localhost:9092", linger_ms="5")
"""


def test_doc_blocks_pass_mypy_strict(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    where = _write_blocks(tmp_path)
    assert len(where) > 50  # README's and every guide's blocks were found
    (tmp_path / "canary.py").write_text(CANARY, encoding="utf-8")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-error-summary",
            "--hide-error-context",
            "--cache-dir",
            str(ROOT / ".mypy_cache"),
            *(f"--disable-error-code={code}" for code in _OFF),
            *sorted(where),
            "canary.py",
        ],
        cwd=tmp_path,
        env={**os.environ, "MYPYPATH": str(ROOT)},  # this checkout's aiokproto
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode in (0, 1), run.stderr or run.stdout
    assert re.search(r"^canary\.py:3: error: .*linger_ms", run.stdout, re.M) or re.search(
        r"^canary\.py:3: error: No overload variant", run.stdout, re.M
    ), "mypy did not see aiokproto's types:\n" + run.stdout
    errors = [
        f"{where[m['file']]}: {m['message']}"
        for m in map(_ERROR.match, run.stdout.splitlines())
        if m and m["file"] in where
    ]
    assert not errors, "mypy --strict rejects these doc blocks:\n" + "\n".join(errors)
