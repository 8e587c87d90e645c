"""README.md is the project page on the package index: its links work there, its code
compiles as a file, and its first program runs as written.

An index shows README.md without the repository around it, so a relative link or
image breaks there (and an index adds no heading anchors either): every link is an
absolute https URL. A block pasted into a file must compile as one (no top-level
``await`` or ``async with``).
"""

from __future__ import annotations

import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

# [text](url), ![alt](url), [label]: url, and HTML src=/href= attributes
_INLINE = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)")
_REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.M)
_HTML = re.compile(r"""\b(?:src|href)\s*=\s*["']([^"']+)["']""", re.I)
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>```+)(?P<lang>[\w-]*)")


def links(text: str) -> list[str]:
    return [m[1] for pattern in (_INLINE, _REFERENCE, _HTML) for m in pattern.finditer(text)]


def python_blocks(text: str) -> list[tuple[int, str]]:
    """(1-based line of the fence, code) of each ```python block, indented ones too."""
    lines = text.splitlines()
    blocks: list[tuple[int, str]] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence = m["indent"], m["fence"]
        j = i + 1
        body: list[str] = []
        while j < len(lines) and lines[j].strip() != fence:
            body.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j])
            j += 1
        if m["lang"] == "python":
            blocks.append((i + 1, "\n".join(body) + "\n"))
        i = j + 1
    return blocks


def test_links_and_images_are_absolute() -> None:
    text = README.read_text(encoding="utf-8")
    found = links(text)
    assert len(found) > 20  # the patterns do find the README's links
    relative = [url for url in found if not url.startswith("https://")]
    assert not relative, f"links an index cannot follow: {relative}"


_REPO_FILE = re.compile(
    r"https://(?:github\.com/aiokproto/aiokproto/(?:blob|tree|raw)/main"
    r"|raw\.githubusercontent\.com/aiokproto/aiokproto/main)/(?P<path>[^#?]+)(?:#(?P<anchor>.*))?"
)


def anchor_of(heading: str) -> str:
    """GitHub's anchor for a Markdown heading's text."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_links_into_the_repository_name_files_and_headings_that_exist() -> None:
    text = README.read_text(encoding="utf-8")
    anchors = {anchor_of(h) for h in re.findall(r"^#{1,6} (.+)$", text, re.M)}
    into_repo = [m for m in map(_REPO_FILE.fullmatch, links(text)) if m]
    assert len(into_repo) > 20
    for m in into_repo:
        assert (ROOT / m["path"]).exists(), f"{m[0]}: no {m['path']} in the repository"
        if m["path"] == "README.md" and m["anchor"]:
            assert m["anchor"] in anchors, f"{m[0]}: no such heading"


def test_the_link_check_sees_every_kind_of_link() -> None:
    sample = (
        "[a](docs/x.md) ![b](img.png)\n[c]: ../y.md\n"
        '<img src="z.png"> [d](#anchor) [e](https://example.org/ok)\n'
    )
    assert links(sample) == ["docs/x.md", "img.png", "#anchor", "https://example.org/ok",
                             "../y.md", "z.png"]  # fmt: skip


def test_python_blocks_compile_as_files() -> None:
    blocks = python_blocks(README.read_text(encoding="utf-8"))
    assert len(blocks) >= 5
    for line, code in blocks:
        compile(code, f"README.md:{line}", "exec")  # a SyntaxError names the block


def test_top_level_async_with_would_be_caught() -> None:
    (line, code), *_ = python_blocks("text\n  ```python\n  async with x:\n      pass\n  ```\n")
    assert line == 2 and code == "async with x:\n    pass\n"
    try:
        compile(code, "block", "exec")
    except SyntaxError:
        return
    raise AssertionError("top-level async with compiled")


def first_program() -> str:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## A first program") :]
    section = section[: section.index("\n## ")]
    (_, code), *rest = python_blocks(section)
    assert not rest
    return code


def test_the_first_program_runs_as_a_file(kafka: Any, topic_name: str, tmp_path: Path) -> None:
    code = first_program()
    group = f"first-program-{uuid.uuid4().hex[:8]}"
    for placeholder, value in (
        ('"localhost:9092"', repr(kafka.bootstrap_servers)),
        ('"events"', repr(topic_name)),
        ('"first-program"', repr(group)),
    ):
        assert placeholder in code
        code = code.replace(placeholder, value)
    script = tmp_path / "first.py"
    script.write_text(code, encoding="utf-8")
    seen: set[tuple[int, int]] = set()
    for run in (1, 2):  # a second run finds the topic, and the group resumes after run 1
        done = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, timeout=90
        )
        assert done.returncode == 0, f"run {run}:\n{done.stdout}\n{done.stderr}"
        first, *lines = done.stdout.splitlines()
        assert first.startswith("last record: partition "), done.stdout
        # "partition P offset O: b'event N'"
        read = {(int(ln.split()[1]), int(ln.split()[3].rstrip(":"))) for ln in lines}
        assert len(lines) == len(read) == 10, done.stdout
        assert not read & seen, f"run {run} read run 1's records again: {done.stdout}"
        seen |= read
